"""playbooks/verify.yml on a Kueue site with a cohort: the queue checks follow the site, not the example.

The site: a custom label prefix, a team pool of 8 H100 GPUs (the teams' ResourceFlavor) beside an
L40S node of 4 GPUs no team queue covers, two teams in cohort `research` with nominal 4 and
borrowing 4 each, ResourceQuota 8 each. Teams, quotas and queues come from the inventory through
playbooks/tenants.yml and playbooks/queues.yml (real Kueue chart), then verify.yml runs as a site
would run it.
"""
import os
import tarfile
import xml.etree.ElementTree as ET

import pytest
import yaml

from kit.paths import BIN, KUEUE_CHART, REPO
from kit.playbook import run_playbook
from kit.kubectl import kget, kubectl
from kit.queues import inventory, start_cluster

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
PREFIX = "gpu.example.org/"
FLAVOR = "h100-nvlink-training"
GPU_HOSTS = {
    "gpu-h100-1": {"node_prereqs_label_prefix": PREFIX,
                   "node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"},
                   "node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]},
    "gpu-l40s-1": {"node_prereqs_label_prefix": PREFIX,
                   "node_prereqs_pool": {"accelerator": "l40s", "topology": "pcie", "workload": "batch"}},
}
NODES = [
    {"name": "gpu-h100-1", "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 8, "memory_mib": 81559},
     "host_driver": "550.54.15", "cpu": "64", "memory": "512Gi",
     "labels": {PREFIX + "accelerator": "h100", PREFIX + "topology": "nvlink", PREFIX + "workload": "training"},
     "taints": [{"key": PREFIX + "workload", "value": "training", "effect": "NoSchedule"}]},
    {"name": "gpu-l40s-1", "gpus": {"model": "NVIDIA-L40S", "count": 4, "memory_mib": 46068},
     "host_driver": "550.54.15", "cpu": "32", "memory": "256Gi",
     "labels": {PREFIX + "accelerator": "l40s", PREFIX + "topology": "pcie", PREFIX + "workload": "batch"}},
    {"name": "cpu-1", "cpu": "16", "memory": "64Gi"},
]


def team(name):
    return {"name": name, "quota": {"requests.nvidia.com/gpu": 8},
            "queue": {"cohort": "research", "flavors": [
                {"name": FLAVOR, "resources": {"nvidia.com/gpu": {"nominal": 4, "borrowing_limit": 4}}}]}}


def site_vars(**over):
    values = {"tenants_queue_backend": "kueue", "tenants_list": [team("team-a"), team("team-b")],
              "tenants_allow_overcommit": True,     # 8 + 8 quota on 8 pool GPUs: Kueue keeps the pool whole
              "queues_chart_source": "archive", "queues_chart_ref": KUEUE_CHART, "queues_chart_version": "v0.19.2",
              "queues_wait_timeout": 120, "queues_label_prefix": PREFIX,
              "queues_helm_binary": os.path.join(BIN, "helm3"),
              # a bound, not a wait: the checks return as soon as the shares settle (slow on a loaded CI machine)
              "acceptance_pod_timeout": 240}
    values.update(over)
    return values


def run(sim, inv, name, **extra):
    return run_playbook(os.path.join(REPO, "playbooks", name), sim.env, inventory=inv, extra_vars=extra or None,
                        limit="localhost")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "verify-kueue", nodes=NODES)
    kubectl(sim, "patch", "node", "gpu-l40s-1", "--subresource=status", "--type=merge", "-p",
            '{"status": {"allocatable": {"nvidia.com/gpu": "4"}, "capacity": {"nvidia.com/gpu": "4"}}}')
    for ns in ("team-a", "team-b", "team-c"):   # adopt the namespaces the helper created
        kubectl(sim, "label", "namespace", ns, "app.kubernetes.io/managed-by=skaffon.gpu_platform")
    inv = inventory(tmp_path_factory.mktemp("inv"), site_vars(), GPU_HOSTS)
    for playbook in ("tenants.yml", "queues.yml"):
        res = run(sim, inv, playbook)
        assert res.rc == 0, res
    yield sim, inv
    sim.stop()


def manager_configuration(sim):
    cm = kget(sim, "configmap", "kueue-manager-config", "-n", "kueue-system")
    return yaml.safe_load(cm["data"]["controller_manager_config.yaml"])


def test_queue_checks_pass_with_kueue_and_a_cohort(site, tmp_path):
    sim, inv = site
    assert kget(sim, "resourceflavor", FLAVOR)["spec"]["nodeLabels"][PREFIX + "accelerator"] == "h100"
    # what the real chart rendered: Kueue counts what the ClusterQueues cover, not the pods' cpu and memory
    assert manager_configuration(sim)["resources"]["quotaCheckStrategy"] == "IgnoreUndeclared"
    report = str(tmp_path / "report")
    res = run(sim, inv, "verify.yml", acceptance_report_dir=report,
              acceptance_checks=["quota-enforced", "queues-fair", "tenant-isolation"])
    results = {r["id"]: r for r in res.task_results("Run the hand-over checks")[0]["results"]}
    assert res.rc == 0, "\n".join("%s %s: %s\n  %s" % (r["id"], r["status"], r["summary"], "\n  ".join(
        r.get("evidence") or [])) for r in results.values() if r["status"] != "PASS") or repr(res)
    queues = results["queues-fair"]
    assert queues["status"] == "PASS", queues
    # the teams' pool is the flavor's node, not every GPU node (the L40S node's 4 do not count)
    assert "pool: gpu-h100-1, 8 GPU(s) free" in queues["evidence"], queues["evidence"]
    assert "Kueue admitted team-a 4 and team-b 4 GPUs" in queues["summary"]
    # the gang is everything team-a may borrow (8); with a ResourceQuota of 8 the blocker sits in team-b
    assert "a gang of 8 in team-a started only whole (blocker in team-b)" in queues["summary"], queues
    assert results["quota-enforced"]["status"] == "PASS"
    # nothing of the probes is left: no test Job, no Workload holding quota
    for ns in ("team-a", "team-b"):
        assert not (kget(sim, "jobs", "-n", ns) or {}).get("items")
        assert not (kget(sim, "workloads", "-n", ns) or {}).get("items")


