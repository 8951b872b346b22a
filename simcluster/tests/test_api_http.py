"""The HTTP API through the real `kubernetes` client (dynamic client, as kubernetes.core)."""

import base64
import http.client
import json
import threading
import time
import urllib.parse

import pytest
from kubernetes import watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

from kit.paths import CLUSTERPOLICY_CRD
from simcluster import protobuf
from simcluster.store import Store
from simcluster.testing import InProcess


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                       "shortNames": ["wg"], "categories": ["all"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {
                                       "size": {"type": "integer"}}},
                                   "status": {"type": "object", "properties": {
                                       "ready": {"type": "boolean"}}}}}}}]}}


@pytest.fixture(scope="module")
def dyn(simcluster):
    return simcluster.dynamic()


@pytest.fixture(scope="module")
def ns(dyn):
    api = dyn.resources.get(api_version="v1", kind="Namespace")
    api.create(body={"metadata": {"name": "api-test"}})
    return "api-test"


def raw(sim, method, path, body=None, headers=None):
    """One HTTP request; returns (status, headers, body bytes)."""
    url = urllib.parse.urlsplit(sim.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    conn.request(method, path, data, hdrs)
    resp = conn.getresponse()
    out = resp.status, dict(resp.getheaders()), resp.read()
    conn.close()
    return out


def cm(name, labels=None, data=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}}


# --- discovery and OpenAPI -------------------------------------------------------

def test_discovery_documents(simcluster, dyn):
    status, _, body = raw(simcluster, "GET", "/version")
    assert status == 200 and json.loads(body)["major"] == "1"
    status, headers, body = raw(simcluster, "GET", "/apis", headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                  "application/json"})
    assert status == 200 and headers["Content-Type"] == "application/json"
    groups = {g["name"] for g in json.loads(body)["groups"]}
    assert {"apps", "batch", "rbac.authorization.k8s.io", "networking.k8s.io", "policy",
            "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io"} <= groups
    resources = json.loads(raw(simcluster, "GET", "/api/v1")[2])["resources"]
    names = {r["name"] for r in resources}
    assert {"pods", "pods/status", "pods/log", "pods/eviction", "pods/binding",
            "resourcequotas/status", "namespaces"} <= names
    for api_version, kind in (("v1", "Pod"), ("apps/v1", "DaemonSet"), ("batch/v1", "CronJob"),
                              ("policy/v1", "PodDisruptionBudget"),
                              ("coordination.k8s.io/v1", "Lease")):
        assert dyn.resources.get(api_version=api_version, kind=kind).kind == kind
    assert raw(simcluster, "GET", "/apis/nope.example.com/v1")[0] == 404


def test_openapi_v3_declares_field_validation(simcluster):
    index = json.loads(raw(simcluster, "GET", "/openapi/v3")[2])["paths"]
    url = index["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    doc = json.loads(raw(simcluster, "GET", url)[2])
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1",
                                                         "kind": "Deployment"}
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}


def test_openapi_v2_served_empty_like_kubectl_needs(simcluster):
    """kubectl validates `kind: List` items against /openapi/v2 (gnostic protobuf)."""
    pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    code, headers, body = raw(simcluster, "GET", "/openapi/v2", headers={"Accept": pb})
    assert code == 200
    # Go's mime parser refuses "@": the real server answers with ".v1.0"
    assert headers["Content-Type"] == \
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    fields = {num: val for num, _, val in protobuf.fields(body)}
    assert fields[1] == b"2.0"                              # Document.swagger
    assert {n: v for n, _, v in protobuf.fields(fields[2])} == {
        1: b"Kubernetes", 2: b"v1.35.0"}                     # Document.info
    assert 9 not in fields                                  # no definitions
    code, headers, body = raw(simcluster, "GET", "/openapi/v2",
                              headers={"Accept": "application/json"})
    assert code == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["swagger"] == "2.0"


# --- CRUD, errors, selectors -------------------------------------------------------

