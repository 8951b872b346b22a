"""KAI twin: GPU fractions (GPU group, reservation pod, queue accounting) and binpack/spread placement.

Cases ported from kai-scheduler/KAI-Scheduler v0.17.0:
- pkg/scheduler/actions/integration_tests/allocate/allocateFractionalGpu_test.go (fractions on a 2-GPU node);
- pkg/scheduler/plugins/gpupack/gpupack_test.go, gpuspread/gpuspread_test.go (GPU order scores);
- pkg/scheduler/plugins/nodeplacement/nodepack_test.go, nodespread_test.go (node scores).
"""
import os

import pytest

from simcluster.twins import kai_fractions as frac
from simcluster.twins.testkit import TwinCluster, deployment

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "clusters", "kai-frac-3x2.yaml")
QUEUES = "queues.scheduling.run.ai"
PODGROUPS = "podgroups.scheduling.run.ai"
SHARDS = "schedulingshards.kai.scheduler"
REPO = "ghcr.io/kai-scheduler/kai-scheduler"
POOL_KEY = "gpu.skaffon.io/workload"


# -- the scores, as KAI's plugin tests state them -------------------------------------------------------

@pytest.mark.parametrize("used,pack,spread", [
    (None, 0.0, 1.0),          # a whole GPU (WholeGpuIndicator)
    (0.0, 0.0, 1.0),           # a shared GPU nothing uses
    (0.5, 0.5, 0.5),           # half used
    (1.0, 1.0, 0.0),           # full
])
def test_gpu_order_scores_gpupack_and_gpuspread_test(used, pack, spread):
    assert (frac.gpu_pack_score(used), frac.gpu_spread_score(used)) == (pack, spread)


@pytest.mark.parametrize("idles,allocatable,expected", [
    # "4 nodes, 3 with GPUs small gaps": idle 0, 3, 4 of 4 (the 0-GPU node is left out of min/max)
    ([0, 3, 4], [4, 4, 4], [9.0, 9.0 / 4, 0.0]),
    # "3 nodes, 3 with GPUs all with same allocatable GPUs": idle 1 each
    ([1, 1, 1], [8, 4, 16], [9.0, 9.0, 9.0]),
    # "3 nodes, 3 with GPUs all free": idle 8, 4, 16
    ([8, 4, 16], [8, 4, 16], [9.0 * (1 - 1.0 / 3.0), 9.0, 0.0]),
])
def test_node_pack_scores_nodepack_test(idles, allocatable, expected):
    lo, hi = min(idles), max(idles)
    got = [frac.node_pack_score(lo, hi, i, a) for i, a in zip(idles, allocatable)]
    assert got == pytest.approx(expected)


def test_node_spread_score_is_the_idle_share_nodespread_test():
    assert frac.node_spread_score(3, 4) == 0.75
    assert frac.node_spread_score(0, 0) == 0.0


def test_gpu_order_binpack_fills_the_fullest_shared_gpu_spread_a_whole_one_first():
    groups = {"a": 0.5, "b": 0.25, "c": 0.75}
    assert frac.order_gpus(groups, 1, 0.5, "binpack") == ["a", "b", frac.WHOLE]     # c + 0.5 > 1
    assert frac.order_gpus(groups, 1, 0.5, "spread") == [frac.WHOLE, "b", "a"]
    assert frac.order_gpus({"a": 0.6}, 0, 0.5, "binpack") == []


def test_kai_refuses_fractions_outside_0_1_as_its_validator():
    def v(**ann):
        return frac.validation_error({"metadata": {"annotations": ann}})
    assert v(**{"gpu-fraction": "0.5"}) is None
    assert v(**{"gpu-fraction": "1"}) == "gpu-fraction annotation value must be a positive number smaller than 1.0"
    assert v(**{"gpu-memory": "0"}) == "gpu-memory annotation value must be a positive integer greater than 0"


# -- the twin ------------------------------------------------------------------------------------------

def config(sharing=True, pool_key=None):
    svc = lambda name: {"service": {"enabled": True, "image": {"name": name, "repository": REPO, "tag": "v0.17.0"}}}
    spec = {"namespace": "kai-scheduler", "binder": svc("binder"), "podGrouper": svc("podgrouper"),
            "podGroupController": svc("podgroupcontroller"), "queueController": svc("queuecontroller"),
            "admission": dict(svc("admission"), gpuSharing=sharing), "scheduler": svc("scheduler")}
    if pool_key:
        spec["global"] = {"nodePoolLabelKey": pool_key}
    return {"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"}, "spec": spec}


