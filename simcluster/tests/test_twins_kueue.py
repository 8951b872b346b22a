"""Kueue twin: suspend, Workload, admission by nominal quota and cohort, reclaim, flavors, gang."""
import os
import re

import pytest
import yaml

from simcluster.twins.testkit import TwinCluster, deployment

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "clusters", "kai-8gpu.yaml")
WL = "workloads.kueue.x-k8s.io"
CQ = "clusterqueues.kueue.x-k8s.io"
API = "kueue.x-k8s.io/v1beta2"
POOL = {"gpu.skaffon.io/accelerator": "h100"}
TOL = {"key": "gpu.skaffon.io/workload", "operator": "Equal", "value": "training", "effect": "NoSchedule"}


def cluster_queue(name, nominal, cohort="research", **extra):
    res = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    res.update(extra)
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
                     "cohortName": cohort, "preemption": {"reclaimWithinCohort": "Any"},
                     "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                         {"name": "h100", "resources": [res]}]}]}}


def job(name, ns, pods, queue=None, requests=None):
    labels = {"kueue.x-k8s.io/queue-name": queue or ns}
    resources = {"limits": {"nvidia.com/gpu": "1"}}
    if requests:
        resources["requests"] = dict(requests, **{"nvidia.com/gpu": "1"})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"parallelism": pods, "completions": pods, "template": {
                "metadata": {"annotations": {"simcluster.skaffon.io/behaviour": "run"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox", "resources": resources}]}}}}


def manager_deployment(config=None):
    """The manager as the chart runs it: --config=<file> from the ConfigMap kueue-manager-config."""
    if config is None:
        return deployment("kueue-controller-manager", "kueue-system", image="registry.k8s.io/kueue/kueue:v0.19.2")
    dep = deployment("kueue-controller-manager", "kueue-system", image="registry.k8s.io/kueue/kueue:v0.19.2",
                     volumes=[{"name": "manager-config", "configMap": {"name": "kueue-manager-config"}}])
    dep["spec"]["template"]["spec"]["containers"][0].update({
        "args": ["--config=/controller_manager_config.yaml", "--zap-log-level=2"],
        "volumeMounts": [{"name": "manager-config", "mountPath": "/controller_manager_config.yaml",
                          "subPath": "controller_manager_config.yaml"}]})
    return dep


class KueueCluster(TwinCluster):
    def __init__(self, manager=True, config=None, **kw):
        super().__init__(CLUSTER, **kw)
        for name in ("kueue-system", "team-a", "team-b"):
            self.namespace(name, {"kubernetes.io/metadata.name": name})
        node = self.store.get("nodes", None, "gpu-1")
        node["status"]["allocatable"]["nvidia.com/gpu"] = "8"
        node["status"]["capacity"]["nvidia.com/gpu"] = "8"
        self.store.update_status("nodes", node)
        self.label("gpu-1", POOL)
        if config is not None:
            self.store.create("configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                "data": {"controller_manager_config.yaml": yaml.safe_dump(config)}})
        if manager:
            self.store.create("deployments.apps", manager_deployment(config))
            self.wait(lambda: (self.store.get("deployments.apps", "kueue-system", "kueue-controller-manager")
                               .get("status") or {}).get("readyReplicas"), what="kueue running")
        self.store.create("resourceflavors.kueue.x-k8s.io", {
            "apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
            "spec": {"nodeLabels": dict(POOL), "tolerations": [dict(TOL)]}})
        for team in ("team-a", "team-b"):
            self.store.create(CQ, cluster_queue(team, 4))
            self.store.create("localqueues.kueue.x-k8s.io", {
                "apiVersion": API, "kind": "LocalQueue", "metadata": {"name": team, "namespace": team},
                "spec": {"clusterQueue": team}})

    def running(self, ns, prefix=""):
        return sorted(p["metadata"]["name"] for p in self.pods(ns, prefix)
                      if (p.get("status") or {}).get("phase") == "Running")

    def workload(self, ns, job_name):
        for w in self.store.list(WL, ns):
            if w["metadata"]["name"].startswith("job-%s-" % job_name):
                return w
        return None


@pytest.fixture
def kq():
    with KueueCluster() as c:
        yield c
        assert c.handle.errors == []


def test_job_is_suspended_gets_its_workload_and_runs_on_the_flavor(kq):
    kq.store.create("jobs.batch", job("train", "team-a", 2))
    kq.wait(lambda: len(kq.running("team-a")) == 2, what="admitted job runs")
    wl = kq.workload("team-a", "train")
    assert re.match(r"^job-train-[0-9a-f]{5}$", wl["metadata"]["name"])
    assert wl["status"]["admission"]["clusterQueue"] == "team-a"
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"nvidia.com/gpu": "h100"}
    j = kq.store.get("jobs.batch", "team-a", "train")
    assert j["spec"]["suspend"] is False
    assert j["spec"]["template"]["spec"]["nodeSelector"] == POOL
    assert TOL in j["spec"]["template"]["spec"]["tolerations"]


def test_borrow_while_idle_then_reclaim_within_the_cohort(kq):
    kq.store.create("jobs.batch", job("one", "team-a", 4))
    kq.wait(lambda: len(kq.running("team-a")) == 4)
    kq.store.create("jobs.batch", job("two", "team-a", 4))      # borrows team-b's idle 4
    kq.wait(lambda: len(kq.running("team-a")) == 8, what="team-a runs 8 while team-b is idle")
    kq.store.create("jobs.batch", job("mine", "team-b", 4))
    kq.wait(lambda: len(kq.running("team-b")) == 4 and len(kq.running("team-a")) == 4, timeout=20,
            what="team-b gets its 4 back")
    evicted = kq.workload("team-a", "two")
    conds = {c["type"]: c for c in evicted["status"]["conditions"]}
    assert conds["Evicted"]["reason"] == "Preempted"
    assert conds["Preempted"]["reason"] == "InCohortReclamation"
    assert kq.store.get("jobs.batch", "team-a", "two")["spec"]["suspend"] is True
    assert kq.running("team-a", "one")            # the older job keeps running


def test_gang_of_4_with_room_for_3_starts_nothing_then_all(kq):
    kq.store.create("jobs.batch", job("filler", "team-b", 4))
    kq.store.create("jobs.batch", job("small", "team-a", 1))
    kq.wait(lambda: len(kq.running("team-b")) == 4 and len(kq.running("team-a")) == 1)
    kq.store.create("jobs.batch", job("gang", "team-a", 4))     # room for 3 in team-a's quota
    kq.settle()
    assert kq.running("team-a", "gang") == []
    cond = [c for c in kq.workload("team-a", "gang")["status"]["conditions"] if c["type"] == "QuotaReserved"][0]
    assert cond["message"] == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                               "nvidia.com/gpu in flavor h100, 1 more needed")
    kq.store.delete("jobs.batch", "team-a", "small")
    kq.wait(lambda: len(kq.running("team-a", "gang")) == 4, timeout=20, what="the whole gang")


def test_lowered_quota_evicts_nothing(kq):
    kq.store.create("jobs.batch", job("train", "team-a", 4))
    kq.wait(lambda: len(kq.running("team-a")) == 4)
    cq = kq.store.get(CQ, None, "team-a")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 1
    kq.store.update(CQ, cq)
    kq.settle()
    assert len(kq.running("team-a")) == 4
    assert "admission" in kq.workload("team-a", "train")["status"]
    usage = kq.store.get(CQ, None, "team-a")["status"]["flavorsUsage"]
    assert usage == [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "4", "borrowed": "3"}]}]
    kq.store.delete("jobs.batch", "team-a", "train")
    kq.wait(lambda: kq.store.get(CQ, None, "team-a")["status"]["flavorsUsage"][0]["resources"][0]["total"] == "0",
            what="usage back to 0")


