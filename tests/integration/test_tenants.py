"""Tenant onboarding: playbooks/tenants.yml against the simulated cluster, driven by inventories.

The cluster is tests/clusters/default.yaml (8 x H100 + 4 x L40S). The fixture gives it what a
running GPU Operator and kubeadm would: the nodes' allocatable nvidia.com/gpu (device plugin),
the chart's default-mig-parted-config ConfigMap and CoreDNS (kube-system/kube-dns). The tests of
this module run in order on one cluster: refusals first (nothing exists yet), then onboarding
from inventories/example, re-run, check mode, admission, isolation probes, drift, prune, faults.
"""
import json
import os
import shutil
import time
import urllib.request

import pytest
import yaml

from kit.paths import MIG_PARTED_CONFIG as MIG_CONFIG, REPO
from kit.playbook import run_playbook

PLAYBOOK = os.path.join(REPO, "playbooks", "tenants.yml")
EXAMPLE = os.path.join(REPO, "inventories", "example")
AGNHOST = "registry.k8s.io/e2e-test-images/agnhost:2.53"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
KINDS = ("namespaces", "resourcequotas", "limitranges", "networkpolicies.networking.k8s.io",
         "rolebindings.rbac.authorization.k8s.io")

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared, pytest.mark.cluster("default.yaml")]

RESTRICTED = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


# --- cluster helpers --------------------------------------------------------------------------

def core(sim):
    from kubernetes import client
    return client.CoreV1Api(sim.api_client())


def writes(stats):
    return sum(n for verb, n in stats["by_verb"].items() if verb in WRITE_VERBS)


