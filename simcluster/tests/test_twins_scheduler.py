"""Scheduler twin: binding, resource fit, taints, affinity and the real-style message."""
import pytest

from simcluster.twins.testkit import TwinCluster, pod, status_word


@pytest.fixture(params=["fake", "real"])
def cluster(request):
    with TwinCluster("default.yaml", store=request.param) as c:
        yield c


def _with_gpus(c):
    """GPUs become allocatable when the operator's device plugin runs."""
    c.install_operator()
    c.wait(lambda: c.allocatable("gpu-h100-1") == "8" and c.allocatable("gpu-l40s-1") == "4",
           what="GPUs allocatable")


def _scheduled(c, name, ns="default"):
    p = c.pod(ns, name)
    for cond in (p.get("status") or {}).get("conditions") or []:
        if cond["type"] == "PodScheduled":
            return cond
    return None


def test_gpu_pod_is_bound_to_a_node_with_free_gpus(cluster):
    c = cluster
    _with_gpus(c)
    c.store.create("pods", pod("train", gpus=6))
    c.wait(lambda: c.pod("default", "train")["spec"].get("nodeName"))
    assert c.pod("default", "train")["spec"]["nodeName"] == "gpu-h100-1"
    assert _scheduled(c, "train")["status"] == "True"
    c.wait(lambda: status_word(c.pod("default", "train")) == "Running")
    ev = c.wait(lambda: c.events("Scheduled", "train"))
    assert ev[0]["message"] == "Successfully assigned default/train to gpu-h100-1"


def test_no_node_with_enough_gpus_leaves_the_pod_pending_with_the_real_message(cluster):
    c = cluster
    _with_gpus(c)
    c.store.create("pods", pod("huge", gpus=9))
    cond = c.wait(lambda: _scheduled(c, "huge"), what="PodScheduled condition")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    assert "preemption: 0/3 nodes are available: 3 No preemption victims found" in cond["message"]
    assert c.pod("default", "huge")["status"]["phase"] == "Pending"
    assert not c.pod("default", "huge")["spec"].get("nodeName")
    ev = c.wait(lambda: c.events("FailedScheduling", "huge"))    # recorded right after the status
    assert ev[0]["type"] == "Warning" and ev[0]["message"] == cond["message"]


def test_gpus_are_accounted_between_pods(cluster):
    c = cluster
    _with_gpus(c)
    c.store.create("pods", pod("a", gpus=8))
    c.store.create("pods", pod("b", gpus=4))
    c.store.create("pods", pod("c", gpus=1))
    cond = c.wait(lambda: (_scheduled(c, "c") or {}).get("status") == "False" and _scheduled(c, "c"))
    assert "3 Insufficient nvidia.com/gpu" in cond["message"]
    c.store.delete("pods", "default", "a")
    c.wait(lambda: c.pod("default", "c")["spec"].get("nodeName") == "gpu-h100-1",
           what="rescheduled once GPUs are free")


def test_reasons_aggregate_taints_affinity_and_resources(cluster):
    c = cluster
    _with_gpus(c)
    c.store.merge_patch("nodes", None, "gpu-l40s-1", {"spec": {"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}})
    c.store.create("pods", pod("picky", gpus=1, nodeSelector={"topology.kubernetes.io/zone": "b"}))
    cond = c.wait(lambda: _scheduled(c, "picky"))
    msg = cond["message"]
    assert msg.startswith("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
                          "1 node(s) didn't match Pod's node affinity/selector, "
                          "1 node(s) had untolerated taint {nvidia.com/gpu: present}.")
    assert "1 No preemption victims found for incoming pod, 2 Preemption is not helpful" in msg


def test_tolerations_and_required_node_affinity_are_honoured(cluster):
    c = cluster
    _with_gpus(c)
    # the pool's taint and accelerator label, as node_prereqs puts them on the node
    c.store.merge_patch("nodes", None, "gpu-l40s-1", {"metadata": {"labels": {"gpu.skaffon.io/accelerator": "l40s"}},
                                                      "spec": {"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}})
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "gpu.skaffon.io/accelerator", "operator": "In", "values": ["l40s"]}]}]}}}
    c.store.create("pods", pod("l40s", gpus=1, affinity=affinity,
                               tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists",
                                             "effect": "NoSchedule"}]))
    c.wait(lambda: c.pod("default", "l40s")["spec"].get("nodeName") == "gpu-l40s-1")


def test_cordoned_node_is_skipped(cluster):
    c = cluster
    _with_gpus(c)
    c.store.merge_patch("nodes", None, "gpu-h100-1", {"spec": {"unschedulable": True}})
    c.store.create("pods", pod("x", gpus=5))
    cond = c.wait(lambda: _scheduled(c, "x"))
    assert "1 node(s) were unschedulable" in cond["message"]


