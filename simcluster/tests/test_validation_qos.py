"""Pod QoS classes, the cases of k8s.io/kubernetes pkg/apis/core/helper/qos/qos_test.go (abridged)."""
import pytest

from simcluster.store import Store
from simcluster.validation.qos import pod_qos


def container(requests=None, limits=None):
    res = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": "c", "image": "i", "resources": res}


def spec(*containers, init=()):
    return {"containers": list(containers), "initContainers": list(init)}


GUARANTEED = container({"cpu": "100m", "memory": "100Mi"}, {"cpu": "100m", "memory": "100Mi"})
BEST_EFFORT = container()

CASES = [
    ("guaranteed", spec(GUARANTEED), "Guaranteed"),
    ("guaranteed-guaranteed", spec(GUARANTEED, GUARANTEED), "Guaranteed"),
    ("guaranteed-limits-only (requests defaulted)", spec(container(None, {"cpu": "1", "memory": "1Gi"})),
     "Guaranteed"),
    ("guaranteed-equal-quantities", spec(container({"cpu": "1", "memory": "1Gi"},
                                                   {"cpu": "1000m", "memory": "1024Mi"})), "Guaranteed"),
    ("guaranteed-with-gpu", spec(container({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                           {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})), "Guaranteed"),
    ("best-effort", spec(BEST_EFFORT), "BestEffort"),
    ("best-effort-best-effort", spec(BEST_EFFORT, BEST_EFFORT), "BestEffort"),
    ("best-effort-gpu-only", spec(container(None, {"nvidia.com/gpu": "1"})), "BestEffort"),
    ("best-effort-hugepages", spec(container({"hugepages-2Mi": "1Gi"})), "BestEffort"),
    ("best-effort-zero-requests", spec(container({"cpu": "0", "memory": "0"})), "BestEffort"),
    ("best-effort-burstable", spec(BEST_EFFORT, container({"cpu": "1"})), "Burstable"),
    ("best-effort-guaranteed", spec(BEST_EFFORT, GUARANTEED), "Burstable"),
    ("burstable-no-limits", spec(container({"cpu": "100m", "memory": "100Mi"})), "Burstable"),
    ("burstable-cpu-limit-only", spec(container({"cpu": "100m"}, {"cpu": "100m"})), "Burstable"),
    ("burstable-requests-below-limits", spec(container({"cpu": "100m", "memory": "100Mi"},
                                                       {"cpu": "200m", "memory": "200Mi"})), "Burstable"),
    ("burstable-init-container", spec(GUARANTEED, init=[container({"cpu": "1"})]), "Burstable"),
]


@pytest.mark.parametrize("name,pod_spec,expected", CASES, ids=[c[0] for c in CASES])
def test_pod_qos(name, pod_spec, expected):
    assert pod_qos(pod_spec) == expected


def test_the_store_sets_qos_class_on_create_and_ignores_the_clients():
    store = Store()
    store.create("namespaces", {"metadata": {"name": "team-a"}})
    body = {"metadata": {"name": "p", "namespace": "team-a"}, "status": {"qosClass": "Guaranteed"},
            "spec": {"containers": [container(None, {"nvidia.com/gpu": "1"})]}}
    assert store.create("pods", body)["status"]["qosClass"] == "BestEffort"