def test_crud_and_status_errors(simcluster, dyn, ns):
    api = dyn.resources.get(api_version="v1", kind="ConfigMap")
    created = api.create(body=cm("crud"), namespace=ns)
    assert created.metadata.uid and created.metadata.creationTimestamp
    with pytest.raises(ConflictError) as err:
        api.create(body=cm("crud"), namespace=ns)
    body = json.loads(err.value.body)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "AlreadyExists", 409)
    obj = created.to_dict()
    obj["data"] = {"k": "v2"}
    replaced = api.replace(body=obj, namespace=ns)
    assert replaced.data.k == "v2"
    with pytest.raises(ConflictError) as err:
        api.replace(body=obj, namespace=ns)          # stale resourceVersion
    assert json.loads(err.value.body)["reason"] == "Conflict"
    api.delete(name="crud", namespace=ns)
    with pytest.raises(NotFoundError) as err:
        api.get(name="crud", namespace=ns)
    body = json.loads(err.value.body)
    assert body["message"] == 'configmaps "crud" not found' and body["code"] == 404
    status, _, body = raw(simcluster, "POST", "/api/v1/namespaces/%s/configmaps" % ns,
                          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    assert status == 422 and json.loads(body)["reason"] == "Invalid"


def test_cluster_scoped_and_namespace_cascade(dyn):
    nsapi = dyn.resources.get(api_version="v1", kind="Namespace")
    nsapi.create(body={"metadata": {"name": "doomed"}})
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cms.create(body=cm("inside"), namespace="doomed")
    pc = dyn.resources.get(api_version="scheduling.k8s.io/v1", kind="PriorityClass")
    pc.create(body={"metadata": {"name": "api-test-high"}, "value": 1000})
    assert pc.get(name="api-test-high").value == 1000
    nsapi.delete(name="doomed")
    with pytest.raises(NotFoundError):
        cms.get(name="inside", namespace="doomed")
    pc.delete(name="api-test-high")


def test_selectors_pagination_and_deletecollection(dyn, ns):
    api = dyn.resources.get(api_version="v1", kind="ConfigMap")
    for i, tier in enumerate(["web", "web", "db"]):
        api.create(body=cm("sel-%d" % i, {"tier": tier, "sel": "yes"}), namespace=ns)
    names = lambda **kw: sorted(o.metadata.name for o in api.get(namespace=ns, **kw).items)
    assert names(label_selector="tier=web") == ["sel-0", "sel-1"]
    assert names(label_selector="sel,tier notin (web)") == ["sel-2"]
    assert names(label_selector="tier in (db,web),tier!=db") == ["sel-0", "sel-1"]
    assert names(field_selector="metadata.name=sel-1") == ["sel-1"]
    page = api.get(namespace=ns, label_selector="sel", limit=2)
    assert len(page.items) == 2 and page.metadata["continue"]
    rest = api.get(namespace=ns, label_selector="sel", limit=2,
                   _continue=page.metadata["continue"])
    assert [o.metadata.name for o in rest.items] == ["sel-2"]
    with pytest.raises(ApiException) as err:
        api.get(namespace=ns, field_selector="data.k=v")
    assert err.value.status == 400
    api.delete(namespace=ns, label_selector="tier=web")
    assert names(label_selector="sel") == ["sel-2"]


def test_dry_run_all_changes_nothing(dyn, ns):
    api = dyn.resources.get(api_version="v1", kind="ConfigMap")
    out = api.create(body=cm("dry"), namespace=ns, query_params=[("dryRun", "All")])
    assert out.metadata.name == "dry"
    with pytest.raises(NotFoundError):
        api.get(name="dry", namespace=ns)
    api.create(body=cm("wet"), namespace=ns)
    api.patch(name="wet", namespace=ns, body={"data": {"k": "dry"}},
              content_type="application/merge-patch+json", query_params=[("dryRun", "All")])
    api.delete(name="wet", namespace=ns, query_params=[("dryRun", "All")])
    assert api.get(name="wet", namespace=ns).data.k == "v"


# --- patches and server-side apply -------------------------------------------------

def _deployment(name, image="i:1"):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [
                                      {"name": "main", "image": image,
                                       "env": [{"name": "A", "value": "1"}]},
                                      {"name": "side", "image": "s:1"}]}}}}


