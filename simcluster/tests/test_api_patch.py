"""PATCH flavours, server-side apply ownership and the protobuf codec (no server)."""

import base64

import pytest

from simcluster import managed, protobuf
from simcluster.errors import ApiError
from simcluster.patch import json_patch, merge_patch, strategic_merge

POD = {"metadata": {"name": "p", "ownerReferences": [{"uid": "1", "name": "a"}]},
       "spec": {"containers": [{"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}],
                                "ports": [{"containerPort": 80}],
                                "volumeMounts": [{"mountPath": "/a", "name": "v"}]},
                               {"name": "b", "image": "b:1"}],
                "tolerations": [{"key": "t1", "operator": "Exists"}],
                "volumes": [{"name": "v", "emptyDir": {}}]}}


def test_merge_patch_rfc7386():
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]},
                       {"a": {"b": None, "d": 3}, "l": [3]}) == {"a": {"c": 2, "d": 3}, "l": [3]}


def test_json_patch_ops_and_errors():
    doc = {"metadata": {"labels": {"a/b": "1"}}, "list": [1, 2]}
    out = json_patch(doc, [{"op": "add", "path": "/list/-", "value": 3},
                           {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"},
                           {"op": "remove", "path": "/list/0"},
                           {"op": "test", "path": "/list/0", "value": 2}])
    assert out == {"metadata": {"labels": {"a/b": "2"}}, "list": [2, 3]}
    with pytest.raises(ApiError) as err:
        json_patch(doc, [{"op": "test", "path": "/list/0", "value": 9}])
    assert err.value.code == 422


def test_strategic_merge_list_keys():
    patch = {"spec": {"containers": [{"name": "a", "image": "a:2",
                                      "env": [{"name": "Y", "value": "2"}]}],
                      "tolerations": [{"key": "t2", "operator": "Exists"}]}}
    out = strategic_merge(POD, patch)
    a, b = out["spec"]["containers"]
    assert a["image"] == "a:2" and b["image"] == "b:1"                 # merged by name
    assert [e["name"] for e in a["env"]] == ["X", "Y"]                 # env merged by name
    assert out["spec"]["tolerations"] == [{"key": "t2", "operator": "Exists"}]  # replaced


def test_strategic_merge_directives():
    out = strategic_merge(POD, {"spec": {"containers": [{"name": "b", "$patch": "delete"}],
                                         "volumes": [{"$patch": "replace"}, {"name": "w"}]},
                                "metadata": {"$setElementOrder/ownerReferences": [{"uid": "1"}],
                                             "ownerReferences": [{"uid": "2", "name": "b"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["a"]
    assert out["spec"]["volumes"] == [{"name": "w"}]
    assert [r["uid"] for r in out["metadata"]["ownerReferences"]] == ["1", "2"]
    replaced = strategic_merge(POD, {"spec": {"$patch": "replace", "containers": []}})
    assert replaced["spec"] == {"containers": []}
    ports = strategic_merge(POD, {"spec": {"containers": [
        {"name": "a", "ports": [{"containerPort": 81}],
         "volumeMounts": [{"mountPath": "/a", "readOnly": True}]}]}})
    c = ports["spec"]["containers"][0]
    assert [p["containerPort"] for p in c["ports"]] == [80, 81]
    assert c["volumeMounts"] == [{"mountPath": "/a", "name": "v", "readOnly": True}]


def _cm(data, labels=None):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": labels or {}}, "data": data}


def test_apply_conflict_force_and_field_removal():
    first = managed.apply(None, _cm({"a": "1", "b": "1"}), "one", "v1", False, strategic_merge)
    second = managed.apply(first, _cm({"c": "1"}), "two", "v1", False, strategic_merge)
    assert second["data"] == {"a": "1", "b": "1", "c": "1"}
    with pytest.raises(ApiError) as err:
        managed.apply(second, _cm({"a": "2"}), "two", "v1", False, strategic_merge)
    assert err.value.code == 409
    assert err.value.message == 'Apply failed with 1 conflict: conflict with "one" using v1: .data.a'
    forced = managed.apply(second, _cm({"a": "2", "c": "1"}), "two", "v1", True, strategic_merge)
    owners = {e["manager"]: e["fieldsV1"]["f:data"] for e in forced["metadata"]["managedFields"]}
    assert owners == {"one": {"f:b": {}}, "two": {"f:a": {}, "f:c": {}}}
    # "one" re-applies without b: b goes; a is kept (owned by "two" now)
    dropped = managed.apply(forced, _cm({}), "one", "v1", False, strategic_merge)
    assert dropped["data"] == {"a": "2", "c": "1"}
    # same value from two managers: shared, no conflict
    shared = managed.apply(dropped, _cm({"a": "2"}), "three", "v1", False, strategic_merge)
    assert shared["data"]["a"] == "2"


def test_protobuf_secret_round_trip():
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
              "metadata": {"name": "sh.helm.release.v1.x.v1", "namespace": "apps",
                           "labels": {"owner": "helm", "status": "deployed"},
                           "resourceVersion": "12", "creationTimestamp": "2026-01-02T03:04:05Z",
                           "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                "name": "o", "uid": "u", "controller": True}],
                           "finalizers": ["f"], "generation": 3},
              "data": {"release": base64.b64encode(b"\x00\x01binary").decode()},
              "immutable": True}
    wire = protobuf.encode(secret)
    assert wire.startswith(b"k8s\x00")
    assert protobuf.decode(wire) == secret
    # empty proto2 scalars (written by Go) are left out, like JSON omitempty
    bare = protobuf.decode(protobuf.encode({"kind": "Secret", "apiVersion": "v1", "metadata": {
        "name": "x", "uid": "", "generation": 0, "creationTimestamp": "1970-01-01T00:00:00Z"}}))
    assert bare["metadata"] == {"name": "x"}


def test_protobuf_rbac_binding():
    rb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
          "metadata": {"name": "rb", "namespace": "n"},
          "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "n"}],
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}
    assert protobuf.decode(protobuf.encode(rb)) == rb


def test_protobuf_delete_options_and_unknown_kind():
    opts = {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
            "propagationPolicy": "Foreground", "dryRun": ["All"], "gracePeriodSeconds": -1,
            "preconditions": {"uid": "x"}}
    assert protobuf.decode(protobuf.encode(opts)) == opts
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(protobuf.MAGIC + protobuf.encode_message(
            {"typeMeta": {"apiVersion": "apps/v1", "kind": "Deployment"}, "raw": b""},
            protobuf.UNKNOWN))