def test_gpu_pod_before_operator_is_unschedulable(cluster):
    c = cluster
    c.store.create("pods", pod("early", gpus=1))
    cond = c.wait(lambda: _scheduled(c, "early"))
    assert cond["message"].startswith("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")


def test_other_schedulers_pods_are_left_alone(cluster):
    c = cluster
    c.store.create("pods", pod("kai", schedulerName="kai-scheduler"))
    c.store.create("pods", pod("plain"))
    c.wait(lambda: c.pod("default", "plain")["spec"].get("nodeName"))
    c.settle()
    p = c.pod("default", "kai")
    assert not p["spec"].get("nodeName") and not (p.get("status") or {}).get("conditions")


def test_cpu_and_memory_requests_are_checked(cluster):
    c = cluster
    c.store.create("pods", pod("fat", resources={"requests": {"cpu": "200", "memory": "1Gi"}}))
    cond = c.wait(lambda: _scheduled(c, "fat"))
    assert "3 Insufficient cpu" in cond["message"]
    c.store.create("pods", pod("slim", resources={"requests": {"cpu": "100m", "memory": "64Mi"}}))
    c.wait(lambda: c.pod("default", "slim")["spec"].get("nodeName"))


def test_a_bound_pod_is_scheduled_in_the_same_write(cluster):
    """The pods/binding subresource sets spec.nodeName and PodScheduled=True together: no watcher
    (nor a test on a loaded machine) sees a pod on a node that is not yet scheduled."""
    c = cluster
    seen = []
    c.store.subscribe(lambda ev, res, obj: seen.append(obj) if res == "pods" and
                      obj["metadata"]["name"] == "web" else None)
    c.store.create("pods", pod("web"))
    c.wait(lambda: c.pod("default", "web")["spec"].get("nodeName"), what="web bound")
    bound = [o for o in seen if o["spec"].get("nodeName")]
    assert bound
    assert all(any(cd["type"] == "PodScheduled" and cd["status"] == "True"
                   for cd in (o.get("status") or {}).get("conditions") or []) for o in bound)


def test_requests_are_summed_exactly_like_the_quota_does():
    """One quantity arithmetic: 1 cpu bound plus 1000000001n asked exceeds 2 cpus by 1n, which
    float sums (with a 1e-9 tolerance) let through while the API server's quota would not."""
    from simcluster.twins.scheduler import insufficient
    from simcluster.twins.util import containers_requests, parse_quantity
    from simcluster.validation.quantity import Quantity
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "2", "memory": "1Gi"}}}
    used = {"n": containers_requests({"containers": [{"resources": {"requests": {"cpu": "1"}}}]})}
    ask = {"containers": [{"resources": {"requests": {"cpu": "1000000001n", "memory": "512Mi"}}}]}
    assert insufficient(ask, node, used) == ["cpu"]
    fits = {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "512Mi"}}}]}
    assert insufficient(fits, node, used) == []
    for text in ("0.1", "100m", "1Gi", "1.5e3", "1n", "7"):
        assert parse_quantity(text) == Quantity.parse(text).value
    assert parse_quantity("0.1") + parse_quantity("0.2") == parse_quantity("300m")


def _spread(name, app="gang", **spec):
    """A pod with a required anti-affinity to its siblings on kubernetes.io/hostname (one per node),
    as the templates spread a gang; kube-scheduler's InterPodAffinity filter."""
    p = pod(name, **spec)
    p["metadata"]["labels"] = {"app": app}
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return p


def test_required_pod_anti_affinity_puts_siblings_on_different_nodes(cluster):
    c = cluster
    for name in ("a", "b", "c"):
        c.store.create("pods", _spread(name))
    c.wait(lambda: all(c.pod("default", n)["spec"].get("nodeName") for n in ("a", "b", "c")))
    assert len(set(c.pod("default", n)["spec"]["nodeName"] for n in ("a", "b", "c"))) == 3
    # a fourth sibling has no node left: the real filter's words for every node
    c.store.create("pods", _spread("d"))
    cond = c.wait(lambda: _scheduled(c, "d"), what="PodScheduled condition")
    assert cond["status"] == "False"
    assert cond["message"].startswith("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."), \
        cond["message"]
    # an unrelated pod without the label is not kept away, and a pod landing next to one that
    # repels it is refused by the existing pod's term
    c.store.create("pods", pod("other"))
    c.wait(lambda: c.pod("default", "other")["spec"].get("nodeName"))
    plain = pod("plain")
    plain["metadata"]["labels"] = {"app": "gang"}
    plain["spec"]["nodeSelector"] = {"kubernetes.io/hostname": c.pod("default", "a")["spec"]["nodeName"]}
    c.store.create("pods", plain)
    cond = c.wait(lambda: _scheduled(c, "plain"), what="PodScheduled condition")
    assert "node(s) didn't satisfy existing pods anti-affinity rules" in cond["message"], cond["message"]
