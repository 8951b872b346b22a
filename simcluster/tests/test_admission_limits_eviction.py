"""LimitRanger, NamespaceLifecycle and evictions with PodDisruptionBudgets."""
import pytest

from simcluster import admission
from simcluster.controllers import disruption
from simcluster.errors import ApiError

from kit.fake_store import FakeStore, gpu_pod, pod


def limit_range(*items, name="limits", ns="team"):
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": ns},
            "spec": {"limits": list(items)}}


@pytest.fixture
def store():
    return FakeStore(namespaces=("team",))


# -- LimitRanger ------------------------------------------------------------------------

def test_defaults_and_default_requests_are_applied(store):
    store.create("limitranges", limit_range({"type": "Container", "default": {"cpu": "1",
                                                                           "memory": "1Gi"},
                                             "defaultRequest": {"cpu": "250m"}}))
    out = store.create("pods", pod("p", "team"))
    res = out["spec"]["containers"][0]["resources"]
    assert res == {"limits": {"cpu": "1", "memory": "1Gi"},
                   "requests": {"cpu": "250m", "memory": "1Gi"}}
    assert out["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container c; "
        "cpu, memory limit for container c")


def test_explicit_values_are_kept(store):
    store.create("limitranges", limit_range({"type": "Container", "default": {"cpu": "1"}}))
    p = pod("p", "team", containers=[{"name": "c", "image": "i", "resources": {
        "limits": {"cpu": "2"}, "requests": {"cpu": "2"}}}])
    out = store.create("pods", p)
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2"}
    assert "annotations" not in out["metadata"]


def test_max_violation_is_403_with_real_message(store):
    store.create("limitranges", limit_range({"type": "Container", "max": {"nvidia.com/gpu": 2}}))
    with pytest.raises(ApiError) as exc:
        store.create("pods", gpu_pod("big", 4, ns="team"))
    assert (exc.value.code, exc.value.message) == (
        403, 'pods "big" is forbidden: maximum nvidia.com/gpu usage per Container is 2, '
             'but limit is 4')


def test_min_and_pod_level_and_ratio(store):
    store.create("limitranges", limit_range(
        {"type": "Pod", "max": {"cpu": "1"}},
        {"type": "Container", "min": {"memory": "64Mi"}, "maxLimitRequestRatio": {"cpu": "2"}}))
    p = pod("p", "team", containers=[
        {"name": "a", "image": "i", "resources": {"limits": {"cpu": "800m"},
                                                  "requests": {"cpu": "100m",
                                                               "memory": "32Mi"}}},
        {"name": "b", "image": "i", "resources": {"limits": {"cpu": "800m", "memory": "1Gi"},
                                                  "requests": {"cpu": "800m"}}}])
    with pytest.raises(ApiError) as exc:
        store.create("pods", p)
    assert exc.value.message == (
        'pods "p" is forbidden: [maximum cpu usage per Pod is 1, but limit is 1600m, '
        'minimum memory usage per Container is 64Mi, but request is 32Mi, '
        'cpu max limit to request ratio per Container is 2, but provided ratio is 8.000000]')


# -- NamespaceLifecycle --------------------------------------------------------------------

def test_create_in_missing_namespace_is_404(store):
    with pytest.raises(ApiError) as exc:
        store.create("configmaps", {"kind": "ConfigMap", "metadata": {"name": "c",
                                                                      "namespace": "nope"}})
    assert (exc.value.code, exc.value.reason, exc.value.message) == (
        404, "NotFound", 'namespaces "nope" not found')


def test_create_in_terminating_namespace_is_403(store):
    ns = store.get("namespaces", None, "team")
    ns["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    store.update("namespaces", ns, admit=False)
    with pytest.raises(ApiError) as exc:
        store.create("configmaps", {"kind": "ConfigMap", "metadata": {"name": "c",
                                                                      "namespace": "team"}})
    assert exc.value.code == 403
    assert exc.value.message == ('configmaps "c" is forbidden: unable to create new content in '
                                 'namespace team because it is being terminated')


# -- Eviction ----------------------------------------------------------------------------

def running(store, name, labels, owner=None):
    p = pod(name, "team")
    p["metadata"]["labels"] = labels
    if owner:
        p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                             "name": owner, "uid": "u1", "controller": True}]
    store.create("pods", p)
    cur = store.get("pods", "team", name)
    cur["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    store.update_status("pods", cur)


def pdb(store, name="pdb", **spec):
    spec.setdefault("selector", {"matchLabels": {"app": "web"}})
    store.create("poddisruptionbudgets.policy", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "team"}, "spec": spec})