def sim_post(sim, path, body, method="POST"):
    req = urllib.request.Request(sim.url + path, method=method, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def wait_for(fn, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for %s" % what)


def pod_body(name, image, args=None, labels=None, ports=None, node="cpu-1", restart="Always", security=True,
             resources=None):
    container = {"name": "main", "image": image}
    if args:
        container["args"] = args
    if ports:
        container["ports"] = ports
    if resources:
        container["resources"] = resources
    spec = {"containers": [container], "restartPolicy": restart, "nodeName": node}
    if security:
        spec["securityContext"] = RESTRICTED
        container["securityContext"] = RESTRICTED_CONTAINER
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def run_probe(sim, namespace, name, target, protocol="tcp"):
    """An agnhost `connect` client pod, as on a real cluster; returns (phase, log)."""
    api = core(sim)
    api.create_namespaced_pod(namespace, pod_body(name, AGNHOST, ["connect", target, "--timeout=2s",
                                                                  "--protocol=%s" % protocol], restart="Never"))
    phase = wait_for(lambda: (api.read_namespaced_pod(name, namespace).status.phase
                              if api.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed")
                              else None), what="probe %s/%s" % (namespace, name))
    return phase, api.read_namespaced_pod_log(name, namespace)


def prepare_cluster(sim):
    """What the GPU Operator and kubeadm would have put there."""
    api = core(sim)
    for node, gpus in (("gpu-h100-1", 8), ("gpu-l40s-1", 4)):
        api.patch_node_status(node, {"status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                                                "allocatable": {"nvidia.com/gpu": str(gpus)}}})
    api.create_namespace({"metadata": {"name": "gpu-operator"}})
    with open(MIG_CONFIG, encoding="utf-8") as fh:       # the chart's ConfigMap, as the operator creates it
        configmap = yaml.safe_load(fh)
    api.create_namespaced_config_map("gpu-operator", {"metadata": {"name": "default-mig-parted-config"},
                                                      "data": configmap["data"]})
    dns = pod_body("coredns-5d78c9869d-abcde", "registry.k8s.io/coredns/coredns:v1.11.3",
                   labels={"k8s-app": "kube-dns"}, security=False,
                   ports=[{"name": "dns", "containerPort": 53, "protocol": "UDP"},
                          {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"}])
    api.create_namespaced_pod("kube-system", dns)
    api.create_namespaced_service("kube-system", {"metadata": {"name": "kube-dns", "labels": {"k8s-app": "kube-dns"}},
                                                  "spec": {"clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"},
                                                           "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                                                                     {"name": "dns-tcp", "port": 53,
                                                                      "protocol": "TCP"}]}})
    for ns in ("monitoring", "legacy"):
        api.create_namespace({"metadata": {"name": ns}})


@pytest.fixture(scope="module")
def cluster(simcluster):
    prepare_cluster(simcluster)
    return simcluster


def inventory(tmp_path, teams=None, **settings):
    """An inventory directory shaped like inventories/example: hosts.yml + group_vars/all/tenants.yml."""
    inv = tmp_path / "inventory"
    if inv.exists():
        shutil.rmtree(str(inv))
    (inv / "group_vars" / "all").mkdir(parents=True)
    shutil.copy(os.path.join(EXAMPLE, "hosts.yml"), str(inv / "hosts.yml"))
    with open(os.path.join(EXAMPLE, "group_vars", "all", "tenants.yml"), encoding="utf-8") as fh:
        example = yaml.safe_load(fh)
    if teams is None:
        teams = example["tenants_list"]
    # the site's registries as in the example, so that a run with fewer teams keeps the others' policies
    settings.setdefault("tenants_allowed_registries", example.get("tenants_allowed_registries"))
    data = dict(settings, tenants_list=teams)
    (inv / "group_vars" / "all" / "tenants.yml").write_text(yaml.safe_dump(data))
    return str(inv)


def example_teams():
    with open(os.path.join(EXAMPLE, "group_vars", "all", "tenants.yml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)["tenants_list"]


def apply_result(res):
    found = res.task_results("Validate every team and apply the differences")
    assert found, res
    return found[-1]


# --- refusals: nothing is written ------------------------------------------------------------------

def team(**kw):
    base = {"name": "team-x", "quota": {"requests.nvidia.com/gpu": 1}}
    base.update(kw)
    return base


REFUSED = [
    ("name-not-dns-label", [team(name="Team_X")], "tenants_list[Team_X].name"),
    ("name-too-long", [team(name="t" * 64)], "DNS-1123 label"),
    ("duplicate", [team(), team()], "listed twice"),
    ("kube-system", [team(name="kube-system")], "a Kubernetes system namespace"),
    ("kube-prefix", [team(name="kube-team")], "a Kubernetes system namespace"),
    ("default", [team(name="default")], "a Kubernetes system namespace"),
    ("operator-namespace", [team(name="gpu-operator")], "the GPU Operator's namespace"),
    ("queue-backend", [team(name="kai-scheduler")], "the queue backend's namespace"),
    ("limits-extended", [team(quota={"limits.nvidia.com/gpu": 2})], "rename the key to requests.nvidia.com/gpu"),
    ("bare-extended", [team(quota={"nvidia.com/gpu": 2})], "rename the key to requests.nvidia.com/gpu"),
    ("bad-quantity", [team(quota={"requests.memory": "12 GB"})], "is not a quantity"),
    ("mig-not-offered", [team(quota={"requests.nvidia.com/mig-9g.99gb": 1})],
     "no MIG profile of ConfigMap gpu-operator/default-mig-parted-config offers nvidia.com/mig-9g.99gb"),
    ("privileged", [team(pod_security="privileged")], "a team namespace is never privileged"),
    ("gpu-overcommit", [team(quota={"requests.nvidia.com/gpu": 8}), team(name="team-y", quota={
        "requests.nvidia.com/gpu": 8})], "add up to 16 (team-x=8, team-y=8) but the cluster has 12 GPUs"),
    ("bad-cidr", [team(network={"egress_cidrs": ["10.20.0.0/33"]})], "network.egress_cidrs[0]"),
    ("cidr-host-bits", [team(network={"egress_cidrs": ["10.20.1.0/16"]})], "did you mean 10.20.0.0/16"),
    ("unknown-key", [team(quotas={"requests.cpu": 1})], "tenants_list[team-x].quotas"),
    ("unknown-network-key", [team(network={"egress": ["10.0.0.0/8"]})], "tenants_list[team-x].network.egress"),
    ("unknown-role", [team(groups={"owner": ["idp-x"]})], "tenants_list[team-x].groups.owner"),
    ("default-request-above-limit", [team(limit_range={"default": {"cpu": "1"}, "default_request": {"cpu": "2"}})],
     "is above limit_range.default.cpu"),
    ("unmanaged-namespace", [team(name="legacy")], "the namespace legacy exists and is not managed"),
]


@pytest.mark.parametrize("case,teams,expected", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_before_any_write(cluster, tmp_path, case, teams, expected):
    cluster.reset_stats()
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory(tmp_path, teams))
    assert res.rc != 0, res
    msg = " ".join(res.failure_messages())
    assert expected in msg, msg
    assert "nothing was changed" in msg
    stats = cluster.stats()
    assert writes(stats) == 0, stats["by_verb"]


# --- onboarding, re-run, check mode ------------------------------------------------------------------

def test_onboarding_from_example_inventory(cluster):
    cluster.reset_stats()
    res = run_playbook(PLAYBOOK, cluster.env, inventory=EXAMPLE)
    assert res.rc == 0, res
    stats = cluster.stats()
    out = apply_result(res)
    assert out["changed"]
    assert out["summary"]["Namespace"]["created"] == 3
    api = core(cluster)
    ns = api.read_namespace("team-vision").metadata.labels
    assert ns["app.kubernetes.io/managed-by"] == "skaffon.gpu_platform"
    assert ns["gpu-platform.skaffon.io/team"] == "team-vision"
    assert ns["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ns["pod-security.kubernetes.io/warn-version"] == "latest"
    assert api.read_namespace("team-nlp").metadata.labels["pod-security.kubernetes.io/enforce"] == "baseline"
    quota = api.read_namespaced_resource_quota("tenant-quota", "team-vision")
    assert quota.spec.hard["requests.nvidia.com/gpu"] == "4"
    assert quota.spec.hard["requests.nvidia.com/mig-1g.10gb"] == "14"
    lr = api.list_namespaced_limit_range("team-vision").items[0]
    assert lr.spec.limits[0].default_request == {"cpu": "500m", "memory": "2Gi", "ephemeral-storage": "1Gi"}
    assert quota.spec.hard["local-nvme.storageclass.storage.k8s.io/requests.storage"] == "4Ti"
    from kubernetes import client
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    admin = rbac.read_namespaced_role_binding("tenant-admin", "team-vision")
    assert (admin.role_ref.kind, admin.role_ref.name) == ("ClusterRole", "admin")
    assert [(s.kind, s.name) for s in admin.subjects] == [("Group", "idp-team-vision-leads")]
    ci = rbac.read_namespaced_role_binding("tenant-ci-deployer", "team-nlp")
    assert [(s.kind, s.namespace, s.name) for s in ci.subjects] == [("ServiceAccount", "ci", "deployer")]
    net = client.NetworkingV1Api(cluster.api_client())
    names = sorted(p.metadata.name for p in net.list_namespaced_network_policy("team-vision").items)
    assert names == ["tenant-allow-dns", "tenant-allow-egress", "tenant-allow-ingress", "tenant-allow-same-namespace",
                     "tenant-default-deny"]
    # one LIST per kind, one write per object
    for kind in KINDS:
        assert stats["by_resource"][kind].get("list") == 1, (kind, stats["by_resource"][kind])
    assert writes(stats) == sum(sum(v for k, v in s.items() if k in ("created", "updated"))
                                for s in out["summary"].values())


def test_rerun_changes_nothing(cluster):
    cluster.reset_stats()
    res = run_playbook(PLAYBOOK, cluster.env, inventory=EXAMPLE)
    assert res.rc == 0 and res.changed() == 0, res
    stats = cluster.stats()
    assert writes(stats) == 0, stats["by_verb"]
    for kind in KINDS:
        assert stats["by_resource"][kind] == {"list": 1}, (kind, stats["by_resource"][kind])


def test_check_mode_writes_nothing(cluster, tmp_path):
    teams = example_teams()
    teams[0]["quota"]["requests.cpu"] = "48"
    teams.append({"name": "team-new", "quota": {"requests.cpu": "8"}})
    cluster.reset_stats()
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory(tmp_path, teams), check=True, diff=True)
    assert res.rc == 0, res
    out = apply_result(res)
    assert out["changed"]
    assert {"action": "updated", "object": "ResourceQuota team-vision/tenant-quota"} in out["changes"]
    assert {"action": "created", "object": "Namespace team-new"} in out["changes"]
    assert any(d["after_header"] == "ResourceQuota team-vision/tenant-quota" for d in out["diff"])
    assert writes(cluster.stats()) == 0, cluster.stats()["by_verb"]
    assert core(cluster).read_namespaced_resource_quota("tenant-quota", "team-vision").spec.hard["requests.cpu"] == "64"


# --- what the namespaces enforce ---------------------------------------------------------------------

def test_over_quota_gpu_pod_refused_with_403(cluster):
    from kubernetes.client.rest import ApiException
    body = pod_body("train", "nvcr.io/nvidia/pytorch:24.08-py3", node="gpu-h100-1",
                    resources={"limits": {"nvidia.com/gpu": "3", "cpu": "1", "memory": "1Gi"}})
    with pytest.raises(ApiException) as err:
        core(cluster).create_namespaced_pod("team-inference", body)
    assert err.value.status == 403
    assert "exceeded quota: tenant-quota" in err.value.body and "requests.nvidia.com/gpu" in err.value.body


def test_privileged_pod_refused_in_team_namespace(cluster):
    from kubernetes.client.rest import ApiException
    body = pod_body("root", "busybox:1.36", security=False)
    body["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    for ns in ("team-vision", "team-nlp"):
        with pytest.raises(ApiException) as err:
            core(cluster).create_namespaced_pod(ns, body)
        assert err.value.status == 403
        assert "violates PodSecurity" in err.value.body


def test_team_isolation_with_probes(cluster):
    api = core(cluster)
    for ns in ("team-vision", "team-nlp"):
        api.create_namespaced_pod(ns, pod_body("server", AGNHOST, ["netexec", "--http-port=8080"],
                                               labels={"app": "server"},
                                               ports=[{"name": "http", "containerPort": 8080},
                                                      {"name": "metrics", "containerPort": 9400}]))
        api.create_namespaced_service(ns, {"metadata": {"name": "server"}, "spec": {
            "selector": {"app": "server"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                                                     {"name": "metrics", "port": 9400}]}})
    for ns in ("team-vision", "team-nlp"):
        wait_for(lambda: any(c.type == "Ready" and c.status == "True"
                             for c in (api.read_namespaced_pod("server", ns).status.conditions or [])),
                 what="server pod in %s ready" % ns)
    # team A cannot reach team B (denied packets time out), by Service name or pod IP
    phase, log = run_probe(cluster, "team-vision", "to-nlp", "server.team-nlp.svc.cluster.local:80")
    assert (phase, log) == ("Failed", "TIMEOUT\n")
    nlp_ip = api.read_namespaced_pod("server", "team-nlp").status.pod_ip
    assert run_probe(cluster, "team-vision", "to-nlp-ip", "%s:8080" % nlp_ip)[0] == "Failed"
    # ... but its own namespace and the cluster DNS
    assert run_probe(cluster, "team-vision", "to-own", "server:80") == ("Succeeded", "")
    assert run_probe(cluster, "team-vision", "to-dns", "kube-dns.kube-system.svc.cluster.local:53",
                     "udp") == ("Succeeded", "")
    assert run_probe(cluster, "team-vision", "to-dns-tcp", "10.96.0.10:53") == ("Succeeded", "")
    # monitoring reaches the metrics port of team-vision (only that port) and all of team-nlp
    assert run_probe(cluster, "monitoring", "scrape", "server.team-vision.svc.cluster.local:9400") == ("Succeeded", "")
    assert run_probe(cluster, "monitoring", "scrape-http", "server.team-vision.svc.cluster.local:80")[0] == "Failed"
    assert run_probe(cluster, "monitoring", "scrape-nlp", "server.team-nlp:9400") == ("Succeeded", "")
    # a namespace that is not listed does not get in
    assert run_probe(cluster, "legacy", "intruder", "server.team-vision:9400") == ("Failed", "TIMEOUT\n")


def test_egress_to_listed_namespaces_and_cidrs(cluster):
    api = core(cluster)
    api.create_namespace({"metadata": {"name": "data-lake"}})
    api.create_namespaced_pod("data-lake", pod_body("pg-0", "postgres:16", labels={"app": "postgres"},
                                                    ports=[{"name": "pg", "containerPort": 5432},
                                                           {"name": "admin", "containerPort": 8008}]))
    api.create_namespaced_service("data-lake", {"metadata": {"name": "pg"}, "spec": {
        "selector": {"app": "postgres"}, "ports": [{"name": "pg", "port": 5432}, {"name": "admin", "port": 8008}]}})
    wait_for(lambda: any(c.type == "Ready" and c.status == "True"
                         for c in (api.read_namespaced_pod("pg-0", "data-lake").status.conditions or [])),
             what="postgres pod ready")
    # team-nlp: egress_to_namespaces data-lake, pods app=postgres, port 5432 only
    assert run_probe(cluster, "team-nlp", "to-pg", "pg.data-lake.svc.cluster.local:5432") == ("Succeeded", "")
    assert run_probe(cluster, "team-nlp", "to-pg-admin", "pg.data-lake:8008") == ("Failed", "TIMEOUT\n")
    assert run_probe(cluster, "team-vision", "vision-to-pg", "pg.data-lake:5432") == ("Failed", "TIMEOUT\n")
    # team-vision: egress_cidrs 10.20.0.0/16 (outside the cluster), nothing else
    assert run_probe(cluster, "team-vision", "to-nfs", "10.20.4.7:2049") == ("Succeeded", "")
    assert run_probe(cluster, "team-vision", "to-elsewhere", "10.30.0.1:2049") == ("Failed", "TIMEOUT\n")


# --- drift, prune ---------------------------------------------------------------------------------

def test_drift_is_repaired_and_reported(cluster):
    api = core(cluster)
    api.patch_namespaced_resource_quota("tenant-quota", "team-nlp", {"spec": {"hard": {
        "requests.nvidia.com/gpu": "60", "requests.nvidia.com/mig-2g.20gb": "7"}}})
    api.patch_namespace("team-nlp", {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged",
                                                             "owner": "someone"}}})
    cluster.reset_stats()
    res = run_playbook(PLAYBOOK, cluster.env, inventory=EXAMPLE)
    assert res.rc == 0, res
    out = apply_result(res)
    assert {"object": "ResourceQuota team-nlp/tenant-quota", "fields": ["spec"]} in out["drift"]
    assert {"object": "Namespace team-nlp", "fields": ["metadata.labels"]} in out["drift"]
    hard = api.read_namespaced_resource_quota("tenant-quota", "team-nlp").spec.hard
    assert hard["requests.nvidia.com/gpu"] == "0" and "requests.nvidia.com/mig-2g.20gb" not in hard
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "14"
    labels = api.read_namespace("team-nlp").metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["owner"] == "someone"             # not ours: kept
    assert writes(cluster.stats()) == 2


def test_prune_needs_prune_and_force(cluster, tmp_path):
    api = core(cluster)
    api.create_namespaced_pod("team-inference", pod_body("web", AGNHOST, ["netexec"],
                                                             resources={"requests": {"cpu": "100m", "memory": "64Mi"}}))
    # converged on this test's inventory first: it has no platform design, so the namespaces lose
    # the design's gpu-allocation annotation here, not in the runs below that assert changed=0
    assert run_playbook(PLAYBOOK, cluster.env, inventory=inventory(tmp_path)).rc == 0
    teams = [t for t in example_teams() if t["name"] != "team-inference"]
    # not listed: reported every run, kept
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory(tmp_path, teams))
    assert res.rc == 0 and res.changed() == 0, res
    assert apply_result(res)["orphans"][0]["action"] == "kept"
    # prune: kept while pods run
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory(tmp_path, teams, tenants_prune=True))
    assert res.rc == 0 and res.changed() == 0, res
    orphan = apply_result(res)["orphans"][0]
    assert orphan["action"] == "kept" and orphan["pods"] == ["web"] and "tenants_force" in orphan["reason"]
    # prune + force: deleted; the namespaces we do not manage are untouched
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inventory(tmp_path, teams, tenants_prune=True,
                                                                  tenants_force=True))
    assert res.rc == 0 and res.changed() == 1, res
    assert apply_result(res)["orphans"][0]["action"] == "deleted"
    from kubernetes.client.rest import ApiException

    def gone():
        try:
            api.read_namespace("team-inference")
            return False
        except ApiException as exc:
            return exc.status == 404
    wait_for(gone, what="namespace team-inference deleted")
    names = [n.metadata.name for n in api.list_namespace().items]
    assert "legacy" in names and "monitoring" in names and "gpu-operator" in names


def test_api_errors_mid_run_then_clean_rerun(cluster, tmp_path):
    teams = example_teams() + [{"name": "team-%02d" % i, "quota": {"requests.cpu": "4"},
                                "groups": {"edit": ["idp-%02d" % i]}} for i in range(6)]
    inv = inventory(tmp_path, teams)
    sim_post(cluster, "/_sim/api_errors", [
        {"status": 500, "verb": "create", "resource": "networkpolicies", "count": 3},
        {"status": 429, "verb": "create", "resource": "rolebindings", "count": 2, "retry_after": 0},
    ])
    try:
        res = run_playbook(PLAYBOOK, cluster.env, inventory=inv)
        assert res.rc != 0, res
        msg = " ".join(res.failure_messages())
        assert "3 write(s) failed" in msg and "HTTP 500" in msg and "a re-run completes the rest" in msg
    finally:
        sim_post(cluster, "/_sim/api_errors", None, method="DELETE")
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inv)
    assert res.rc == 0, res
    out = apply_result(res)
    assert out["summary"]["NetworkPolicy"]["created"] == 3
    assert out["summary"]["RoleBinding"]["created"] == 0       # the 429s were retried in the first run
    res = run_playbook(PLAYBOOK, cluster.env, inventory=inv)
    assert res.rc == 0 and res.changed() == 0, res
