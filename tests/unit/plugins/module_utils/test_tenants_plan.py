"""tenants (validate, render), quantity and the comparison of tenants_apply, without a cluster."""
import json
from fractions import Fraction

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.quantity import (
    QuantityError,
    parse_quantity,
)
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.apply import (
    comparable,
    merge_diff,
    plan_update,
)
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

SETTINGS = tenants.default_settings()
CLUSTER = {"gpus": 12, "mig_resources": {"nvidia.com/mig-1g.10gb"}, "mig_source": "ConfigMap gpu-operator/x"}
ISSUE_TEAM = {
    "name": "team-a", "description": "Vision research",
    "quota": {"requests.nvidia.com/gpu": 8, "requests.nvidia.com/mig-1g.10gb": 14, "requests.cpu": "64",
              "requests.memory": "512Gi"},
    "limit_range": {"default": {"cpu": "2", "memory": "8Gi"}, "default_request": {"cpu": "500m", "memory": "2Gi"}},
    "pod_security": "restricted",
    "groups": {"admin": ["idp-team-a-leads"], "edit": ["idp-team-a"], "view": ["idp-auditors"]},
    "network": {"egress_cidrs": ["10.20.0.0/16"], "ingress_from_namespaces": ["monitoring"]},
    "labels": {"cost-center": "4711"},
}


def by_name(objects):
    return dict(("%s/%s" % (o["kind"], o["metadata"]["name"]), o) for o in objects)