def test_eviction_without_pdb_deletes(store):
    running(store, "a", {"app": "web"})
    disruption.evict(store, "team", "a", {"apiVersion": "policy/v1", "kind": "Eviction",
                                          "metadata": {"name": "a", "namespace": "team"}})
    assert store.get("pods", "team", "a") is None


def test_eviction_blocked_by_pdb_is_429(store):
    running(store, "a", {"app": "web"})
    running(store, "b", {"app": "web"})
    pdb(store, minAvailable=2)
    status = store.get("poddisruptionbudgets.policy", "team", "pdb")["status"]
    assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"],
            status["expectedPods"]) == (2, 2, 0, 2)
    with pytest.raises(ApiError) as exc:
        disruption.evict(store, "team", "a", {})
    err = exc.value
    assert (err.code, err.reason) == (429, "TooManyRequests")
    assert err.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert err.details["causes"] == [{"reason": "DisruptionBudget", "message":
                                      "The disruption budget pdb needs 2 healthy pods and has "
                                      "2 currently"}]
    assert store.get("pods", "team", "a") is not None


def test_eviction_allowed_within_budget_then_blocked(store):
    store.create("replicasets.apps", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web",
                                                                    "namespace": "team"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    for n in ("a", "b", "c"):
        running(store, n, {"app": "web"}, owner="web")
    pdb(store, maxUnavailable=1)
    disruption.evict(store, "team", "a", {})
    assert store.get("pods", "team", "a") is None
    assert store.get("poddisruptionbudgets.policy", "team", "pdb")["status"][
        "disruptionsAllowed"] == 0
    with pytest.raises(ApiError):
        disruption.evict(store, "team", "b", {})


def test_pdb_with_neither_field_allows_no_eviction(store):
    """policy/v1 accepts a budget without minAvailable and maxUnavailable and defaults neither;
    the disruption controller then expects 0 pods and allows no disruption."""
    running(store, "a", {"app": "web"})
    pdb(store)
    status = store.get("poddisruptionbudgets.policy", "team", "pdb")["status"]
    assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"],
            status["expectedPods"]) == (1, 0, 0, 0)
    with pytest.raises(ApiError) as exc:
        disruption.evict(store, "team", "a", {})
    assert exc.value.code == 429
    assert exc.value.details["causes"][0]["message"] == ("The disruption budget pdb needs 0 healthy "
                                                         "pods and has 1 currently")


def test_eviction_dry_run_and_pending_pods(store):
    running(store, "a", {"app": "web"})
    pdb(store, minAvailable=1)
    store.create("pods", dict(pod("pending", "team"), metadata={
        "name": "pending", "namespace": "team", "labels": {"app": "web"}}))
    disruption.evict(store, "team", "pending", {})       # pending pods ignore the budget
    assert store.get("pods", "team", "pending") is None
    with pytest.raises(ApiError):
        disruption.evict(store, "team", "a", {"deleteOptions": {"dryRun": ["All"]}})


def test_eviction_of_missing_pod_and_name_mismatch(store):
    with pytest.raises(ApiError) as exc:
        disruption.evict(store, "team", "ghost", {})
    assert (exc.value.code, exc.value.message) == (404, 'pods "ghost" not found')
    running(store, "a", {})
    with pytest.raises(ApiError) as exc:
        disruption.evict(store, "team", "a", {"metadata": {"name": "b"}})
    assert exc.value.code == 400


def test_immortal_namespaces_cannot_be_deleted(store):
    for name in ("default", "kube-system", "kube-public"):
        with pytest.raises(ApiError) as exc:
            admission.admit(store, "DELETE", "namespaces", None,
                            {"metadata": {"name": name}})
        assert exc.value.message == ('namespaces "%s" is forbidden: this namespace may not be '
                                     'deleted' % name)
    assert admission.admit(store, "DELETE", "namespaces", None,
                           {"metadata": {"name": "team"}}) == []