def test_borrowing_limit_and_namespace_selector(kq):
    cq = kq.store.get(CQ, None, "team-a")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 1
    kq.store.update(CQ, cq)
    kq.store.create("jobs.batch", job("big", "team-a", 6))      # 4 nominal + 1 borrowable < 6
    kq.store.create("localqueues.kueue.x-k8s.io", {"apiVersion": API, "kind": "LocalQueue",
                                                  "metadata": {"name": "steal", "namespace": "team-a"},
                                                  "spec": {"clusterQueue": "team-b"}})
    kq.store.create("jobs.batch", job("sneaky", "team-a", 1, queue="steal"))
    kq.settle()
    assert kq.running("team-a") == []
    big = [c for c in kq.workload("team-a", "big")["status"]["conditions"] if c["type"] == "QuotaReserved"][0]
    assert "1 more needed" in big["message"]
    sneaky = [c for c in kq.workload("team-a", "sneaky")["status"]["conditions"] if c["type"] == "QuotaReserved"][0]
    assert sneaky["message"] == "Workload namespace doesn't match ClusterQueue selector"


def test_without_a_running_controller_nothing_is_queued():
    with KueueCluster(manager=False) as c:
        c.store.create("jobs.batch", job("train", "team-a", 1))
        c.settle()
        assert c.store.list(WL, "team-a") == []