def test_patch_types(dyn, ns):
    api = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    api.create(body=_deployment("patchme"), namespace=ns)
    out = api.patch(name="patchme", namespace=ns,
                    content_type="application/strategic-merge-patch+json",
                    body={"spec": {"template": {"spec": {"containers": [
                        {"name": "main", "image": "i:2", "env": [{"name": "B", "value": "2"}]}]}}}})
    main, side = out.spec.template.spec.containers
    assert (main.image, side.image) == ("i:2", "s:1")
    assert [e.name for e in main.env] == ["A", "B"]
    assert out.metadata.generation == 2
    out = api.patch(name="patchme", namespace=ns, content_type="application/json-patch+json",
                    body=[{"op": "replace", "path": "/spec/replicas", "value": 3}])
    assert out.spec.replicas == 3
    out = api.patch(name="patchme", namespace=ns, content_type="application/merge-patch+json",
                    body={"metadata": {"labels": {"app": None, "new": "1"}}})
    assert dict(out.metadata.labels) == {"new": "1"}
    assert out.metadata.generation == 3     # labels are metadata: no generation bump


def test_server_side_apply(dyn, ns):
    api = dyn.resources.get(api_version="v1", kind="ConfigMap")
    body = cm("ssa", data={"a": "1"})
    body["metadata"]["namespace"] = ns
    out = api.server_side_apply(body=body, name="ssa", namespace=ns, field_manager="alpha")
    assert out.data.a == "1"
    other = cm("ssa", data={"a": "2"})
    other["metadata"]["namespace"] = ns
    with pytest.raises(ConflictError) as err:
        api.server_side_apply(body=other, name="ssa", namespace=ns, field_manager="beta")
    assert 'conflict with "alpha"' in json.loads(err.value.body)["message"]
    out = api.server_side_apply(body=other, name="ssa", namespace=ns, field_manager="beta",
                                force_conflicts=True)
    assert out.data.a == "2"
    managers = {e["manager"]: e["operation"] for e in out.metadata.managedFields}
    assert managers == {"beta": "Apply"}


def test_scale_subresource(simcluster, dyn, ns):
    api = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    api.create(body=_deployment("scaled"), namespace=ns)
    path = "/apis/apps/v1/namespaces/%s/deployments/scaled/scale" % ns
    status, _, body = raw(simcluster, "PATCH", path, {"spec": {"replicas": 4}},
                          {"Content-Type": "application/merge-patch+json"})
    assert status == 200 and json.loads(body)["kind"] == "Scale"
    assert api.get(name="scaled", namespace=ns).spec.replicas == 4


# --- CRDs ----------------------------------------------------------------------------

