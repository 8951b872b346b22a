"""Audit log: the policy checker (cases ported from k8s.io/apiserver/pkg/audit/policy/checker_test.go)
and the events the API server writes with it."""
import json
import os
import urllib.request

import pytest

from simcluster import audit
from simcluster.testing import InProcess

TIM = {"username": "tim@k8s.io", "groups": ["humans", "developers"]}
ATTRS = {
    "namespaced": dict(user=TIM, verb="get", namespace="default", api_group="", resource="pods", name="busybox",
                       resource_request=True, path="/api/v1/namespaces/default/pods/busybox"),
    "cluster": dict(user=TIM, verb="get", api_group="rbac.authorization.k8s.io", resource="clusterroles",
                    name="edit", resource_request=True, path="/apis/rbac.authorization.k8s.io/v1beta1/clusterroles/edit"),
    "nonResource": dict(user=TIM, verb="get", resource_request=False, path="/logs/kubelet.log"),
    "subresource": dict(user=TIM, verb="get", namespace="default", api_group="", resource="pods", subresource="log",
                        name="busybox", resource_request=True, path="/api/v1/namespaces/default/pods/busybox"),
    "Unauthorized": dict(verb="get", namespace="default", api_group="", resource="pods", name="busybox",
                         resource_request=True, path="/api/v1/namespaces/default/pods/busybox"),
}
RULES = {
    "default": {"level": "Metadata"},
    "create": {"level": "Request", "verbs": ["create"]},
    "tims": {"level": "Metadata", "users": ["tim@k8s.io"]},
    "humans": {"level": "Metadata", "userGroups": ["humans"]},
    "serviceAccounts": {"level": "Request", "userGroups": ["system:serviceaccounts"]},
    "getPods": {"level": "RequestResponse", "verbs": ["get"], "resources": [{"resources": ["pods"]}]},
    "getPodLogs": {"level": "Request", "verbs": ["get"], "resources": [{"resources": ["pods/log"]}]},
    "getPodWildcardMatching": {"level": "Request", "verbs": ["get"], "resources": [{"resources": ["*"]}]},
    "getPodResourceWildcardMatching": {"level": "Request", "verbs": ["get"], "resources": [{"resources": ["*/log"]}]},
    "getPodSubResourceWildcardMatching": {"level": "Request", "verbs": ["get"],
                                          "resources": [{"resources": ["pods/*"]}]},
    "getClusterRoles": {"level": "RequestResponse", "verbs": ["get"], "namespaces": [""],
                        "resources": [{"group": "rbac.authorization.k8s.io", "resources": ["clusterroles"]}]},
    "getLogs": {"level": "RequestResponse", "verbs": ["get"], "nonResourceURLs": ["/logs*"]},
    "getMetrics": {"level": "Request", "verbs": ["get"], "nonResourceURLs": ["/metrics"]},
    "clusterRoleEdit": {"level": "Request", "resources": [{"group": "rbac.authorization.k8s.io",
                                                           "resources": ["clusterroles"], "resourceNames": ["edit"]}]},
    "omit RequestReceived": {"level": "Request", "omitStages": ["RequestReceived"]},
    "only audit panic": {"level": "Request", "omitStages": ["RequestReceived", "ResponseStarted", "ResponseComplete"]},
}

