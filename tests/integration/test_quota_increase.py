"""playbooks/quota_increase.yml as the AWX job template runs it: extra vars exactly as the survey sends them.

Teams come from an inventory (group_vars, like inventories/example) through playbooks/tenants.yml;
the quota job then gets only what a person answers in the survey (int for the integer question,
strings for the multiple choice), as AWX passes it.
"""
import json
import os
import urllib.request

import pytest
import yaml

from kit.paths import REPO
from kit.playbook import run_playbook

pytestmark = [pytest.mark.slow, pytest.mark.cluster("no-gpu.yaml")]
TENANTS = os.path.join(REPO, "playbooks", "tenants.yml")
QUOTA = os.path.join(REPO, "playbooks", "quota_increase.yml")
GPU = "requests.nvidia.com/gpu"


@pytest.fixture(scope="module")
def site(simcluster, tmp_path_factory):
    inv = tmp_path_factory.mktemp("inventory")
    (inv / "group_vars").mkdir()
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}}))
    (inv / "group_vars" / "all.yml").write_text(yaml.safe_dump({
        "tenants_cluster_gpus": 12,
        "tenants_list": [
            {"name": "team-a", "quota": {GPU: 8, "requests.cpu": "16", "requests.memory": "64Gi"}},
            {"name": "team-b", "quota": {GPU: 4}},
        ]}))
    res = run_playbook(TENANTS, simcluster.env, inventory=str(inv))
    assert res.rc == 0, res
    return simcluster, str(inv)


def survey(**answers):
    base = {"quota_team": "team-a", "quota_resource": GPU, "quota_value": 8, "quota_ticket": "CHG-1",
            "quota_force": "false", "awx_user_name": "alice", "awx_job_id": 4711}
    base.update(answers)
    return base


def quota(sim, ns="team-a"):
    res = sim.run(os.path.join(REPO, ".venv", "bin", "kubectl"), "get", "resourcequota", "tenant-quota", "-n", ns,
                  "-o", "json")
    return json.loads(res.stdout)


def writes(sim):
    """Real writes since the last reset (dry-run requests are counted apart when the server says so)."""
    stats = sim.stats()
    by_verb = stats.get("writes_by_verb") or stats.get("by_verb") or {}
    return sum(n for verb, n in by_verb.items() if verb.upper() in ("POST", "PUT", "PATCH", "DELETE", "CREATE",
                                                                    "UPDATE"))


def job(site, **answers):
    sim, inv = site
    return run_playbook(QUOTA, sim.env, inventory=inv, extra_vars=survey(**answers))


def messages(res):
    return " ".join(res.failure_messages())


def test_raise_is_recorded_and_the_same_value_again_changes_nothing(site):
    sim, _ = site
    res = job(site, quota_value=6, quota_resource="requests.cpu", quota_ticket="CHG-100")
    assert res.rc == 0, res
    assert res.changed() == 1
    live = quota(sim)
    assert live["spec"]["hard"]["requests.cpu"] == "6"
    record = json.loads(live["metadata"]["annotations"]["gpu-platform.skaffon.io/quota-change"])
    assert record["ticket"] == "CHG-100" and record["user"] == "alice" and record["job"] == "4711"
    assert record["old"] == "16" and record["new"] == "6"
    again = job(site, quota_value=6, quota_resource="requests.cpu", quota_ticket="CHG-100")
    assert again.rc == 0 and again.changed() == 0, again


def test_memory_is_given_in_gib(site):
    sim, _ = site
    res = job(site, quota_resource="requests.memory", quota_value=128)
    assert res.rc == 0, res
    assert quota(sim)["spec"]["hard"]["requests.memory"] == "128Gi"


@pytest.mark.parametrize("answers,expected", [
    ({"quota_value": "5"}, "quota_value must be an integer"),
    ({"quota_value": 5.0}, "quota_value must be an integer"),
    ({"quota_resource": "limits.nvidia.com/gpu"}, "Use quota_resource=requests.nvidia.com/gpu"),
    ({"quota_resource": "nvidia.com/gpu"}, "Use quota_resource=requests.nvidia.com/gpu"),
    ({"quota_team": "team-z"}, "quota_team team-z is not a team of this platform"),
    ({"quota_team": "kube-system"}, "is not labelled app.kubernetes.io/managed-by=skaffon.gpu_platform"),
    ({"quota_value": 9}, "the cluster offers 12"),
    ({"quota_ticket": "x"}, "quota_ticket must name the change ticket"),
    ({"quota_force": "maybe"}, "quota_force must be true or false"),
])
def test_refused_before_any_write(site, answers, expected):
    sim, _ = site
    before = quota(sim)["spec"]["hard"]
    sim.reset_stats()
    res = job(site, **answers)
    assert res.rc != 0
    assert expected in messages(res), messages(res)
    assert quota(sim)["spec"]["hard"] == before
    assert writes(sim) == 0, sim.stats()


def test_decrease_below_use_needs_force(site):
    sim, _ = site
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "team-b"},
           "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "c", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                    "securityContext": {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}},
                                    "resources": {
               "limits": {"nvidia.com/gpu": 3, "cpu": "1", "memory": "1Gi"},
               "requests": {"nvidia.com/gpu": 3, "cpu": "1", "memory": "1Gi"}}}]}}
    path = os.path.join(str(sim.workdir), "pod.json")
    with open(path, "w") as handle:
        json.dump(pod, handle)
    sim.run(os.path.join(REPO, ".venv", "bin", "kubectl"), "create", "-f", path)
    for _ in range(100):  # the quota controller counts the pod (status.used)
        if quota(sim, "team-b").get("status", {}).get("used", {}).get(GPU) == "3":
            break
        __import__("time").sleep(0.05)
    refused = job(site, quota_team="team-b", quota_value=2)
    assert refused.rc != 0
    assert "below what the team uses now (3)" in messages(refused) and "quota_force=true" in messages(refused)
    assert quota(sim, "team-b")["spec"]["hard"][GPU] == "4"
    forced = job(site, quota_team="team-b", quota_value=2, quota_force="true")
    assert forced.rc == 0, forced
    assert quota(sim, "team-b")["spec"]["hard"][GPU] == "2"


def test_check_mode_writes_nothing(site):
    sim, inv = site
    sim.reset_stats()
    res = run_playbook(QUOTA, sim.env, inventory=inv, extra_vars=survey(quota_value=3, quota_resource="requests.cpu"),
                       check=True)
    assert res.rc == 0 and res.changed() == 1, res
    assert quota(sim)["spec"]["hard"]["requests.cpu"] != "3"
    assert writes(sim) == 0, sim.stats()


def test_api_failure_is_a_message_and_changes_nothing(site):
    sim, _ = site
    body = json.dumps([{"status": 500, "verb": "patch", "resource": "resourcequotas"}]).encode()
    req = urllib.request.Request(sim.url + "/_sim/api_errors", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
    try:
        res = job(site, quota_resource="requests.cpu", quota_value=7)
    finally:
        urllib.request.urlopen(urllib.request.Request(sim.url + "/_sim/api_errors", method="DELETE"), timeout=10)
    assert res.rc != 0
    text = messages(res)
    assert "the change failed at: ResourceQuota team-a/tenant-quota requests.cpu" in text
    assert "HTTP 500" in text and "Nothing had been changed" in text
    assert "Traceback" not in text