def test_crd_served_dynamically(simcluster, dyn, ns):
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1",
                             kind="CustomResourceDefinition")
    crds.create(body=CRD)
    resources = json.loads(raw(simcluster, "GET", "/apis/example.com/v1")[2])["resources"]
    entry = next(r for r in resources if r["name"] == "widgets")
    assert entry["shortNames"] == ["wg"] and entry["categories"] == ["all"]
    assert "widgets/status" in {r["name"] for r in resources}
    dyn.resources.invalidate_cache()
    widgets = dyn.resources.get(api_version="example.com/v1", kind="Widget")
    w = widgets.create(body={"apiVersion": "example.com/v1", "kind": "Widget",
                             "metadata": {"name": "w1"}, "spec": {"size": 1},
                             "status": {"ready": True}}, namespace=ns)
    assert w.status is None                    # status is dropped on create
    w = w.to_dict()
    w["status"] = {"ready": True}
    out = widgets.subresources["status"].replace(body=w, namespace=ns, name="w1")
    assert out.status.ready is True and out.metadata.generation == 1
    w = out.to_dict()
    w["status"] = {"ready": False}
    w["spec"]["size"] = 5
    out = widgets.replace(body=w, namespace=ns)       # the main resource keeps the status
    assert out.status.ready is True and out.spec.size == 5 and out.metadata.generation == 2
    with pytest.raises(ApiException) as err:
        widgets.patch(name="w1", namespace=ns, body={"spec": {"size": 2}},
                      content_type="application/strategic-merge-patch+json")
    assert err.value.status == 415
    out = widgets.patch(name="w1", namespace=ns, body={"spec": {"size": 2}},
                        content_type="application/merge-patch+json")
    assert out.spec.size == 2 and out.metadata.generation == 3
    index = json.loads(raw(simcluster, "GET", "/openapi/v3")[2])["paths"]
    doc = json.loads(raw(simcluster, "GET", index["apis/example.com/v1"]["serverRelativeURL"])[2])
    schema = doc["components"]["schemas"]["com.example.v1.Widget"]
    assert schema["properties"]["spec"]["properties"]["size"] == {"type": "integer"}
    crds.delete(name="widgets.example.com")
    assert raw(simcluster, "GET", "/apis/example.com/v1/namespaces/%s/widgets" % ns)[0] == 404


@pytest.mark.needs_shared
def test_real_clusterpolicy_crd(dyn):
    import yaml
    with open(CLUSTERPOLICY_CRD, encoding="utf-8") as fh:
        crd = yaml.safe_load(fh)
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1",
                             kind="CustomResourceDefinition")
    try:
        crds.create(body=crd)
    except ConflictError:
        pass                                   # the cluster file already loaded it
    dyn.resources.invalidate_cache()
    api = dyn.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    assert api.namespaced is False
    assert "status" in api.subresources


# --- watch ---------------------------------------------------------------------------

def test_watch_from_resource_version(dyn, ns):
    api = dyn.resources.get(api_version="v1", kind="ConfigMap")
    created = api.create(body=cm("watched", {"w": "1"}), namespace=ns)
    api.patch(name="watched", namespace=ns, body={"data": {"k": "2"}},
              content_type="application/merge-patch+json")
    api.patch(name="watched", namespace=ns, body={"metadata": {"labels": {"w": None}}},
              content_type="application/merge-patch+json")
    events = []
    for ev in dyn.watch(api, namespace=ns, label_selector="w=1", timeout=1,
                        resource_version=created.metadata.resourceVersion):
        events.append((ev["type"], ev["object"].data.k))
    # MODIFIED while matching, DELETED when the label no longer matches the selector
    assert events == [("MODIFIED", "2"), ("DELETED", "2")]


def test_watch_streams_new_events(dyn, ns):
    api = dyn.resources.get(api_version="v1", kind="ConfigMap")
    seen = []

    def consume():
        for ev in dyn.watch(api, namespace=ns, field_selector="metadata.name=live", timeout=3):
            seen.append(ev["type"])
            if ev["type"] == "DELETED":
                return

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(0.3)
    api.create(body=cm("live"), namespace=ns)
    api.delete(name="live", namespace=ns)
    thread.join(5)
    assert seen == ["ADDED", "DELETED"]


def test_watch_too_old_resource_version_is_410():
    with InProcess(Store(history=3)) as srv:
        srv.store.admission._mod = False
        from kubernetes import client
        v1 = client.CoreV1Api(srv.api_client())
        for i in range(6):
            srv.store.create("configmaps", cm("c%d" % i) | {"metadata": {
                "name": "c%d" % i, "namespace": "default"}})
        with pytest.raises(ApiException) as err:
            for _ in watch.Watch().stream(v1.list_namespaced_config_map, "default",
                                          resource_version="1", timeout_seconds=2):
                pass
        assert err.value.status == 410
        assert "too old resource version" in err.value.reason