# (request, expected level, rules) of testAuditLevel in checker_test.go
LEVEL_CASES = [
    ("namespaced", "Metadata", ["default"]), ("namespaced", "None", ["create"]),
    ("namespaced", "Metadata", ["tims"]), ("namespaced", "Metadata", ["humans"]),
    ("namespaced", "None", ["serviceAccounts"]), ("namespaced", "RequestResponse", ["getPods"]),
    ("namespaced", "None", ["getClusterRoles"]), ("namespaced", "None", ["getLogs"]),
    ("namespaced", "Metadata", ["getMetrics", "serviceAccounts", "default"]),
    ("namespaced", "RequestResponse", ["getMetrics", "getPods", "default"]),
    ("namespaced", "RequestResponse", ["getPodLogs", "getPods"]),
    ("cluster", "None", ["getPods"]), ("cluster", "RequestResponse", ["getClusterRoles"]),
    ("cluster", "Request", ["clusterRoleEdit", "getClusterRoles"]),
    ("cluster", "RequestResponse", ["getMetrics", "getClusterRoles", "default"]),
    ("cluster", "None", ["getPodLogs", "getPods"]),
    ("nonResource", "None", ["getPods"]), ("nonResource", "RequestResponse", ["getLogs"]),
    ("nonResource", "None", ["getMetrics"]),
    ("nonResource", "RequestResponse", ["getLogs", "getClusterRoles", "default"]),
    ("subresource", "Request", ["getPodLogs", "getPods"]), ("subresource", "Request", ["getPodWildcardMatching"]),
    ("subresource", "Request", ["getPodResourceWildcardMatching"]),
    ("subresource", "Request", ["getPodSubResourceWildcardMatching"]),
    ("Unauthorized", "None", ["tims"]), ("Unauthorized", "Metadata", ["tims", "default"]),
    ("Unauthorized", "None", ["humans"]), ("Unauthorized", "Metadata", ["humans", "default"]),
]


def checker(names, omit=None):
    policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [RULES[n] for n in names]}
    if omit:
        policy["omitStages"] = omit
    return audit.Checker(policy)


@pytest.mark.parametrize("policy_stages", [None, ["RequestReceived", "ResponseStarted"]])
@pytest.mark.parametrize("request_name, level, names", LEVEL_CASES)
def test_level_first_matching_rule_wins(request_name, level, names, policy_stages):
    got, stages = checker(names, policy_stages).level_and_stages(ATTRS[request_name])
    assert got == level
    assert set(stages) == set(policy_stages or [])


@pytest.mark.parametrize("policy_stages, rules, expected", [
    (None, ["omit RequestReceived", "getPods", "default"], {"RequestReceived"}),
    (None, ["only audit panic", "getPods", "default"], {"RequestReceived", "ResponseStarted", "ResponseComplete"}),
    (["RequestReceived", "ResponseStarted"], ["omit RequestReceived", "getPods", "default"],
     {"RequestReceived", "ResponseStarted"}),
])
def test_rule_omit_stages_add_to_the_policys(policy_stages, rules, expected):
    for request_name in ("namespaced", "cluster", "nonResource"):
        level, stages = checker(rules, policy_stages).level_and_stages(ATTRS[request_name])
        assert level == "Request" and set(stages) == expected


@pytest.mark.parametrize("method, path, query, want", [
    ("GET", "/api/v1/namespaces/team-a/pods/p/log", {}, ("get", "team-a", "pods", "log", "p")),
    ("GET", "/api/v1/namespaces/team-a/pods", {}, ("list", "team-a", "pods", "", "")),
    ("GET", "/api/v1/namespaces/team-a/pods", {"watch": "true"}, ("watch", "team-a", "pods", "", "")),
    ("GET", "/api/v1/watch/namespaces/team-a/pods", {}, ("watch", "team-a", "pods", "", "")),
    ("POST", "/apis/batch/v1/namespaces/team-a/jobs", {}, ("create", "team-a", "jobs", "", "")),
    ("DELETE", "/api/v1/namespaces/team-a/secrets", {}, ("deletecollection", "team-a", "secrets", "", "")),
    ("GET", "/api/v1/namespaces/team-a", {}, ("get", "team-a", "namespaces", "", "team-a")),
    ("PUT", "/api/v1/namespaces/team-a/finalize", {}, ("update", "team-a", "namespaces", "finalize", "team-a")),
])
def test_request_info_as_the_request_info_factory(method, path, query, want):
    info = audit.request_info(method, path, query)
    assert info["resource_request"]
    assert (info["verb"], info["namespace"], info["resource"], info["subresource"], info["name"]) == want


def test_non_resource_and_discovery_paths():
    for path in ("/healthz", "/api", "/apis/batch/v1", "/version"):
        assert audit.request_info("GET", path, {})["resource_request"] is False