def queue(name, quota, parent=None, labels=None):
    spec = {"resources": {"gpu": {"quota": quota, "limit": -1, "overQuotaWeight": 1},
                          "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                          "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}


def shard(value, strategy):
    return {"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", "metadata": {"name": value or "default"},
            "spec": {"partitionLabelValue": value, "placementStrategy": {"gpu": strategy, "cpu": strategy}}}


def podgroup(name, ns, min_member, labels=None):
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"minMember": min_member, "queue": ns}}


def frac_pod(name, ns, fraction, group=None):
    ann = {"gpu-fraction": str(fraction), "simcluster.skaffon.io/behaviour": "run"}
    if group:
        ann.update({"pod-group-name": group, "kai.scheduler/skip-podgrouper": "true"})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "annotations": ann,
                                                             "labels": {"kai.scheduler/queue": ns}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "busybox"}]}}


def gpu_pod(name, ns, group, gpus):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": {
                "pod-group-name": group, "kai.scheduler/skip-podgrouper": "true",
                "simcluster.skaffon.io/behaviour": "run"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


class Kai(TwinCluster):
    def __init__(self, gpus=2, **kw):
        super().__init__(CLUSTER, **kw)
        for name in ("kai-scheduler", "kai-resource-reservation", "team-a", "team-b"):
            self.namespace(name)
        for name in ("gpu-1", "gpu-2", "gpu-3"):
            node = self.store.get("nodes", None, name)
            node["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)     # as a running device plugin reports
            node["status"]["capacity"]["nvidia.com/gpu"] = str(gpus)
            self.store.update_status("nodes", node)

    def install(self, sharing=True, pool_key=None, shards=()):
        for s in shards:
            self.store.create(SHARDS, s)
        self.store.create("deployments.apps", deployment("kai-operator", "kai-scheduler",
                                                         image=REPO + "/operator:v0.17.0"))
        self.store.create("configs.kai.scheduler", config(sharing, pool_key))
        self.wait(lambda: (self.store.get("deployments.apps", "kai-scheduler", "kai-scheduler-default") or {})
                  .get("status", {}).get("readyReplicas"), what="scheduler deployed by the operator")
        self.store.create(QUEUES, queue("research", 6))
        for team in ("team-a", "team-b"):
            self.store.create(QUEUES, queue(team, 2, parent="research"))

    def placed(self, ns, name):
        pod = self.store.get("pods", ns, name)
        return pod["spec"].get("nodeName"), (pod["metadata"].get("labels") or {}).get(frac.GROUP_LABEL)

    def reservations(self):
        return self.store.list("pods", frac.RESERVATION_NS)

    def pending_message(self, ns, name):
        pod = self.store.get("pods", ns, name)
        conds = [c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"]
        return conds[0]["message"] if conds and conds[0]["status"] == "False" else None


@pytest.fixture
def kai():
    with Kai() as c:
        c.install()
        yield c
        assert c.handle.errors == []


def bound(c, ns, *names):
    return lambda: all(c.placed(ns, n)[0] for n in names)


def test_two_halves_share_one_gpu_with_one_reservation_pod_the_third_takes_the_next_gpu(kai):
    kai.store.create("pods", frac_pod("f1", "team-a", 0.5))
    kai.wait(bound(kai, "team-a", "f1"), what="f1 bound")
    kai.store.create("pods", frac_pod("f2", "team-a", 0.5))
    kai.wait(bound(kai, "team-a", "f2"), what="f2 bound")
    (n1, g1), (n2, g2) = kai.placed("team-a", "f1"), kai.placed("team-a", "f2")
    assert (n1, g1) == (n2, g2) and g1, "two 0.5 on one GPU group"
    res = kai.reservations()
    assert len(res) == 1
    r = res[0]
    assert r["metadata"]["name"].startswith("gpu-reservation-%s-" % n1)
    assert r["metadata"]["labels"] == {"app": "kai-resource-reservation", "runai-gpu-group": g1}
    assert r["spec"]["nodeName"] == n1
    assert r["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"},
                                                      "requests": {"nvidia.com/gpu": "1"}}
    uuid = r["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"]
    # what the pod sees: the binder's ConfigMaps, named by the pod's runai/shared-gpu-configmap annotation
    prefix = kai.store.get("pods", "team-a", "f1")["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    assert kai.store.get("configmaps", "team-a", prefix + "-0-evar")["data"] == {"NVIDIA_VISIBLE_DEVICES": uuid}
    assert kai.store.get("configmaps", "team-a", prefix + "-0")["data"]["GPU_PORTION"] == "0.5"
    # the queue counts 0.5 per pod
    kai.wait(lambda: kai.store.get(QUEUES, None, "team-a").get("status", {}).get("allocated", {})
             .get("nvidia.com/gpu") == "1", what="team-a allocated 1 GPU (2 x 0.5)")
    # binpack: the third goes to the next GPU of the same node (fewest idle GPUs), with a new reservation
    kai.store.create("pods", frac_pod("f3", "team-a", 0.5))
    kai.wait(bound(kai, "team-a", "f3"), what="f3 bound")
    n3, g3 = kai.placed("team-a", "f3")
    assert n3 == n1 and g3 != g1
    assert sorted(r["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"] for r in kai.reservations()) == [
        "GPU-0", "GPU-1"]
    kai.wait(lambda: kai.store.get(QUEUES, None, "team-a")["status"]["allocated"]["nvidia.com/gpu"] == "1.5")
    # the group's last pod gone: its reservation pod goes too (syncForPods)
    kai.store.delete("pods", "team-a", "f3")
    kai.wait(lambda: len(kai.reservations()) == 1, what="the reservation of f3's GPU removed")


def test_a_third_half_waits_when_no_gpu_is_left():
    with Kai(gpus=1) as c:
        c.install()
        for n in ("gpu-2", "gpu-3"):                 # one GPU in the cluster
            node = c.store.get("nodes", None, n)
            node["spec"]["unschedulable"] = True
            c.store.update("nodes", node)
        for i in (1, 2):
            c.store.create("pods", frac_pod("f%d" % i, "team-a", 0.5))
            c.wait(bound(c, "team-a", "f%d" % i))
        c.store.create("pods", frac_pod("f3", "team-a", 0.5))
        c.settle()
        assert c.placed("team-a", "f3") == (None, None)
        assert "0/3 nodes are available" in c.pending_message("team-a", "f3")
        c.store.delete("pods", "team-a", "f1")
        c.wait(bound(c, "team-a", "f3"), what="f3 takes the half f1 left")
        assert c.placed("team-a", "f3") == c.placed("team-a", "f2")
        assert c.handle.errors == []


def test_allocate_fractional_gpu_1_shared_running_4_pending_allocate_3(kai):
    """allocateFractionalGpu_test.go: "1 interactive shared gpu job running, 4 pending interactive shared
    gpus pending - allocate 3 of the shared GPUs jobs" (one node of 2 GPUs)."""
    for n in ("gpu-2", "gpu-3"):
        node = kai.store.get("nodes", None, n)
        node["spec"]["unschedulable"] = True
        kai.store.update("nodes", node)
    kai.store.create(PODGROUPS, podgroup("j0", "team-a", 1))
    kai.store.create("pods", frac_pod("running", "team-a", 0.5, group="j0"))
    kai.wait(bound(kai, "team-a", "running"))
    for i, share in enumerate((0.6, 0.5, 0.5, 0.3), start=1):
        kai.store.create(PODGROUPS, podgroup("j%d" % i, "team-a", 1))
        kai.store.create("pods", frac_pod("p%d" % i, "team-a", share, group="j%d" % i))
    kai.wait(bound(kai, "team-a", "p1", "p2", "p4"), what="0.6, 0.5 and 0.3 placed")
    kai.settle()
    g0 = kai.placed("team-a", "running")[1]
    g1 = kai.placed("team-a", "p1")[1]
    assert g1 != g0
    assert kai.placed("team-a", "p2")[1] == g0          # 0.5 + 0.5 on GPU 0
    assert kai.placed("team-a", "p3") == (None, None)   # 0.5 fits on neither
    assert kai.placed("team-a", "p4")[1] == g1          # 0.6 + 0.3 on GPU 1


def test_allocate_fractional_over_quota_goes_to_a_new_gpu(kai):
    """allocateFractionalGpu_test.go: "Allow allocation of fractional training when over quota with fractional
    jobs" (deserved 1 GPU, two 0.5 running on GPU 0, a third 0.5 -> GPU 1)."""
    q = kai.store.get(QUEUES, None, "team-b")
    q["spec"]["resources"]["gpu"]["quota"] = 1
    kai.store.update(QUEUES, q)
    for i in range(3):
        kai.store.create("pods", frac_pod("t%d" % i, "team-b", 0.5))
        kai.wait(bound(kai, "team-b", "t%d" % i))
    groups = {kai.placed("team-b", "t%d" % i) for i in range(3)}
    assert len(groups) == 2 and len({n for n, _ in groups}) == 1
    kai.wait(lambda: kai.store.get(QUEUES, None, "team-b")["status"]["allocated"]["nvidia.com/gpu"] == "1.5")


def test_binpack_keeps_whole_nodes_free_for_a_gang_spread_does_not():
    for strategy, expect_gang in (("binpack", True), ("spread", False)):
        with Kai() as c:
            c.install(shards=[shard("", strategy)])
            for i in range(3):
                c.store.create("pods", frac_pod("f%d" % i, "team-a", 0.5))
                c.wait(bound(c, "team-a", "f%d" % i))
            nodes = {c.placed("team-a", "f%d" % i)[0] for i in range(3)}
            assert len(nodes) == (1 if strategy == "binpack" else 3), (strategy, nodes)
            q = c.store.get(QUEUES, None, "team-b")
            q["spec"]["resources"]["gpu"]["quota"] = 4
            c.store.update(QUEUES, q)
            c.store.create(PODGROUPS, podgroup("gang", "team-b", 2))
            for i in range(2):
                c.store.create("pods", gpu_pod("w%d" % i, "team-b", "gang", gpus=2))      # whole nodes
            if expect_gang:
                c.wait(bound(c, "team-b", "w0", "w1"), what="the gang on the two free nodes")
                assert {c.placed("team-b", "w%d" % i)[0] for i in range(2)}.isdisjoint(nodes)
            else:
                c.settle()
                assert c.placed("team-b", "w0")[0] is None   # every node holds a shared GPU
            assert c.handle.errors == []


def test_spread_puts_a_fraction_on_a_whole_gpu_before_a_shared_one():
    with Kai() as c:
        c.install(shards=[shard("", "spread")])
        for n in ("gpu-2", "gpu-3"):
            node = c.store.get("nodes", None, n)
            node["spec"]["unschedulable"] = True
            c.store.update("nodes", node)
        for i in range(2):
            c.store.create("pods", frac_pod("s%d" % i, "team-a", 0.25))
            c.wait(bound(c, "team-a", "s%d" % i))
        assert c.placed("team-a", "s0")[1] != c.placed("team-a", "s1")[1]
        assert c.handle.errors == []


def test_fractions_wait_while_gpu_sharing_is_off():
    with Kai() as c:
        c.install(sharing=False)
        c.store.create("pods", frac_pod("f", "team-a", 0.5))
        c.settle()
        assert c.placed("team-a", "f") == (None, None)
        assert c.pending_message("team-a", "f") == (
            "Unschedulable: attempting to create a pod team-a/f with gpu sharing request, while GPU sharing is disabled")
        assert c.handle.errors == []


def test_a_shard_per_pool_schedules_only_its_nodes_queues_and_podgroups():
    with Kai() as c:
        c.label("gpu-1", {POOL_KEY: "training"})
        c.label("gpu-2", {POOL_KEY: "inference"})
        c.label("gpu-3", {POOL_KEY: "inference"})
        c.install(pool_key=POOL_KEY, shards=[shard("", "binpack"), shard("training", "binpack"),
                                              shard("inference", "spread")])
        for name, value in (("research", "training"), ("team-a", "training")):
            q = c.store.get(QUEUES, None, name)
            q["metadata"]["labels"] = {POOL_KEY: value}
            c.store.update(QUEUES, q)
        c.store.create(QUEUES, queue("serving", 6, labels={POOL_KEY: "inference"}))
        q = c.store.get(QUEUES, None, "team-b")
        q["spec"]["parentQueue"] = "serving"
        q["metadata"]["labels"] = {POOL_KEY: "inference"}
        c.store.update(QUEUES, q)
        # the pod-grouper copies the pod's pool label to the PodGroup: the shard
        for ns, value in (("team-a", "training"), ("team-b", "inference")):
            for i in range(2):
                p = frac_pod("p%d" % i, ns, 0.5)
                p["metadata"]["labels"][POOL_KEY] = value
                c.store.create("pods", p)
        c.wait(bound(c, "team-a", "p0", "p1"))
        c.wait(bound(c, "team-b", "p0", "p1"))
        assert {c.placed("team-a", "p%d" % i)[0] for i in range(2)} == {"gpu-1"}
        assert {c.placed("team-b", "p%d" % i)[0] for i in range(2)} == {"gpu-2", "gpu-3"}   # spread
        pg = [g for g in c.store.list(PODGROUPS, "team-b")][0]
        assert pg["metadata"]["labels"][POOL_KEY] == "inference"
        assert c.handle.errors == []
