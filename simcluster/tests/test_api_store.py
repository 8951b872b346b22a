"""simcluster.store.Store: the contract of simcluster/store_api.py, without HTTP."""

import pytest

from simcluster.errors import ApiError
from simcluster.store import Gone, Store


def cm(name, ns="default", data=None, labels=None):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "data": data or {"a": "1"}}


def deploy(name, replicas=1, ns="default"):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}


@pytest.fixture
def store():
    s = Store()
    s.admission._mod = False    # these tests cover the store alone, not admission
    return s


def test_create_sets_server_fields_and_reads_are_copies(store):
    created = store.create("configmaps", cm("a"))
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0
    assert "generation" not in meta          # ConfigMaps have none, like the real ones
    assert store.create("deployments.apps", deploy("d"))["metadata"]["generation"] == 1
    got = store.get("configmaps", "default", "a")
    got["data"]["a"] = "changed"
    assert store.get("configmaps", "default", "a")["data"]["a"] == "1"


def test_resource_version_increases_and_conflicts(store):
    a = store.create("configmaps", cm("a"))
    b = store.create("configmaps", cm("b"))
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    a["data"]["a"] = "2"
    updated = store.update("configmaps", a)
    assert int(updated["metadata"]["resourceVersion"]) > int(b["metadata"]["resourceVersion"])
    with pytest.raises(ApiError) as err:
        store.update("configmaps", a)          # stale resourceVersion
    assert err.value.code == 409 and err.value.reason == "Conflict"
    with pytest.raises(ApiError) as err:
        store.create("configmaps", cm("a"))
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"
    assert err.value.message == 'configmaps "a" already exists'


def test_a_write_for_an_object_deleted_and_created_again_is_refused(store):
    """The uid an update carries is its precondition, as on the real API server: a controller's late
    status write for a deleted Job must not land on the new Job of the same name."""
    old = store.create("configmaps", cm("a"))
    store.delete("configmaps", "default", "a")
    new = store.create("configmaps", cm("a", data={"a": "new"}))
    stale = dict(old, data={"a": "stale"})
    stale["metadata"] = {k: v for k, v in old["metadata"].items() if k != "resourceVersion"}
    with pytest.raises(ApiError) as err:
        store.update("configmaps", stale)
    assert err.value.code == 409 and err.value.message == (
        'Operation cannot be fulfilled on configmaps "a": Precondition failed: UID in precondition: %s, '
        "UID in object meta: %s" % (old["metadata"]["uid"], new["metadata"]["uid"]))
    assert store.get("configmaps", "default", "a")["data"] == {"a": "new"}
    fresh = dict(stale, metadata=dict(stale["metadata"], uid=new["metadata"]["uid"]))
    assert store.update("configmaps", fresh)["data"] == {"a": "stale"}