@pytest.mark.parametrize("policy, message", [
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Everything"}]},
     "rules[0].level: Unsupported value: 'Everything'"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "None", "nonResourceURLs": ["/a"],
                                                                    "resources": [{"group": ""}]}]},
     "both regular resources and non-resource URLs"),
    ({"apiVersion": "audit.k8s.io/v1beta1", "kind": "Policy", "rules": [{"level": "None"}]}, "not an audit.k8s.io/v1"),
])
def test_bad_policies_are_refused_at_start(policy, message):
    with pytest.raises(audit.PolicyError) as exc:
        audit.validate_policy(policy, "p.yaml")
    assert message in str(exc.value)


# -- the API server's log -------------------------------------------------------------------------------

SHIPPED = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "clusters", "audit", "example-policy.yaml")


@pytest.fixture
def server(tmp_path):
    with InProcess() as srv:
        srv.server.audit = audit.AuditLog(audit.load_policy(SHIPPED), str(tmp_path / "audit.log"))
        yield srv, tmp_path / "audit.log"


def call(url, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_job_submission_and_secret_read_are_logged_secret_content_never(server):
    srv, log = server
    call(srv.url, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "team-vision"}})
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
           "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "nvcr.io/nvidia/pytorch:24.01-py3"}]}}}}
    assert call(srv.url, "POST", "/apis/batch/v1/namespaces/team-vision/jobs", job)[0] == 201
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"token": "hunter2-xyz"}}
    assert call(srv.url, "POST", "/api/v1/namespaces/team-vision/secrets", secret)[0] == 201
    assert call(srv.url, "GET", "/api/v1/namespaces/team-vision/secrets/s")[0] == 200
    call(srv.url, "GET", "/healthz")
    served = call(srv.url, "GET", "/_sim/audit")[1].decode()
    assert served == log.read_text()
    events = [json.loads(line) for line in served.splitlines()]
    assert all(e["stage"] == "ResponseComplete" for e in events)       # the policy omits RequestReceived
    jobs = [e for e in events if e["objectRef"].get("resource") == "jobs"]
    assert len(jobs) == 1 and jobs[0]["level"] == "Request" and jobs[0]["verb"] == "create"
    assert jobs[0]["objectRef"] == {"resource": "jobs", "namespace": "team-vision", "name": "train",
                                    "apiGroup": "batch", "apiVersion": "v1"}
    assert jobs[0]["requestObject"]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "nvcr.io/nvidia/pytorch:24.01-py3"
    assert jobs[0]["responseStatus"]["code"] == 201 and "responseObject" not in jobs[0]
    reads = [e for e in events if e["objectRef"].get("resource") == "secrets"]
    assert [(e["verb"], e["level"]) for e in reads] == [("create", "Metadata"), ("get", "Metadata")]
    assert "hunter2" not in served and "aHVudGVyMi" not in served      # neither the value nor its base64
    assert not any(e["requestURI"] == "/healthz" for e in events)
    namespaces = [e for e in events if e["objectRef"].get("resource") == "namespaces"]
    assert namespaces[0]["level"] == "RequestResponse" and namespaces[0]["responseObject"]["kind"] == "Namespace"


def test_a_refused_request_is_logged_with_its_status(server):
    srv, log = server
    call(srv.url, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    assert call(srv.url, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": "x"}})[0] == 409
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["responseStatus"]["code"] == 409 and last["responseStatus"]["reason"] == "AlreadyExists"


def test_no_policy_no_audit_endpoint():
    with InProcess() as srv:
        assert call(srv.url, "GET", "/_sim/audit")[0] == 404


def test_cluster_file_audit_key_resolves_against_its_folder_and_refuses_unknown_keys(tmp_path):
    from simcluster import clusterfile
    nodes = [{"name": "n1"}]
    spec = clusterfile.validate({"nodes": nodes, "audit": {"policy": "p.yaml", "log": "logs/a.log"}}, str(tmp_path))
    assert spec["audit"] == {"policy": str(tmp_path / "p.yaml"), "log": str(tmp_path / "logs" / "a.log")}
    with pytest.raises(clusterfile.ClusterFileError) as exc:
        clusterfile.validate({"nodes": nodes, "audit": {"policy": "p.yaml", "path": "x"}}, str(tmp_path))
    assert "audit: must be {policy: FILE" in str(exc.value)