# --- pods: log, eviction, binding; warnings; protobuf; stats -------------------------

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
       "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}


def test_pod_log_eviction_binding_and_warnings():
    with InProcess() as srv:
        class Admission:
            @staticmethod
            def admit(store, op, resource, obj, old, **kw):
                return ["careful with %s" % resource] if op == "CREATE" else []

        srv.store.admission._mod = Admission
        status, headers, _ = raw(srv, "POST", "/api/v1/namespaces/default/pods", POD)
        assert status == 201 and headers["Warning"] == '299 - "careful with pods"'
        srv.store.pod_logs[("default", "p", "a")] = "line1\nTest PASSED\n"
        status, _, body = raw(srv, "GET", "/api/v1/namespaces/default/pods/p/log")
        assert status == 400
        assert json.loads(body)["message"] == ("a container name must be specified for pod p, "
                                               "choose one of: [a b]")
        status, _, body = raw(srv, "GET", "/api/v1/namespaces/default/pods/p/log?container=a")
        assert status == 200 and body.decode().endswith("Test PASSED\n")
        status, _, _ = raw(srv, "POST", "/api/v1/namespaces/default/pods/p/binding",
                           {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                            "target": {"kind": "Node", "name": "n1"}})
        assert status == 201
        assert srv.store.get("pods", "default", "p")["spec"]["nodeName"] == "n1"
        status, _, _ = raw(srv, "POST", "/api/v1/namespaces/default/pods/p/eviction",
                           {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": "p", "namespace": "default"}})
        assert status == 201 and srv.store.get("pods", "default", "p") is None


def test_protobuf_secret_like_helm(simcluster, ns):
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
              "metadata": {"name": "sh.helm.release.v1.pb.v1", "namespace": ns,
                           "labels": {"owner": "helm", "name": "pb"}},
              "data": {"release": base64.b64encode(b"H4sI-payload").decode()}}
    status, headers, body = raw(simcluster, "POST", "/api/v1/namespaces/%s/secrets" % ns,
                                protobuf.encode(secret),
                                {"Content-Type": protobuf.CONTENT_TYPE,
                                 "Accept": protobuf.CONTENT_TYPE + ",application/json"})
    assert status == 201 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["data"] == secret["data"]
    # a protobuf-only client gets protobuf back
    status, headers, body = raw(simcluster, "GET", "/api/v1/namespaces/%s/secrets/%s"
                                % (ns, secret["metadata"]["name"]),
                                headers={"Accept": protobuf.CONTENT_TYPE})
    assert headers["Content-Type"] == protobuf.CONTENT_TYPE
    assert protobuf.decode(body)["metadata"]["labels"] == {"owner": "helm", "name": "pb"}


def test_stats_count_requests_by_verb_and_resource(simcluster, dyn, ns):
    simcluster.reset_stats()
    api = dyn.resources.get(api_version="v1", kind="ConfigMap")
    api.create(body=cm("counted"), namespace=ns)
    api.get(name="counted", namespace=ns)
    api.get(namespace=ns)
    stats = simcluster.stats()
    assert stats["by_resource"]["configmaps"] == {"create": 1, "get": 1, "list": 1}
    assert stats["by_verb"]["create"] >= 1
    assert stats["total"] >= 3


def test_watch_list_initial_events_end_with_bookmark(simcluster, ns):
    status, _, body = raw(simcluster, "GET", "/api/v1/namespaces/%s/configmaps?watch=1&"
                          "sendInitialEvents=true&allowWatchBookmarks=true&"
                          "resourceVersionMatch=NotOlderThan&timeoutSeconds=1" % ns)
    events = [json.loads(line) for line in body.decode().splitlines() if line]
    assert status == 200 and events[0]["type"] == "ADDED"
    last = events[-1]
    assert last["type"] == "BOOKMARK"
    assert last["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    status, _, body = raw(simcluster, "GET", "/api/v1/configmaps?watch=1&resourceVersion=abc")
    assert status == 400