@pytest.mark.parametrize("text,value", [
    ("500m", Fraction(1, 2)), ("2Gi", 2 * 2 ** 30), (8, 8), ("1.5", Fraction(3, 2)), ("1k", 1000), ("1e3", 1000),
    (0.5, Fraction(1, 2)), ("512Mi", 512 * 2 ** 20),
])
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["12 GB", "abc", "", "1.2.3", None, True, "1Kb"])
def test_parse_quantity_refuses(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_same_quantity_ignores_spelling():
    assert parse_quantity("0.5") == parse_quantity("500m") and parse_quantity("1000") == parse_quantity("1k")
    assert parse_quantity(8) == parse_quantity("8")
    assert parse_quantity("1Gi") != parse_quantity("1G")


def test_issue_example_is_valid_and_renders_every_object():
    assert tenants.validate([ISSUE_TEAM], SETTINGS, CLUSTER) == []
    objs = by_name(tenants.render_team(ISSUE_TEAM, SETTINGS))
    assert sorted(objs) == sorted([
        "Namespace/team-a", "ResourceQuota/tenant-quota", "LimitRange/tenant-limits",
        "NetworkPolicy/tenant-default-deny", "NetworkPolicy/tenant-allow-same-namespace",
        "NetworkPolicy/tenant-allow-dns", "NetworkPolicy/tenant-allow-ingress", "NetworkPolicy/tenant-allow-egress",
        "RoleBinding/tenant-admin", "RoleBinding/tenant-edit", "RoleBinding/tenant-view",
        "ValidatingAdmissionPolicy/skaffon-gpu-access-team-a", "ValidatingAdmissionPolicyBinding/skaffon-gpu-access-team-a"])
    ns = objs["Namespace/team-a"]["metadata"]
    assert ns["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ns["labels"]["pod-security.kubernetes.io/audit-version"] == "latest"
    assert ns["labels"]["cost-center"] == "4711"
    assert ns["annotations"][tenants.DESCRIPTION_ANNOTATION] == "Vision research"
    for obj in objs.values():
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "skaffon.gpu_platform"
        assert obj["metadata"]["labels"][tenants.TEAM_LABEL] == "team-a"
    deny = objs["NetworkPolicy/tenant-default-deny"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}       # FACTS.md
    dns = objs["NetworkPolicy/tenant-allow-dns"]["spec"]["egress"][0]
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert dns["to"][0]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    ingress = objs["NetworkPolicy/tenant-allow-ingress"]["spec"]["ingress"]
    assert ingress == [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}]
    assert objs["NetworkPolicy/tenant-allow-egress"]["spec"]["egress"] == [{"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}]
    assert objs["ResourceQuota/tenant-quota"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"
    rb = objs["RoleBinding/tenant-view"]
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    assert rb["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "idp-auditors"}]


def test_extras_egress_to_namespaces_ports_and_role_bindings():
    team = {"name": "team-b", "network": {
        "egress_to_namespaces": [{"namespace": "data", "pod_labels": {"app": "pg"}, "ports": [5432]}],
        "egress_cidrs": [{"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"], "ports": [{"port": 443}]}],
        "ingress_from_namespaces": [{"namespace": "monitoring", "ports": ["metrics", {"port": 9000, "end_port": 9100}]}],
        "allow_same_namespace": False},
        "role_bindings": [{"name": "ci", "cluster_role": "edit", "service_accounts": ["ci/deployer", "local"]}],
        "annotations": {"owner": "x@example.com"}, "queue": {"anything": "goes"}}
    assert tenants.validate([team], SETTINGS, CLUSTER) == []
    objs = by_name(tenants.render_team(team, SETTINGS))
    assert "NetworkPolicy/tenant-allow-same-namespace" not in objs
    egress = objs["NetworkPolicy/tenant-allow-egress"]["spec"]["egress"]
    assert egress[0] == {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}],
                         "ports": [{"protocol": "TCP", "port": 443}]}
    assert egress[1]["to"][0]["podSelector"] == {"matchLabels": {"app": "pg"}}
    ingress = objs["NetworkPolicy/tenant-allow-ingress"]["spec"]["ingress"][0]
    assert ingress["ports"] == [{"protocol": "TCP", "port": "metrics"},
                                {"protocol": "TCP", "port": 9000, "endPort": 9100}]
    assert objs["RoleBinding/tenant-ci"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "deployer", "namespace": "ci"},
        {"kind": "ServiceAccount", "name": "local", "namespace": "team-b"}]
    assert objs["Namespace/team-b"]["metadata"]["annotations"]["owner"] == "x@example.com"
    assert not any("queue" in json.dumps(o) for o in objs.values())          # the queues role's business


@pytest.mark.parametrize("teams,snippet", [
    ([{"name": "a", "quota": {"requests.nvidia.com/mig-2g.20gb": 1}}], "offered: nvidia.com/mig-1g.10gb"),
    ([{"name": "a", "quota": {"requests.nvidia.com/gpu": "1.5"}}], "whole units"),
    ([{"name": "a", "quota": {"requests.cpu": "-1"}}], "must not be negative"),
    ([{"name": "a", "network": {"egress_cidrs": [{"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]}]}}],
     "strict subset"),
    ([{"name": "a", "network": {"ingress_from_namespaces": [{"namespace": "m", "ports": [70000]}]}}],
     "between 1 and 65535"),
    ([{"name": "a", "network": {"ingress_from_namespaces": [
        {"namespace": "m", "ports": [{"port": "metrics", "end_port": 90}]}]}}],
     "end_port needs a numeric port"),
    ([{"name": "a", "labels": {"app.kubernetes.io/managed-by": "me"}}], "set by the role itself"),
    ([{"name": "a", "labels": {"cost-center": 4711.5}}], "label value"),
    ([{"name": "a", "role_bindings": [{"name": "x", "cluster_role": "edit", "role": "r", "groups": ["g"]}]}],
     "exactly one of cluster_role"),
    ([{"name": "a", "role_bindings": [{"name": "admin", "cluster_role": "edit", "groups": ["g"]}]}],
     "already used"),
    ([{"name": "a", "groups": {"edit": "idp-a"}}], "must be a list of strings"),
    ([{"name": "a", "pod_security": "strict"}], "must be baseline or restricted"),
    (["team-a"], "each team is a mapping"),
    ([{"name": "a", "network": {"egress_cidrs": ["10.0.0.1"]}}], "not a CIDR"),
])
def test_refusals_name_the_team_field_and_fix(teams, snippet):
    problems = tenants.validate(teams, SETTINGS, CLUSTER)
    assert any(snippet in p for p in problems), problems
    assert all(p.startswith("tenants_list") for p in problems), problems


def test_overcommit_allowed_when_asked():
    teams = [{"name": "a", "quota": {"requests.nvidia.com/gpu": 10}}, {"name": "b", "quota": {"requests.nvidia.com/gpu": 4}}]
    assert any("add up to 14" in p for p in tenants.validate(teams, SETTINGS, CLUSTER))
    assert tenants.validate(teams, tenants.default_settings(allow_overcommit=True), CLUSTER) == []


def test_reserved_namespaces_follow_settings():
    settings = tenants.default_settings(operator_namespace="nvidia-gpu", reserved_namespaces=["argocd"])
    assert tenants.validate([{"name": "gpu-operator"}], settings, CLUSTER) == []
    problems = tenants.validate([{"name": "nvidia-gpu"}, {"name": "argocd"}, {"name": "kueue-system"}], settings, CLUSTER)
    assert len(problems) == 3


def test_comparison_ignores_quantity_spelling_and_server_defaults():
    desired = by_name(tenants.render_team(ISSUE_TEAM, SETTINGS))
    live = json.loads(json.dumps(desired))
    live["ResourceQuota/tenant-quota"]["spec"]["hard"]["requests.memory"] = "549755813888"
    live["ResourceQuota/tenant-quota"]["status"] = {"used": {"requests.cpu": "0"}}
    live["LimitRange/tenant-limits"]["spec"]["limits"][0]["defaultRequest"]["cpu"] = "0.5"
    live["Namespace/team-a"]["metadata"]["labels"]["kubernetes.io/metadata.name"] = "team-a"
    live["Namespace/team-a"]["spec"] = {"finalizers": ["kubernetes"]}
    for port in live["NetworkPolicy/tenant-allow-dns"]["spec"]["egress"][0]["ports"]:
        port.pop("protocol") if port["protocol"] == "TCP" else None
    for key, obj in desired.items():
        assert plan_update(obj, live[key]) == (None, [], False), key


def test_drift_patch_sets_back_and_removes_foreign_quota_keys():
    desired = by_name(tenants.render_team(ISSUE_TEAM, SETTINGS))["ResourceQuota/tenant-quota"]
    live = json.loads(json.dumps(desired))
    live["spec"]["hard"]["requests.nvidia.com/gpu"] = "100"
    live["spec"]["hard"]["pods"] = "5"
    patch, fields, replace = plan_update(desired, live)
    assert fields == ["spec"] and not replace
    assert patch == {"spec": {"hard": {"requests.nvidia.com/gpu": "8", "pods": None}}}


def test_dropped_label_removed_foreign_label_kept():
    old = dict(ISSUE_TEAM, labels={"cost-center": "4711", "tier": "gold"})
    live = by_name(tenants.render_team(old, SETTINGS))["Namespace/team-a"]
    live["metadata"]["labels"]["istio-injection"] = "enabled"
    desired = by_name(tenants.render_team(ISSUE_TEAM, SETTINGS))["Namespace/team-a"]
    patch, fields, dummy = plan_update(desired, live)
    assert patch["metadata"]["labels"] == {"tier": None}
    assert "istio-injection" not in patch["metadata"]["labels"]


def test_role_ref_change_needs_replace():
    desired = by_name(tenants.render_team(ISSUE_TEAM, SETTINGS))["RoleBinding/tenant-edit"]
    live = json.loads(json.dumps(desired))
    live["roleRef"]["name"] = "admin"
    assert plan_update(desired, live)[2] is True


def test_merge_diff():
    assert merge_diff({"a": 1, "b": {"c": 1, "d": 2}}, {"a": 1, "b": {"c": 2}}) == {"b": {"c": 2, "d": None}}
    assert comparable({"kind": "Namespace", "metadata": {}}) == {}


# --- TenantsApply with a fake Kube (the order and number of requests) ------------------------------

def apply(kube, teams, check=False, **params):
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.apply import TenantsApply
    params = dict(params, tenants=teams, cluster_gpus=12)
    return TenantsApply(kube, params, check_mode=check).run()


def writes_of(kube):
    return [(c.verb, c.kind, c.name) for c in kube.writes()]


def test_apply_then_converged_then_rule_removed():
    kube = FakeKube()
    team = dict(ISSUE_TEAM, quota={"requests.cpu": "4"})
    first = apply(kube, [team])
    assert first["summary"]["NetworkPolicy"]["created"] == 5 and first["requests"]["LIST"] == len(tenants.KINDS)  # one LIST per kind
    assert writes_of(kube)[0] == ("CREATE", "Namespace", "team-a")      # the namespace first
    kube.calls = []
    again = apply(kube, [team])
    assert not again["changed"] and writes_of(kube) == []
    assert [c.verb for c in kube.calls] == ["LIST"] * len(tenants.KINDS)
    assert again["requests"] == {"LIST": len(tenants.KINDS)}
    kube.calls = []
    fewer = dict(team, network={}, groups={"edit": ["idp-team-a"]})
    result = apply(kube, [fewer])
    assert sorted(writes_of(kube)) == sorted([("DELETE", "NetworkPolicy", "tenant-allow-egress"),
                                              ("DELETE", "NetworkPolicy", "tenant-allow-ingress"),
                                              ("DELETE", "RoleBinding", "tenant-admin"),
                                              ("DELETE", "RoleBinding", "tenant-view")])
    assert result["summary"]["RoleBinding"]["deleted"] == 2


def test_check_mode_sends_no_write_and_reports_the_plan():
    kube = FakeKube()
    result = apply(kube, [ISSUE_TEAM, {"name": "team-b"}], check=True,
                   mig_parted_config="version: v1\nmig-configs:\n  all-1g.10gb:\n    - devices: all\n"
                                     "      mig-enabled: true\n      mig-devices: {1g.10gb: 7}\n")
    assert writes_of(kube) == []
    assert result["changed"] and result["summary"]["Namespace"]["created"] == 2


def test_failed_namespace_skips_its_objects_and_rerun_completes():
    kube = FakeKube(fail={("CREATE", "Namespace", "team-b"): 500})
    with pytest.raises(DomainError) as err:
        apply(kube, [{"name": "team-a"}, {"name": "team-b"}])
    assert "Namespace team-b: CREATE Namespace team-b: HTTP 500" in err.value.msg
    assert "a re-run completes the rest" in err.value.msg
    assert [k for k in kube.objects if k[1] == "team-b"] == []           # nothing written into it
    assert len([k for k in kube.objects if k[1] == "team-a"]) == 3
    kube.fail = {}
    result = apply(kube, [{"name": "team-a"}, {"name": "team-b"}])
    assert result["summary"]["Namespace"] == {"created": 1, "updated": 0, "unchanged": 1, "deleted": 0, "pruned": 0}


def test_unmanaged_namespace_refused_and_orphans_kept_without_prune():
    foreign = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "legacy", "labels": {}}}
    kube = FakeKube([foreign])
    with pytest.raises(DomainError) as err:
        apply(kube, [{"name": "legacy"}])
    assert "exists and is not managed" in err.value.msg and writes_of(kube) == []
    apply(kube, [{"name": "team-old"}])
    kube.calls = []
    result = apply(kube, [])
    assert result["orphans"] == [{"team": "team-old", "namespace": "team-old", "action": "kept",
                                  "reason": "not in tenants_list; set tenants_prune: true to delete it"}]
    assert writes_of(kube) == [] and not result["changed"]
    result = apply(kube, [], prune=True)
    assert writes_of(kube) == [("DELETE", "Namespace", "team-old")]
    assert ("Namespace", None, "legacy") in kube.objects


def test_namespace_says_what_the_pods_get_from_the_design():
    """platform_design's tenants_gpu_allocation becomes an owned annotation of the team's namespace."""
    settings = tenants.default_settings(gpu_allocation={ISSUE_TEAM["name"]: "MPS share (1/4 of a GPU's memory and compute)"})
    ns = by_name(tenants.render_team(ISSUE_TEAM, settings))["Namespace/" + ISSUE_TEAM["name"]]
    ann = ns["metadata"]["annotations"]
    assert ann[tenants.GPU_ALLOCATION_ANNOTATION] == "MPS share (1/4 of a GPU's memory and compute)"
    assert tenants.GPU_ALLOCATION_ANNOTATION in json.loads(ann[tenants.OWNED_KEYS_ANNOTATION])["annotations"]
    plain = by_name(tenants.render_team(ISSUE_TEAM, SETTINGS))["Namespace/" + ISSUE_TEAM["name"]]
    assert tenants.GPU_ALLOCATION_ANNOTATION not in plain["metadata"]["annotations"]