def test_noop_update_keeps_resource_version(store):
    a = store.create("configmaps", cm("a"))
    again = store.update("configmaps", a)
    assert again["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]


def test_generation_bumps_on_spec_only(store):
    d = store.create("deployments.apps", deploy("web"))
    d["metadata"]["labels"] = {"x": "y"}
    d = store.update("deployments.apps", d)
    assert d["metadata"]["generation"] == 1
    d = store.update_status("deployments.apps", dict(d, status={"replicas": 1}))
    assert d["metadata"]["generation"] == 1 and d["status"] == {"replicas": 1}
    d["spec"]["replicas"] = 3
    d = store.update("deployments.apps", d)
    assert d["metadata"]["generation"] == 2
    # a main-resource update keeps the status (status subresource semantics)
    d["status"] = {"replicas": 99}
    d = store.update("deployments.apps", d)
    assert d["status"] == {"replicas": 1}


def test_merge_patch_removes_labels_with_none(store):
    store.create("configmaps", cm("a", labels={"k": "v", "gone": "x"}))
    out = store.merge_patch("configmaps", "default", "a",
                            {"metadata": {"labels": {"gone": None, "new": "n"}}})
    assert out["metadata"]["labels"] == {"k": "v", "new": "n"}


def test_not_found_and_missing_namespace(store):
    with pytest.raises(ApiError) as err:
        store.delete("configmaps", "default", "nope")
    assert err.value.code == 404 and err.value.message == 'configmaps "nope" not found'
    with pytest.raises(ApiError) as err:
        store.create("configmaps", cm("a", ns="missing"))
    assert err.value.code == 404 and 'namespaces "missing" not found' in err.value.message


def test_label_and_field_selectors(store):
    store.create("configmaps", cm("a", labels={"app": "x", "tier": "web"}))
    store.create("configmaps", cm("b", labels={"app": "y"}))
    names = lambda sel: [o["metadata"]["name"] for o in store.list("configmaps", "default", sel)
                         if o["metadata"]["name"] != "kube-root-ca.crt"]
    assert names("app=x") == ["a"]
    assert names("app in (x,y)") == ["a", "b"]
    assert names("app notin (x)") == ["b"]
    assert names("tier") == ["a"]
    assert names("!tier,app") == ["b"]
    assert names("app!=x,app") == ["b"]
    got = store.list("configmaps", None, None, "metadata.name=b")
    assert [o["metadata"]["name"] for o in got] == ["b"]
    with pytest.raises(ApiError) as err:
        store.list("configmaps", None, None, "data.a=1")
    assert err.value.code == 400


def test_namespace_deletion_removes_its_objects(store):
    store.create("namespaces", {"metadata": {"name": "team-a"}})
    store.create("configmaps", cm("a", ns="team-a"))
    store.create("deployments.apps", deploy("web", ns="team-a"))
    assert store.get("serviceaccounts", "team-a", "default") is not None
    seen = []
    store.subscribe(lambda t, r, o: seen.append((t, r, o["metadata"]["name"])))
    store.delete("namespaces", None, "team-a")
    assert store.list("configmaps", "team-a") == []
    assert store.list("deployments.apps", "team-a") == []
    assert ("DELETED", "namespaces", "team-a") in seen
    assert ("DELETED", "deployments.apps", "web") in seen


def test_subscribers_get_each_commit(store):
    seen = []
    store.subscribe(lambda t, r, o: seen.append((t, r, o["metadata"]["name"])))
    a = store.create("configmaps", cm("a"))
    a["data"] = {"b": "2"}
    store.update("configmaps", a)
    store.delete("configmaps", "default", "a")
    assert seen == [("ADDED", "configmaps", "a"), ("MODIFIED", "configmaps", "a"),
                    ("DELETED", "configmaps", "a")]


def test_finalizers_hold_deletion(store):
    obj = cm("a")
    obj["metadata"]["finalizers"] = ["example.com/x"]
    store.create("configmaps", obj)
    _, gone = store.delete("configmaps", "default", "a")
    assert not gone
    held = store.get("configmaps", "default", "a")
    assert held["metadata"]["deletionTimestamp"]
    held["metadata"]["finalizers"] = []
    store.update("configmaps", held)
    assert store.get("configmaps", "default", "a") is None


def test_owner_references_are_garbage_collected(store):
    owner = store.create("configmaps", cm("owner"))
    dep = cm("dependent")
    dep["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                           "name": "owner", "uid": owner["metadata"]["uid"]}]
    store.create("configmaps", dep)
    store.delete("configmaps", "default", "owner")
    assert store.get("configmaps", "default", "dependent") is None


def test_dry_run_commits_nothing(store):
    before = store.resource_version
    out = store.create("configmaps", cm("a"), dry_run=True)
    assert out["metadata"]["name"] == "a"
    assert store.get("configmaps", "default", "a") is None
    assert store.resource_version == before


def test_admission_is_called_with_the_contract(store):
    calls = []

    class FakeAdmission:
        @staticmethod
        def admit(st, op, resource, obj, old, **kw):
            calls.append((op, resource, obj["metadata"]["name"], old is None, kw))
            if obj["metadata"]["name"] == "bad":
                raise ApiError(422, "Invalid", "bad name")
            obj.setdefault("metadata", {}).setdefault("annotations", {})["defaulted"] = "yes"
            return ["careful"]

    store.admission._mod = FakeAdmission
    warnings = []
    out = store.create("configmaps", cm("a"), warnings=warnings)
    assert out["metadata"]["annotations"] == {"defaulted": "yes"}
    assert warnings == ["careful"]
    store.update_status("deployments.apps", store.create("deployments.apps", deploy("d")))
    op, resource, name, is_new, kw = calls[0]
    assert (op, resource, name, is_new) == ("CREATE", "configmaps", "a", True)
    assert kw == {"dry_run": False, "field_validation": "Warn", "user": "admin"}
    assert calls[-1][0] == "UPDATE" and calls[-1][4]["subresource"] == "status"
    with pytest.raises(ApiError):
        store.create("configmaps", cm("bad"))
    assert store.get("configmaps", "default", "bad") is None
    store.create("configmaps", cm("quiet"), admit=False)
    assert calls[-1][2] == "bad"


def test_watch_history_is_bounded():
    store = Store(history=5)
    store.admission._mod = False
    start = int(store.resource_version)
    for i in range(10):
        store.create("configmaps", cm("c%d" % i))
    with pytest.raises(Gone):
        store.events_since(start, 0)
    recent = store.events_since(int(store.resource_version) - 2, 0)
    assert [e[1] for e in recent] == ["ADDED", "ADDED"]


def test_record_event_and_pod_logs(store):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}}
    store.record_event(None, node, "Rebooted", "node rebooted", "Warning")
    events = store.list("events", "default", None, "involvedObject.name=n1")
    assert [(e["reason"], e["type"], e["involvedObject"]["kind"]) for e in events] == \
        [("Rebooted", "Warning", "Node")]
    assert store.pod_logs == {}


