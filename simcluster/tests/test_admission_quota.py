"""ResourceQuota admission and status: only requests.<extended> is enforced."""
import pytest

from simcluster.errors import ApiError

from kit.fake_store import FakeStore, gpu_pod, pod


def quota(hard, name="gpu-quota", ns="team-a", **spec):
    body = {"hard": hard}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": ns}, "spec": body}


@pytest.fixture
def store():
    return FakeStore(namespaces=("team-a", "team-b"))


def used(store, name="gpu-quota", ns="team-a"):
    return store.get("resourcequotas", ns, name)["status"]["used"]


def test_status_hard_and_used_set_on_create(store):
    store.create("resourcequotas", quota({"requests.nvidia.com/gpu": 8, "pods": 10}))
    q = store.get("resourcequotas", "team-a", "gpu-quota")
    # Quantities come back canonical (strings), like from a real server.
    assert q["status"] == {"hard": {"requests.nvidia.com/gpu": "8", "pods": "10"},
                           "used": {"pods": "0", "requests.nvidia.com/gpu": "0"}}


def test_pod_over_gpu_quota_is_403_with_real_message(store):
    store.create("resourcequotas", quota({"requests.nvidia.com/gpu": 8}))
    store.create("pods", gpu_pod("a", 4, ns="team-a"))
    store.create("pods", gpu_pod("b", 3, ns="team-a"))
    assert used(store) == {"requests.nvidia.com/gpu": "7"}
    with pytest.raises(ApiError) as exc:
        store.create("pods", gpu_pod("x", 2, ns="team-a"))
    err = exc.value
    assert (err.code, err.reason) == (403, "Forbidden")
    assert err.message == ('pods "x" is forbidden: exceeded quota: gpu-quota, requested: '
                           'requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=7, '
                           'limited: requests.nvidia.com/gpu=8')
    store.create("pods", gpu_pod("y", 1, ns="team-a"))
    assert used(store) == {"requests.nvidia.com/gpu": "8"}


def test_limits_and_bare_gpu_keys_are_never_enforced(store):
    store.create("resourcequotas", quota({"limits.nvidia.com/gpu": 1, "nvidia.com/gpu": 1}))
    store.create("pods", gpu_pod("a", 4, ns="team-a"))
    store.create("pods", gpu_pod("b", 4, ns="team-a"))
    q = store.get("resourcequotas", "team-a", "gpu-quota")
    assert q["status"]["hard"] == {"limits.nvidia.com/gpu": "1", "nvidia.com/gpu": "1"}
    assert q["status"]["used"] == {}


def test_terminal_pods_stop_counting_and_deletes_release(store):
    store.create("resourcequotas", quota({"requests.nvidia.com/gpu": 4}))
    store.create("pods", gpu_pod("a", 4, ns="team-a"))
    with pytest.raises(ApiError):
        store.create("pods", gpu_pod("b", 1, ns="team-a"))
    done = store.get("pods", "team-a", "a")
    done["status"] = {"phase": "Succeeded"}
    store.update_status("pods", done)
    assert used(store) == {"requests.nvidia.com/gpu": "0"}
    store.create("pods", gpu_pod("b", 1, ns="team-a"))
    assert used(store) == {"requests.nvidia.com/gpu": "1"}
    store.delete("pods", "team-a", "b")
    assert used(store) == {"requests.nvidia.com/gpu": "0"}


def test_dry_run_checks_but_never_counts(store):
    store.create("resourcequotas", quota({"requests.nvidia.com/gpu": 4}))
    store.create("pods", gpu_pod("a", 2, ns="team-a"), dry_run=True)
    store.create("pods", gpu_pod("a", 2, ns="team-a"), dry_run=True)
    assert used(store) == {"requests.nvidia.com/gpu": "0"}
    with pytest.raises(ApiError) as exc:
        store.create("pods", gpu_pod("big", 5, ns="team-a"), dry_run=True)
    assert "exceeded quota" in exc.value.message


def test_quota_is_per_namespace(store):
    store.create("resourcequotas", quota({"requests.nvidia.com/gpu": 1}))
    store.create("pods", gpu_pod("a", 4, ns="team-b"))
    assert used(store) == {"requests.nvidia.com/gpu": "0"}


