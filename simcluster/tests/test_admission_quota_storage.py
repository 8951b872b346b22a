"""ResourceQuota on PersistentVolumeClaims (evaluator/core/persistent_volume_claims.go): the count,
requests.storage and both per StorageClass, with the server's message."""
import pytest

from simcluster.errors import ApiError

from kit.fake_store import FakeStore

SC = "fast-nvme.storageclass.storage.k8s.io/"


def pvc(name, size, sc=None, ns="team-a"):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if sc:
        spec["storageClassName"] = sc
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


@pytest.fixture
def store():
    s = FakeStore(namespaces=("team-a",))
    s.create("resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota",
                                "metadata": {"name": "tenant-quota", "namespace": "team-a"},
                                "spec": {"hard": {"requests.storage": "1Ti", "persistentvolumeclaims": "3",
                                                  SC + "requests.storage": "500Gi",
                                                  SC + "persistentvolumeclaims": "2"}}})
    return s


def used(store):
    return store.get("resourcequotas", "team-a", "tenant-quota")["status"]["used"]


def test_claims_count_storage_overall_and_per_class(store):
    store.create("persistentvolumeclaims", pvc("ckpt", "400Gi", "fast-nvme"))
    store.create("persistentvolumeclaims", pvc("data", "300Gi", "standard"))
    assert used(store) == {"persistentvolumeclaims": "2", "requests.storage": "700Gi",
                           SC + "persistentvolumeclaims": "1", SC + "requests.storage": "400Gi"}


def test_a_claim_over_the_class_quota_is_refused_with_the_real_message(store):
    store.create("persistentvolumeclaims", pvc("ckpt", "400Gi", "fast-nvme"))
    with pytest.raises(ApiError) as exc:
        store.create("persistentvolumeclaims", pvc("scratch", "200Gi", "fast-nvme"))
    assert exc.value.code == 403
    assert exc.value.message == (
        'persistentvolumeclaims "scratch" is forbidden: exceeded quota: tenant-quota, requested: '
        'fast-nvme.storageclass.storage.k8s.io/requests.storage=200Gi, used: '
        'fast-nvme.storageclass.storage.k8s.io/requests.storage=400Gi, limited: '
        'fast-nvme.storageclass.storage.k8s.io/requests.storage=500Gi')
    store.create("persistentvolumeclaims", pvc("scratch", "200Gi", "standard"))   # another class: the total fits


def test_total_storage_and_count_are_enforced_and_a_deleted_claim_frees_its_share(store):
    store.create("persistentvolumeclaims", pvc("a", "600Gi"))
    with pytest.raises(ApiError) as exc:
        store.create("persistentvolumeclaims", pvc("b", "500Gi"))
    assert "requested: requests.storage=500Gi, used: requests.storage=600Gi, limited: requests.storage=1Ti" \
        in exc.value.message
    store.delete("persistentvolumeclaims", "team-a", "a")
    assert used(store)["requests.storage"] == "0"
    for name in ("x", "y", "z"):
        store.create("persistentvolumeclaims", pvc(name, "1Gi"))
    with pytest.raises(ApiError) as exc:
        store.create("persistentvolumeclaims", pvc("w", "1Gi"))
    assert "exceeded quota: tenant-quota, requested: persistentvolumeclaims=1" in exc.value.message
