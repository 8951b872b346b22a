"""The GPU Operator playbooks driven by an inventory directory, as operators run them.

Settings live in group_vars/host_vars shaped like inventories/example/ (tests/integration/
inventory.py); `-e` carries only what a person types (the target version). The real charts
v26.3.3 and v26.7.0 from ../shared, a mixed fleet whose driver plan comes from the read-only
detection of the GPU hosts (real nvidia-smi captures), operator namespace nvidia-gpu-operator.
Regression tests of issue 9 (play vars overriding the inventory, upgrade without host facts,
inventory plan replaced) and issue 11 defects 3 and 4 (bad input -> rollback; rollback flips).
"""
import json
import os

import pytest

from kit.gpu_operator import BIN, REPO, gpu_node, kget, plan_for, real_chart, start_cluster
from kit.inventory import write_inventory
from kit.paths import GPU_OPERATOR_CHARTS as CHARTS
from kit.playbook import run_playbook

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
NS = "nvidia-gpu-operator"
INSTALL = os.path.join(REPO, "playbooks", "gpu_operator.yml")
UPGRADE = os.path.join(REPO, "playbooks", "gpu_operator_upgrade.yml")
ROLLBACK = os.path.join(REPO, "playbooks", "gpu_operator_rollback.yml")
POOLS = {"pool_h100_training": {"gpu-h100-1": True}, "pool_l40s_inference": {"gpu-l40s-1": False}}
NODES = [gpu_node("gpu-h100-1", "550.54.15"),
         {"name": "gpu-l40s-1", "host_driver": None,
          "gpus": {"model": "NVIDIA-L40S", "count": 4, "memory_mib": 46068, "mig_capable": False}},
         {"name": "cpu-1"}]
CRDS = "customresourcedefinitions.apiextensions.k8s.io"


def site_vars(sim, **extra):
    values = {
        "gpu_operator_kubeconfig": sim.kubeconfig,
        "gpu_operator_helm_binary": os.path.join(BIN, "helm3"),
        "gpu_operator_namespace": NS,
        "gpu_operator_chart_source": "archive",
        # the site keeps the released archives in one directory, named by version
        "gpu_operator_chart_ref": CHARTS + "/gpu-operator-{{ gpu_operator_chart_version }}.tgz",
        "gpu_operator_chart_version": "v26.3.3",
        "gpu_operator_wait_timeout": 60,
        "gpu_operator_wait_stable_for": 2,
    }
    values.update(extra)
    return values


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    real_chart("v26.3.3")
    real_chart("v26.7.0")
    # no CRDs up front: the v26.3.3 install creates its own, the upgrade must bring v26.7.0's
    sim = start_cluster(tmp_path_factory, "inventory", NODES, crds=[])
    base = tmp_path_factory.mktemp("site")
    try:
        yield sim, write_inventory(base, POOLS, site_vars(sim)), base
    finally:
        sim.stop()


def play(sim, playbook, inventory, extra=None, **kw):
    return run_playbook(playbook, sim.env, inventory=inventory, extra_vars=extra, **kw)


