"""Admission through the real simcluster.store.Store (sim-api), not the fake."""
import time

import pytest

from simcluster.errors import ApiError

from kit.fake_store import CRD, gpu_pod, pod, upstream_crd

store_mod = pytest.importorskip("simcluster.store")


@pytest.fixture
def store():
    s = store_mod.Store()
    s.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": "team-a", "labels": {
                                "pod-security.kubernetes.io/enforce": "restricted"}}})
    return s


def test_real_store_rejects_bad_names(store):
    with pytest.raises(ApiError) as exc:
        store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "UPPER", "namespace": "team-a"}})
    assert exc.value.code == 422
    assert exc.value.message.startswith('ConfigMap "UPPER" is invalid: metadata.name: Invalid '
                                        'value: "UPPER": a lowercase RFC 1123 subdomain')


def test_real_store_quota_status_and_403(store):
    store.create("resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota",
                                    "metadata": {"name": "gpu", "namespace": "team-a"},
                                    "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}})
    assert store.get("resourcequotas", "team-a", "gpu")["status"]["used"] == {
        "requests.nvidia.com/gpu": "0"}
    p = gpu_pod("a", 2, ns="team-a")
    p["spec"]["securityContext"] = {"runAsNonRoot": True,
                                    "seccompProfile": {"type": "RuntimeDefault"}}
    p["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False,
                                                     "capabilities": {"drop": ["ALL"]}}
    store.create("pods", p, dry_run=True)
    assert store.get("resourcequotas", "team-a", "gpu")["status"]["used"] == {
        "requests.nvidia.com/gpu": "0"}
    store.create("pods", p)
    assert store.get("resourcequotas", "team-a", "gpu")["status"]["used"] == {
        "requests.nvidia.com/gpu": "2"}
    p["metadata"]["name"] = "b"
    with pytest.raises(ApiError) as exc:
        store.create("pods", p)
    assert exc.value.message == ('pods "b" is forbidden: exceeded quota: gpu, requested: '
                                 'requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=2, '
                                 'limited: requests.nvidia.com/gpu=2')
    store.delete("pods", "team-a", "a")
    assert store.get("resourcequotas", "team-a", "gpu")["status"]["used"] == {
        "requests.nvidia.com/gpu": "0"}


def test_real_store_pod_security(store):
    with pytest.raises(ApiError) as exc:
        store.create("pods", dict(pod("x", "team-a", containers=[
            {"name": "c", "image": "i", "securityContext": {"privileged": True}}])))
    assert exc.value.message.startswith('pods "x" is forbidden: violates PodSecurity '
                                        '"restricted:latest": privileged (container "c" must '
                                        'not set securityContext.privileged=true)')


@pytest.mark.needs_shared
def test_real_store_custom_resource_validation_and_warnings(store):
    store.create(CRD, upstream_crd("gpu-operator/crds/nvidia.com_clusterpolicies.yaml"))
    spec = {k: {} for k in ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver",
                            "gfd", "nodeStatusExporter", "operator", "toolkit")}
    cp = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
          "metadata": {"name": "cluster-policy"}, "spec": dict(spec, driver={"enabled": "yes"})}
    with pytest.raises(ApiError) as exc:
        store.create("clusterpolicies.nvidia.com", cp)
    assert exc.value.message == (
        'ClusterPolicy.nvidia.com "cluster-policy" is invalid: spec.driver.enabled: Invalid '
        'value: "string": spec.driver.enabled in body must be of type boolean: "string"')
    cp["spec"]["driver"] = {"enabled": False, "typo": 1}
    with pytest.raises(ApiError) as exc:
        store.create("clusterpolicies.nvidia.com", cp, field_validation="Strict")
    assert exc.value.code == 400
    warnings = []
    out = store.create("clusterpolicies.nvidia.com", cp, warnings=warnings)
    assert warnings == ['unknown field "spec.driver.typo"']
    assert "typo" not in out["spec"]["driver"]


def test_simple_admission_is_cheap(store):
    """admit() must not be the bottleneck of >=300 requests/s (printed, loosely asserted)."""
    n = 300
    start = time.perf_counter()
    for i in range(n):
        store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "c%d" % i, "namespace": "team-a",
                                                 "labels": {"app": "x"}}, "data": {"k": "v"}})
    rate = n / (time.perf_counter() - start)
    print("store.create with admission: %.0f configmaps/s" % rate)
    assert rate > 300
