"""faults.api_errors: chosen requests answered with real Status errors (real kubernetes client)."""

import json
import urllib.error
import urllib.request

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from simcluster import api_faults, clusterfile
from simcluster.store import Store
from simcluster.testing import InProcess


@pytest.fixture()
def server():
    with InProcess(Store()) as srv:
        core = k8s.CoreV1Api(srv.api_client())
        core.create_node({"metadata": {"name": "gpu-1"}})
        core.create_namespace({"metadata": {"name": "gpu-operator"}})
        yield srv, core


def post(srv, path, rules=None, method="POST"):
    data = json.dumps(rules).encode() if rules is not None else None
    req = urllib.request.Request(srv.url + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_403_on_patch_nodes_count_2_then_the_request_passes(server):
    srv, core = server
    post(srv, "/_sim/api_errors", [{"status": 403, "verb": "patch", "resource": "nodes", "count": 2}])
    core.read_node("gpu-1")                      # other verbs are not affected
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.patch_node("gpu-1", {"metadata": {"labels": {"a": "b"}}})
        body = json.loads(err.value.body)
        assert err.value.status == 403 and err.value.reason == "Forbidden"
        assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": 'nodes "gpu-1" is forbidden: User "system:serviceaccount:default:ansible" '
                                   'cannot patch resource "nodes" in API group "" at the cluster scope',
                        "reason": "Forbidden", "details": {"name": "gpu-1", "kind": "nodes"}, "code": 403}
    core.patch_node("gpu-1", {"metadata": {"labels": {"a": "b"}}})
    assert post(srv, "/_sim/api_errors", method="GET")["rules"][0]["hits"] == 2


def test_429_carries_retry_after_and_namespace_scope(server):
    srv, core = server
    post(srv, "/_sim/api_errors", [{"status": 429, "verb": "list", "resource": "pods",
                                    "namespace": "gpu-operator", "retry_after": 3}])
    core.list_namespaced_pod("default")          # another namespace is not affected
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("gpu-operator")
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "3"
    body = json.loads(err.value.body)
    assert body["reason"] == "TooManyRequests" and body["details"] == {"retryAfterSeconds": 3}
    assert body["message"] == "Too many requests, please try again later."
    post(srv, "/_sim/api_errors", method="DELETE")
    core.list_namespaced_pod("gpu-operator")


@pytest.mark.parametrize("status,reason,needle", [
    (401, "Unauthorized", "Unauthorized"),
    (404, "NotFound", 'nodes "gpu-1" not found'),
    (409, "Conflict", 'Operation cannot be fulfilled on nodes "gpu-1": the object has been modified'),
    (422, "Invalid", 'Node "gpu-1" is invalid: metadata.labels'),
    (500, "InternalError", "Internal error occurred"),
    (503, "ServiceUnavailable", "the server is currently unable to handle the request"),
    (504, "Timeout", "Timeout: request did not complete within requested timeout"),
])
def test_each_status_has_the_api_servers_reason_and_message(server, status, reason, needle):
    srv, core = server
    post(srv, "/_sim/api_errors", [{"status": status, "resource": "nodes", "name": "gpu-1"}])
    with pytest.raises(ApiException) as err:
        core.read_node("gpu-1")
    body = json.loads(err.value.body)
    assert (err.value.status, body["reason"], body["code"]) == (status, reason, status)
    assert needle in body["message"]


def test_subresource_rules_follow_rbac_and_rate_is_random(server):
    srv, core = server
    rules = api_faults.ApiFaults([{"status": 500, "resource": "nodes", "rate": 0.5}])
    info = srv.store.registry.lookup("", "v1", "nodes")
    hits = 0
    for _ in range(200):
        try:
            rules.check("get", info, None, "gpu-1")
        except api_faults.FaultError:
            hits += 1
    assert 60 < hits < 140
    only_status = api_faults.ApiFaults([{"status": 403, "resource": "nodes/status"}])
    only_status.check("patch", info, None, "gpu-1")              # nodes itself: no fault
    with pytest.raises(api_faults.FaultError):
        only_status.check("patch", info, None, "gpu-1", sub="status")


def test_bad_rules_are_refused_naming_the_field(server):
    srv, _core = server
    with pytest.raises(urllib.error.HTTPError) as err:
        post(srv, "/_sim/api_errors", [{"status": 403, "verb": "edit"}])
    body = json.loads(err.value.read())
    assert err.value.code == 400 and "api_errors[0].verb: must be one of get, list" in body["message"]
    with pytest.raises(clusterfile.ClusterFileError, match=r"faults.api_errors\[0\]: give count or rate"):
        clusterfile.validate({"nodes": ["n1"], "faults": {"api_errors": [{"status": 500, "count": 1,
                                                                          "rate": 0.5}]}})
    spec = clusterfile.validate({"nodes": ["n1"], "faults": {"api_errors": [{"status": 503}]}})
    assert spec["faults"]["api_errors"][0]["status"] == 503