def history(sim):
    res = sim.run(os.path.join(BIN, "helm3"), "history", "gpu-operator", "-n", NS, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else []


def summary(hist):
    return [(h["revision"], h["chart"], h["status"], h["description"]) for h in hist]


def waited(res, name="Wait until the ClusterPolicy is ready and reconciled"):
    found = res.task_results(name)
    return found[-1] if found else None


def test_install_reads_the_inventory(site):
    sim, inv, _ = site
    res = play(sim, INSTALL, inv)
    assert res.rc == 0, res
    w = waited(res)
    assert (w["ready"], w["state"], w["reason"]) == (True, "ready", "Reconciled"), w
    assert [(h[1], h[2]) for h in summary(history(sim))] == [("gpu-operator-v26.3.3", "deployed")]
    # the plan came from the hosts' facts: a mixed fleet (FACTS.md)
    cp = kget(sim, "clusterpolicy", "cluster-policy")
    assert cp["spec"]["driver"]["enabled"] is True
    assert kget(sim, "node", "gpu-h100-1")["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] == "false"
    again = play(sim, INSTALL, inv)
    assert again.rc == 0 and again.changed() == 0, again


@pytest.mark.parametrize("check", [True, False], ids=["check", "run"])
def test_upgrade_refuses_a_bad_version_before_any_write(site, check):
    """Issue 11 defect 3: validation first, outside the block; no rollback for a bad input."""
    sim, inv, _ = site
    before = summary(history(sim))
    cp_rv = kget(sim, "clusterpolicy", "cluster-policy")["metadata"]["resourceVersion"]
    res = play(sim, UPGRADE, inv, {"gpu_operator_chart_version": "latest"}, check=check)
    assert res.rc != 0
    msgs = "\n".join(res.failure_messages())
    assert "must pin a released chart version" in msgs, msgs
    assert "Rolled back" not in msgs and "rolled back" not in msgs.replace("nothing was rolled back", ""), msgs
    assert res.task_results("Roll back the release") == []
    assert summary(history(sim)) == before
    assert kget(sim, "clusterpolicy", "cluster-policy")["metadata"]["resourceVersion"] == cp_rv


def test_upgrade_reads_the_inventory_and_brings_the_crds(site):
    """Issue 9: namespace from the inventory, plan from the hosts' facts, new CRDs applied."""
    sim, inv, _ = site
    assert kget(sim, "crd", "gpuclusters.nvidia.com") is None      # v26.3.3 has no GPUCluster
    check = play(sim, UPGRADE, inv, {"gpu_operator_chart_version": "v26.7.0"}, check=True, diff=True)
    assert check.rc == 0, check
    assert check.changed() >= 1 and len(history(sim)) == 1, check
    assert kget(sim, "crd", "gpuclusters.nvidia.com") is None      # check mode wrote nothing
    res = play(sim, UPGRADE, inv, {"gpu_operator_chart_version": "v26.7.0"})
    assert res.rc == 0, res
    assert res.task_results("Roll back the release") == []
    assert [(h[0], h[1], h[2]) for h in summary(history(sim))] == [
        (1, "gpu-operator-v26.3.3", "superseded"), (2, "gpu-operator-v26.7.0", "deployed")]
    w = waited(res)
    assert (w["ready"], w["reason"]) == (True, "Reconciled"), w
    # every CRD of the v26.7.0 chart, including those its hook Job would not apply
    for name in ("gpuclusters.nvidia.com", "computedomains.resource.nvidia.com",
                 "computedomaincliques.resource.nvidia.com", "nodefeaturerules.nfd.k8s-sigs.io"):
        assert kget(sim, "crd", name) is not None, name
    cp = kget(sim, "clusterpolicy", "cluster-policy")
    assert cp["spec"]["dcgmExporter"]["serviceMonitor"]["scrapeTimeout"] == "10s"   # a v26.7.0 field
    assert cp["spec"]["driver"]["enabled"] is True                     # mixed plan from the facts
    values = json.loads(sim.run(os.path.join(BIN, "helm3"), "get", "values", "gpu-operator", "-n", NS,
                                "-o", "json").stdout)
    assert values["operator"]["upgradeCRD"] is False                   # CRDs by our apply, hook off
    record = kget(sim, "configmap", "gpu-operator-upgrade-record", "-n", NS)["data"]
    assert record["from_revision"] == "1" and record["from_chart"] == "gpu-operator-v26.3.3"
    again = play(sim, UPGRADE, inv, {"gpu_operator_chart_version": "v26.7.0"})
    assert again.rc == 0 and again.changed() == 0, (again.changed_tasks(), again)
    assert len(history(sim)) == 2
    # the install playbook at the upgraded version renders the same values (operator.upgradeCRD too)
    # and compares the real chart's v-prefixed version: Helm is not even called
    same = play(sim, INSTALL, inv, {"gpu_operator_chart_version": "v26.7.0"})
    assert same.rc == 0 and same.changed() == 0, (same.changed_tasks(), same)
    assert all(r.get("skipped") for r in same.task_results("Install or upgrade the GPU Operator chart")), same
    assert len(history(sim)) == 2


def test_rollback_check_mode_reports_the_change_and_writes_nothing(site):
    sim, inv, _ = site
    before = summary(history(sim))
    res = play(sim, ROLLBACK, inv, check=True)
    assert res.rc == 0, res
    assert res.changed() >= 1, res
    said = res.task_results("Report the rollback check mode would do")[0]["msg"]
    assert "revision 2 (gpu-operator-v26.7.0) -> revision 1 (gpu-operator-v26.3.3)" in " ".join(said.split()), said
    assert summary(history(sim)) == before


def test_rollback_to_the_recorded_revision_and_again(site):
    """Issue 11 defect 4: the recorded revision, not `0`; a second run changes nothing."""
    sim, inv, _ = site
    res = play(sim, ROLLBACK, inv)
    assert res.rc == 0, res
    hist = summary(history(sim))
    assert hist[-1][1:] == ("gpu-operator-v26.3.3", "deployed", "Rollback to 1"), hist
    w = waited(res)
    assert w["ready"] is True and w["reason"] == "Reconciled", w
    again = play(sim, ROLLBACK, inv)
    assert again.rc == 0, again
    assert again.changed() == 0, again
    assert summary(history(sim)) == hist
    check = play(sim, ROLLBACK, inv, check=True)
    assert check.rc == 0 and check.changed() == 0, check


def test_rollback_to_revision_zero_is_refused(site):
    sim, inv, _ = site
    res = play(sim, ROLLBACK, inv, {"gpu_operator_rollback_revision": 0})
    assert res.rc != 0
    assert any("0 (\"previous\") is refused" in m for m in res.failure_messages()), res


def test_a_version_change_in_the_inventory_brings_the_crds(site, tmp_path):
    """The install playbook (site.yml too) at a new version takes the upgrade's CRD path."""
    sim, _, _ = site
    assert history(sim)[-1]["chart"] == "gpu-operator-v26.3.3"
    sim.run(os.path.join(BIN, "kubectl"), "delete", "crd", "gpuclusters.nvidia.com")
    inv = write_inventory(tmp_path, POOLS, site_vars(sim, gpu_operator_chart_version="v26.7.0"))
    res = play(sim, INSTALL, inv)
    assert res.rc == 0, res.failure_messages()
    assert kget(sim, "crd", "gpuclusters.nvidia.com") is not None
    assert (history(sim)[-1]["chart"], history(sim)[-1]["status"]) == ("gpu-operator-v26.7.0", "deployed")
    again = play(sim, INSTALL, inv)
    assert again.rc == 0 and again.changed() == 0, (again.changed_tasks(), again)


def test_a_driver_plan_set_in_the_inventory_wins(site, tmp_path):
    """Issue 9: an inventory gpu_operator_driver_plan is used as is (no host facts needed)."""
    sim, _, _ = site
    # a plan the hosts' facts would never give (they say: mixed fleet, driver.enabled=true)
    plan = plan_for([gpu_node("gpu-h100-1", "550.54.15"), gpu_node("gpu-l40s-1", "550.54.15")])
    assert plan["driver_enabled"] is False
    inv = write_inventory(tmp_path, POOLS, site_vars(sim, gpu_operator_driver_plan=plan, gpu_operator_wait=False,
                                                           gpu_operator_chart_version="v26.7.0"),
                          with_roots=False)
    res = play(sim, INSTALL, inv)
    assert res.rc == 0, res
    assert kget(sim, "clusterpolicy", "cluster-policy")["spec"]["driver"]["enabled"] is False
