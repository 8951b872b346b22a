"""The quota job with a queue backend: the ResourceQuota and the team's queue change together.

Real KAI and Kueue charts (../shared), teams and queues from an inventory through
playbooks/tenants.yml and playbooks/queues.yml, then the quota job with survey-typed extra vars.
"""
import json
import os
import urllib.request

import pytest

from kit.paths import KAI_CHART, KUEUE_CHART, REPO
from kit.playbook import run_playbook
from kit.kubectl import kget, kubectl
from kit.queues import inventory, start_cluster

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
GPU = "requests.nvidia.com/gpu"
PLAYBOOKS = os.path.join(REPO, "playbooks")


def teams(backend):
    if backend == "kai":
        queue = lambda q: {"parent": "research", "gpu": {"quota": q}}  # noqa: E731
    else:
        queue = lambda q: {"cohort": "research", "flavors": [{"name": "h100", "resources": {  # noqa: E731
            "nvidia.com/gpu": {"nominal": q}}}]}
    return [{"name": "team-a", "quota": {GPU: 2}, "queue": queue(2)},
            {"name": "team-b", "quota": {GPU: 2}, "queue": queue(2)}]


def site_vars(backend):
    values = {"tenants_queue_backend": backend, "tenants_list": teams(backend), "tenants_cluster_gpus": 8,
              "queues_chart_source": "archive", "queues_wait_timeout": 120}
    if backend == "kai":
        values.update(queues_chart_ref=KAI_CHART, queues_chart_version="v0.17.0",
                      queues_departments=[{"name": "research", "gpu": {"quota": 4}}])
    else:
        values.update(queues_chart_ref=KUEUE_CHART, queues_chart_version="0.19.2",
                      queues_pools={"h100": {"labels": {"gpu.skaffon.io/accelerator": "h100"}}})
    return values


def run(sim, inv, name, **extra):
    return run_playbook(os.path.join(PLAYBOOKS, name), sim.env, inventory=inv, extra_vars=extra or None,
                        limit="localhost")


@pytest.fixture(scope="module", params=["kai", "kueue"])
def site(request, tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "quota-" + request.param)
    for ns in ("team-a", "team-b", "team-c"):   # adopt the namespaces the helper created
        kubectl(sim, "label", "namespace", ns, "app.kubernetes.io/managed-by=skaffon.gpu_platform")
    inv = inventory(tmp_path_factory.mktemp("inv"), site_vars(request.param))
    for playbook in ("tenants.yml", "queues.yml"):
        res = run(sim, inv, playbook)
        assert res.rc == 0, res
    yield request.param, sim, inv
    sim.stop()


def survey(**answers):
    base = {"quota_team": "team-a", "quota_resource": GPU, "quota_value": 3, "quota_ticket": "CHG-7",
            "quota_force": "false", "awx_user_name": "bob", "awx_job_id": 12}
    base.update(answers)
    return base


def queue_gpu(sim, backend, name):
    if backend == "kai":
        return kget(sim, "queue", name)["spec"]["resources"]["gpu"]["quota"]
    cq = kget(sim, "clusterqueue", name)
    return cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]


def hard(sim, ns):
    return kget(sim, "resourcequota", "tenant-quota", "-n", ns)["spec"]["hard"][GPU]


def plan_of(res):
    found = res.task_results("Change the quota and the team's queue")
    return found[-1].get("plan") if found else None


def test_raise_moves_parent_queue_first_then_the_team_then_the_quota(site):
    backend, sim, inv = site
    res = run(sim, inv, "quota_increase.yml", **survey())
    assert res.rc == 0, res
    plan = plan_of(res)
    if backend == "kai":
        assert plan[0].startswith("KAI Queue research gpu quota 4 -> 5")
        assert plan[1].startswith("KAI Queue team-a gpu quota 2 -> 3")
        assert queue_gpu(sim, backend, "research") == 5
    else:
        assert plan[0].startswith("Kueue ClusterQueue team-a flavor h100 nvidia.com/gpu nominalQuota 2 -> 3")
    assert plan[-1].startswith("ResourceQuota team-a/tenant-quota")
    assert queue_gpu(sim, backend, "team-a") == 3 and hard(sim, "team-a") == "3"
    again = run(sim, inv, "quota_increase.yml", **survey())
    assert again.rc == 0 and again.changed() == 0, again


def test_inventory_runs_keep_the_raised_values_until_the_inventory_catches_up(site):
    backend, sim, inv = site
    for playbook in ("tenants.yml", "queues.yml"):
        res = run(sim, inv, playbook)
        assert res.rc == 0 and res.changed() == 0, res
    assert hard(sim, "team-a") == "3" and queue_gpu(sim, backend, "team-a") == 3


def test_lowering_moves_the_quota_first_and_the_parent_last(site):
    backend, sim, inv = site
    res = run(sim, inv, "quota_increase.yml", **survey(quota_value=2, quota_ticket="CHG-8"))
    assert res.rc == 0, res
    plan = plan_of(res)
    assert plan[0].startswith("ResourceQuota team-a/tenant-quota")
    if backend == "kai":
        assert plan[-1].startswith("KAI Queue research gpu quota 5 -> 4")
    assert hard(sim, "team-a") == "2" and queue_gpu(sim, backend, "team-a") == 2


def test_a_failed_quota_write_restores_the_queues(site):
    backend, sim, inv = site
    before = {"a": queue_gpu(sim, backend, "team-b"), "quota": hard(sim, "team-b")}
    body = json.dumps([{"status": 500, "verb": "patch", "resource": "resourcequotas"}]).encode()
    urllib.request.urlopen(urllib.request.Request(sim.url + "/_sim/api_errors", data=body, method="POST",
                                                  headers={"Content-Type": "application/json"}), timeout=10)
    try:
        res = run(sim, inv, "quota_increase.yml", **survey(quota_team="team-b", quota_value=3))
    finally:
        urllib.request.urlopen(urllib.request.Request(sim.url + "/_sim/api_errors", method="DELETE"), timeout=10)
    assert res.rc != 0
    text = " ".join(res.failure_messages())
    assert "the change failed at: ResourceQuota team-b/tenant-quota" in text and "Restored:" in text, text
    assert "team-b" in text.split("Restored:")[1]
    assert {"a": queue_gpu(sim, backend, "team-b"), "quota": hard(sim, "team-b")} == before