def manager(kq, replicas):
    """Scale the Kueue controller manager and wait until its Deployment says so."""
    dep = kq.store.get("deployments.apps", "kueue-system", "kueue-controller-manager")
    dep["spec"]["replicas"] = replicas
    kq.store.update("deployments.apps", dep)
    kq.wait(lambda: ((kq.store.get("deployments.apps", "kueue-system", "kueue-controller-manager")
                      .get("status") or {}).get("readyReplicas") or 0) == replicas,
            what="kueue manager at %d replicas" % replicas)


def fair_cohort(kq):
    """team-a and team-b nominal 1 with fair sharing weights 1 and 3, and a lender with 4."""
    kq.store.create(CQ, cluster_queue("lender", 4))
    for team, weight in (("team-a", 1), ("team-b", 3)):
        cq = kq.store.get(CQ, None, team)
        cq["spec"]["fairSharing"] = {"weight": weight}
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 1
        kq.store.update(CQ, cq)


def test_fair_sharing_borrows_by_share_and_weight(kq):
    """Cohort: team-a and team-b nominal 1 (weights 1 and 3) and a lender with 4. Both want 4.

    FIFO would give the first submitter 4; fair sharing gives the borrowed 4 by dominant share
    per weight: team-a 2, team-b 4."""
    fair_cohort(kq)
    for team in ("team-a", "team-b"):
        kq.store.delete("localqueues.kueue.x-k8s.io", team, team)
    for team in ("team-a", "team-b"):           # all pending at once: no LocalQueue yet
        for i in range(4):
            kq.store.create("jobs.batch", job("%s%d" % (team[-1], i), team, 1))
    kq.wait(lambda: len(kq.store.list(WL)) == 8, what="8 workloads")
    # Both queues exist before one admission cycle sees either, so this is the order within one cycle;
    # the first queue being admitted alone first is test_fair_sharing_preempts_whoever_came_first.
    manager(kq, 0)
    for team in ("team-a", "team-b"):
        kq.store.create("localqueues.kueue.x-k8s.io", {"apiVersion": API, "kind": "LocalQueue",
                                                      "metadata": {"name": team, "namespace": team},
                                                      "spec": {"clusterQueue": team}})
    manager(kq, 1)
    kq.wait(lambda: len(kq.running("team-a")) + len(kq.running("team-b")) == 6, what="6 admitted")
    kq.settle()
    assert (len(kq.running("team-a")), len(kq.running("team-b"))) == (2, 4)


def test_lending_limit_caps_what_the_cohort_borrows(kq):
    cq = kq.store.get(CQ, None, "team-b")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = 2
    kq.store.update(CQ, cq)
    for i in range(4):
        kq.store.create("jobs.batch", job("j%d" % i, "team-a", 2))
    kq.wait(lambda: len(kq.running("team-a")) == 6, what="4 own + 2 lent")
    kq.settle()
    assert len(kq.running("team-a")) == 6
    usage = kq.store.get(CQ, None, "team-a")["status"]["flavorsUsage"][0]["resources"][0]
    assert (usage["total"], usage["borrowed"]) == ("6", "2")