def test_missing_preconditions_skip_with_the_reason_and_a_failure_still_fails(site, tmp_path):
    sim, inv = site
    report = tmp_path / "report"
    # no Prometheus URL, no GPU Operator release: the protocol is written, the play fails for the failure only
    res = run(sim, inv, "verify.yml", acceptance_report_dir=str(report),
              acceptance_checks=["monitoring-alert", "update-rehearsed"])
    assert res.rc != 0
    assert any("Hand-over checks failed: update-rehearsed" in m for m in res.failure_messages()), res
    text = (report / "acceptance.md").read_text()
    assert "| 1 | `monitoring-alert` Metrics present, a GPU failure fires the alarm | SKIP | no Prometheus URL " \
           "given: set acceptance_prometheus_url" in text, text
    root = ET.parse(str(report / "junit.xml")).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    skipped = cases["monitoring-alert"].find("skipped")
    assert skipped is not None and "acceptance_prometheus_url" in skipped.get("message")
    assert cases["update-rehearsed"].find("failure") is not None
    assert root.get("skipped") == "1" and root.get("failures") == "1"
    # only one team has a queue: queues-fair has nothing to compare and says so
    one = site_vars()
    one["tenants_list"] = [team("team-a"), {"name": "team-b", "quota": {"requests.nvidia.com/gpu": 8}}]
    res = run(sim, inventory(tmp_path / "one", one, GPU_HOSTS), "verify.yml", acceptance_report_dir=str(report),
              acceptance_checks=["queues-fair"])
    assert res.rc == 0, res
    result = res.task_results("Run the hand-over checks")[0]["results"][0]
    assert result["status"] == "SKIP" and "fewer than two teams have a queue: block in tenants_list (team-a)" in \
        result["summary"], result


def test_borrowing_the_resource_quota_makes_unusable_is_refused_before_any_write(site, tmp_path):
    sim, _inv = site
    bad = site_vars()
    bad["tenants_list"][1]["queue"]["flavors"][0]["resources"]["nvidia.com/gpu"]["borrowing_limit"] = 6
    res = run(sim, inventory(tmp_path, bad, GPU_HOSTS), "queues.yml")
    assert res.rc != 0
    assert any("tenants_list[1].queue.flavors[0].resources[nvidia.com/gpu].borrowing_limit: nominal 4 + "
               "borrowing_limit 6 = 10 is above the team's ResourceQuota requests.nvidia.com/gpu: 8" in m and
               "lower borrowing_limit to 4, or raise tenants_list[1].quota['requests.nvidia.com/gpu'] to 10" in m
               for m in res.failure_messages()), res.failure_messages()
    assert res.changed() == 0
    row = kget(sim, "clusterqueue", "team-b")["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert row["borrowingLimit"] == 4


def test_kueue_that_blocks_undeclared_resources_is_named_with_the_fix(site, tmp_path):
    """The Configuration the chart ships (BlockUndeclared): no probe Workload fits a GPU-only ClusterQueue; the
    check says why and how to fix it as soon as Kueue says so. Runs last: it changes the site's Kueue."""
    sim, _inv = site
    with tarfile.open(KUEUE_CHART) as chart:
        shipped = yaml.safe_load(chart.extractfile("kueue/values.yaml"))["managerConfig"]["controllerManagerConfigYaml"]
    inv = inventory(tmp_path, site_vars(queues_values={"managerConfig": {"controllerManagerConfigYaml": shipped}}),
                    GPU_HOSTS)
    res = run(sim, inv, "queues.yml")
    assert res.rc == 0, res
    assert "resources" not in manager_configuration(sim)
    res = run(sim, inv, "verify.yml", acceptance_report_dir=str(tmp_path / "report"), acceptance_checks=["queues-fair"])
    assert res.rc != 0
    result = res.task_results("Run the hand-over checks")[0]["results"][0]
    assert result["status"] == "FAIL", result
    assert result["summary"].startswith("Kueue admits none of the probe's Workloads"), result
    assert "set resources.quotaCheckStrategy: IgnoreUndeclared" in result["summary"]
    assert "Workload QuotaReserved=False: couldn't assign flavors to pod set main: resource cpu unavailable in " \
           "ClusterQueue" in result["evidence"], result["evidence"]
    for ns in ("team-a", "team-b"):
        assert not (kget(sim, "jobs", "-n", ns) or {}).get("items")
