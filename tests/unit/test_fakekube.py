"""The unit tests' FakeKube has Kube's signatures: a call the real client refuses fails in the tests too."""
import inspect

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import Kube
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube, merge_patch

API = ("served", "get", "list", "list_if_served", "log", "evict", "create", "patch", "apply", "delete")


def test_every_api_method_of_kube_is_faked_with_the_same_signature():
    public = set(n for n, f in inspect.getmembers(Kube, inspect.isfunction) if not n.startswith("_"))
    assert set(API) <= public
    for name in API:
        assert inspect.signature(getattr(FakeKube, name)) == inspect.signature(getattr(Kube, name)), name


def test_writes_change_the_store_unless_dry_run():
    kube = FakeKube()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "x"}, "data": {"k": "1"}}
    kube.create(cm, dry_run=True)
    assert kube.objects == {}
    kube.create(cm)
    kube.patch("v1", "ConfigMap", "a", {"data": {"k": None, "j": "2"}}, namespace="x")
    assert kube.get("v1", "ConfigMap", "a", "x")["data"] == {"j": "2"}
    assert kube.list("v1", "ConfigMap", namespace="y")[0] == []
    assert kube.list("v1", "ConfigMap", label_selector="app=z")[0] == []
    assert kube.delete("v1", "ConfigMap", "a", "x", dry_run=True) is not None and kube.objects
    kube.delete("v1", "ConfigMap", "a", "x")
    assert kube.objects == {} and [c.verb for c in kube.writes()] == ["CREATE", "CREATE", "PATCH", "DELETE", "DELETE"]
    assert merge_patch({"a": {"b": 1}}, {"a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}


def test_selectors_filter_as_the_api_server_does():
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "namespace": "x", "labels": labels},
             "spec": {"nodeName": node}} for n, labels, node in (
                 ("a", {"app": "p", "tier": "1"}, "gpu-1"), ("b", {"app": "q"}, "gpu-2"), ("c", {}, "gpu-1"))]
    kube = FakeKube(pods)

    def names(**kw):
        return [p["metadata"]["name"] for p in kube.list("v1", "Pod", namespace="x", **kw)[0]]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="spec.nodeName=gpu-1,metadata.name!=a") == ["c"]
    assert names(label_selector="app!=p") == ["b", "c"]
    assert names(label_selector="!app") == ["c"]
    assert names(label_selector="app==p,tier") == ["a"]