def test_cpu_quota_requires_pods_to_specify_it(store):
    store.create("resourcequotas", quota({"requests.cpu": "2", "limits.memory": "1Gi"},
                                         name="compute"))
    with pytest.raises(ApiError) as exc:
        store.create("pods", pod("x", "team-a"))
    assert exc.value.message == ('pods "x" is forbidden: failed quota: compute: must specify '
                                 'limits.memory for: c; requests.cpu for: c')


def test_cpu_memory_sums_and_message_units(store):
    store.create("resourcequotas", quota({"requests.cpu": "1", "requests.memory": "1Gi"},
                                         name="compute"))
    res = {"requests": {"cpu": "600m", "memory": "512Mi"}}
    store.create("pods", pod("a", "team-a", containers=[{"name": "c", "image": "i",
                                                         "resources": res}]))
    assert used(store, "compute") == {"requests.cpu": "600m", "requests.memory": "512Mi"}
    with pytest.raises(ApiError) as exc:
        store.create("pods", pod("b", "team-a", containers=[{"name": "c", "image": "i",
                                                             "resources": res}]))
    assert exc.value.message == ('pods "b" is forbidden: exceeded quota: compute, requested: '
                                 'requests.cpu=600m, used: requests.cpu=600m, limited: '
                                 'requests.cpu=1')


def test_pod_count_and_object_counts(store):
    store.create("resourcequotas", quota({"pods": 1, "count/configmaps": 1, "configmaps": 1},
                                         name="counts"))
    store.create("pods", pod("a", "team-a"))
    with pytest.raises(ApiError) as exc:
        store.create("pods", pod("b", "team-a"))
    assert exc.value.message == ('pods "b" is forbidden: exceeded quota: counts, requested: '
                                 'pods=1, used: pods=1, limited: pods=1')
    store.create("configmaps", {"kind": "ConfigMap", "metadata": {"name": "c1",
                                                                  "namespace": "team-a"}})
    assert used(store, "counts") == {"configmaps": "1", "count/configmaps": "1", "pods": "1"}
    with pytest.raises(ApiError) as exc:
        store.create("configmaps", {"kind": "ConfigMap", "metadata": {"name": "c2",
                                                                      "namespace": "team-a"}})
    assert exc.value.message == ('configmaps "c2" is forbidden: exceeded quota: counts, '
                                 'requested: configmaps=1,count/configmaps=1, used: '
                                 'configmaps=1,count/configmaps=1, limited: '
                                 'configmaps=1,count/configmaps=1')


def test_quota_created_after_pods_counts_them(store):
    store.create("pods", gpu_pod("a", 3, ns="team-a"))
    store.create("resourcequotas", quota({"requests.nvidia.com/gpu": 8}))
    assert used(store) == {"requests.nvidia.com/gpu": "3"}
    q = store.get("resourcequotas", "team-a", "gpu-quota")
    q["spec"]["hard"]["requests.nvidia.com/gpu"] = 2
    store.update("resourcequotas", q)
    q = store.get("resourcequotas", "team-a", "gpu-quota")
    assert q["status"]["hard"] == {"requests.nvidia.com/gpu": "2"}
    assert q["status"]["used"] == {"requests.nvidia.com/gpu": "3"}


def test_scoped_quota_best_effort(store):
    """The evaluator's isBestEffort is the QoS class: only cpu and memory count, so a GPU-only pod is
    BestEffort (pkg/quota/v1/evaluator/core/pods.go)."""
    store.create("resourcequotas", quota({"pods": 1}, name="be", scopes=["BestEffort"]))
    store.create("pods", pod("cpu", "team-a", containers=[      # Burstable: not counted
        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]))
    store.create("pods", gpu_pod("gpu", 1, ns="team-a"))      # BestEffort: counted
    with pytest.raises(ApiError):
        store.create("pods", pod("b", "team-a"))


def test_mig_extended_resource_quota(store):
    store.create("resourcequotas", quota({"requests.nvidia.com/mig-1g.10gb": 2}, name="mig"))
    p = pod("m", "team-a", containers=[{"name": "c", "image": "i", "resources": {
        "limits": {"nvidia.com/mig-1g.10gb": 3}}}])
    with pytest.raises(ApiError) as exc:
        store.create("pods", p)
    assert "requested: requests.nvidia.com/mig-1g.10gb=3, used: " \
           "requests.nvidia.com/mig-1g.10gb=0, limited: requests.nvidia.com/mig-1g.10gb=2" \
           in exc.value.message