def test_controller_whose_image_the_mirror_lacks_queues_nothing():
    with KueueCluster(manager=False, registries=["registry.local:5000"]) as c:
        c.store.create("deployments.apps", deployment("kueue-controller-manager", "kueue-system",
                                                      image="registry.k8s.io/kueue/kueue:v0.19.2"))
        c.store.create("jobs.batch", job("train", "team-a", 1))
        c.wait(lambda: [p for p in c.pods("kueue-system")
                        if ((p.get("status") or {}).get("containerStatuses") or [{}])[0].get("state", {})
                        .get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff")],
               what="the controller image does not pull")
        c.settle()
        assert c.store.list(WL, "team-a") == []
        assert not c.store.get("jobs.batch", "team-a", "train")["spec"].get("suspend")


def test_a_flavor_the_pods_node_selector_rules_out_is_skipped(kq):
    # a second flavor first in the queue, for nodes labelled l40s: a pod selecting h100 must get flavor h100
    kq.store.create("resourceflavors.kueue.x-k8s.io", {
        "apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "l40s"},
        "spec": {"nodeLabels": {"gpu.skaffon.io/accelerator": "l40s"}}})
    cq = kq.store.get(CQ, None, "team-a")
    cq["spec"]["resourceGroups"][0]["flavors"].insert(0, {"name": "l40s", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": 4}]})
    kq.store.update(CQ, cq)
    pinned = job("pinned", "team-a", 1)
    pinned["spec"]["template"]["spec"]["nodeSelector"] = dict(POOL)
    kq.store.create("jobs.batch", pinned)
    kq.wait(lambda: len(kq.running("team-a", "pinned")) == 1, what="the pinned job runs on its flavor")
    assigned = kq.workload("team-a", "pinned")["status"]["admission"]["podSetAssignments"][0]["flavors"]
    assert assigned == {"nvidia.com/gpu": "h100"}
    # no selector: the first flavor that fits, as before
    kq.store.create("jobs.batch", job("free", "team-a", 1))
    kq.wait(lambda: (kq.workload("team-a", "free") or {}).get("status", {}).get("admission"), what="admitted")
    assert kq.workload("team-a", "free")["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "nvidia.com/gpu": "l40s"}


def test_fair_sharing_preempts_whoever_came_first(kq):
    """The same cohort, but team-a's 4 are admitted (borrowing 3) before team-b has a LocalQueue.

    Kueue's fair sharing preemption takes back from the queue of the higher share until both shares
    are equal: the same 2 and 4 as when both arrive together, whatever the order of arrival."""
    fair_cohort(kq)
    kq.store.delete("localqueues.kueue.x-k8s.io", "team-b", "team-b")
    for team in ("team-a", "team-b"):
        for i in range(4):
            kq.store.create("jobs.batch", job("%s%d" % (team[-1], i), team, 1))
    kq.wait(lambda: len(kq.running("team-a")) == 4, what="team-a borrows 3 while team-b has no queue")
    kq.store.create("localqueues.kueue.x-k8s.io", {"apiVersion": API, "kind": "LocalQueue",
                                                  "metadata": {"name": "team-b", "namespace": "team-b"},
                                                  "spec": {"clusterQueue": "team-b"}})
    kq.wait(lambda: (len(kq.running("team-a")), len(kq.running("team-b"))) == (2, 4), timeout=20,
            what="team-a 2, team-b 4")
    kq.settle()
    assert (len(kq.running("team-a")), len(kq.running("team-b"))) == (2, 4)
    preempted = [c for w in kq.store.list(WL, "team-a") for c in (w.get("status") or {}).get("conditions") or []
                 if c["type"] == "Preempted" and c["status"] == "True"]
    assert [c["reason"] for c in preempted] == ["InCohortFairSharing"] * 2
    assert all(c["message"].endswith("due to Fair Sharing within the cohort") for c in preempted)


# A pod asks for cpu and memory (a LimitRange gives every pod some), the ClusterQueues cover nvidia.com/gpu only.
CPU = {"cpu": "100m", "memory": "64Mi"}


def condition(wl, ctype):
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


@pytest.mark.parametrize("config", [None, {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}],
                         ids=["no-config-file", "chart-default-config"])
def test_a_request_no_resource_group_covers_blocks_the_workload(config):
    # quota_check_strategy_test.go, BlockUndeclared (the default): an undeclared resource fits no flavor
    with KueueCluster(config=config) as kq:
        kq.store.create("jobs.batch", job("train", "team-a", 1, requests=CPU))
        kq.wait(lambda: condition(kq.workload("team-a", "train") or {}, "QuotaReserved").get("status") == "False")
        kq.settle()
        wl = kq.workload("team-a", "train")
        assert condition(wl, "QuotaReserved")["message"] == \
            "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"
        assert "admission" not in wl["status"]
        assert kq.store.get("jobs.batch", "team-a", "train")["spec"]["suspend"] is True
        assert kq.handle.errors == []


@pytest.mark.parametrize("resources", [{"quotaCheckStrategy": "IgnoreUndeclared"},
                                       {"excludeResourcePrefixes": ["cpu", "memory"]}],
                         ids=["IgnoreUndeclared", "excludeResourcePrefixes"])
def test_undeclared_resources_ignored_then_reclaim_counts_only_the_covered_ones(resources):
    # quota_check_strategy_test.go, IgnoreUndeclared: admitted, the undeclared resource not in resourceUsage;
    # a queue within its nominal quota reclaims from a borrower with the same pods (preemption counts the
    # covered resources only)
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "resources": resources}
    with KueueCluster(config=config) as kq:
        kq.store.create("jobs.batch", job("one", "team-a", 4, requests=CPU))
        kq.wait(lambda: len(kq.running("team-a")) == 4, what="admitted with cpu and memory undeclared")
        usage = kq.workload("team-a", "one")["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
        assert usage == {"nvidia.com/gpu": "4"}
        kq.store.create("jobs.batch", job("two", "team-a", 4, requests=CPU))
        kq.wait(lambda: len(kq.running("team-a")) == 8, what="team-a borrows team-b's idle 4")
        kq.store.create("jobs.batch", job("mine", "team-b", 4, requests=CPU))
        kq.wait(lambda: len(kq.running("team-b")) == 4 and len(kq.running("team-a")) == 4, timeout=20,
                what="team-b gets its 4 back")
        assert condition(kq.workload("team-a", "two"), "Preempted")["reason"] == "InCohortReclamation"
        assert kq.handle.errors == []