def test_managed_fields_track_managers(store):
    store.create("configmaps", cm("a"), field_manager="alice")
    out = store.merge_patch("configmaps", "default", "a", {"data": {"b": "2"}},
                            field_manager="bob")
    managers = {e["manager"]: e["fieldsV1"] for e in out["metadata"]["managedFields"]}
    assert managers["bob"] == {"f:data": {"f:b": {}}}
    assert managers["alice"]["f:data"] == {"f:a": {}}


def test_crd_is_established_and_its_deletion_removes_custom_resources(store):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.example.com"},
           "spec": {"group": "example.com", "scope": "Cluster",
                    "names": {"plural": "things", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True}]}}
    out = store.create("customresourcedefinitions.apiextensions.k8s.io", crd)
    conds = {c["type"]: c["status"] for c in out["status"]["conditions"]}
    assert conds == {"NamesAccepted": "True", "Established": "True"}
    store.create("things.example.com", {"apiVersion": "example.com/v1", "kind": "Thing",
                                        "metadata": {"name": "t"}})
    store.delete("customresourcedefinitions.apiextensions.k8s.io", None, "things.example.com")
    assert store.registry.get("things.example.com") is None
    store.create("customresourcedefinitions.apiextensions.k8s.io", crd)
    assert store.list("things.example.com") == []


def test_unknown_resource_reads_empty_and_writes_404(store):
    assert store.get("clusterpolicies.nvidia.com", None, "cluster-policy") is None
    assert store.list("clusterpolicies.nvidia.com") == []
    with pytest.raises(ApiError) as err:
        store.create("clusterpolicies.nvidia.com", {"metadata": {"name": "x"}})
    assert err.value.code == 404


def test_wrongly_typed_metadata_is_a_400_decoding_error_not_a_500():
    from simcluster.errors import ApiError
    from simcluster.store import Store
    store = Store()
    with pytest.raises(ApiError) as err:
        store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": "x", "labels": "team=a"}})
    assert err.value.code == 400
    assert err.value.message == (
        'Namespace in version "v1" cannot be handled as a Namespace: json: cannot unmarshal string '
        "into Go struct field ObjectMeta.metadata.labels of type map[string]string")
    with pytest.raises(ApiError) as err:
        store.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "c", "namespace": "default",
                                                 "annotations": {"a": 1}}})
    assert err.value.code == 400 and "metadata.annotations.value of type map[string]string" in err.value.message
    assert store.get("namespaces", None, "x") is None
