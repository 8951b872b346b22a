"""Upgrade v26.3.3 -> v26.7.0 of the REAL chart, the CRD modes, the way back, air-gapped.

v26.7.0 adds CRDs (GPUCluster, ComputeDomain*) and ClusterPolicy fields
(spec.dcgmExporter.serviceMonitor.scrapeTimeout). Helm never upgrades crds/:
  - apply (default): the playbook applies the new chart's crds/ server-side first
    (tests/integration/test_gpu_operator_inventory.py covers it with helm 3);
  - hook: the chart's pre-upgrade Job runs the NEW operator image's manage-crds (the
    simulator applies the CRDs that image carries); it leaves out resource.nvidia.com;
  - skip: helm 4 (server-side apply, strict field validation) fails `unknown field`,
    helm 3 drops the new field silently.
Each scenario gets its own cluster (no CRDs up front: the v26.3.3 install creates its own).
"""
import json
import os

import pytest

from kit.gpu_operator import (BIN, MIRROR, NS, PUBLIC, REPO, base_vars, cluster_policy, gpu_node, kget, plan_for,
                              play, real_chart, start_cluster)
from kit.inventory import write_inventory
from kit.playbook import run_playbook

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
UPGRADE = os.path.join(REPO, "playbooks", "gpu_operator_upgrade.yml")
ROLLBACK = os.path.join(REPO, "playbooks", "gpu_operator_rollback.yml")
NODES = [gpu_node("gpu-a", "550.54.15"), gpu_node("gpu-b"), {"name": "cpu-1"}]   # mixed fleet


def installed(tmp_path_factory, name, helm, **cluster):
    extra = cluster.pop("vars", {})
    sim = start_cluster(tmp_path_factory, name, NODES, crds=[], **cluster)
    plan = plan_for(NODES)
    res = play(sim, base_vars(sim, real_chart("v26.3.3"), plan, helm=helm, **extra))
    if res.rc != 0:
        sim.stop()
        raise AssertionError(res)
    return sim, plan


def history(sim, helm="helm3"):
    out = sim.run(os.path.join(BIN, helm), "history", "gpu-operator", "-n", NS, "-o", "json").stdout
    return json.loads(out)


def service_monitor(sim):
    return cluster_policy(sim)["spec"]["dcgmExporter"]["serviceMonitor"]


# Both majors: the upgrade and the rollback are where helm 3 (three-way merge, client-side) and
# helm 4 (server-side apply, strict field validation) really behave differently, with the chart's
# pre-upgrade hook Job bringing the new CRDs in between.
@pytest.mark.parametrize("helm", ["helm3", "helm4"])
def test_upgrade_with_the_chart_hook_and_roll_back(tmp_path_factory, tmp_path, helm):
    sim, plan = installed(tmp_path_factory, "hook-" + helm, helm)
    try:
        record = tmp_path / "record.yml"
        extra = base_vars(sim, real_chart("v26.7.0"), plan, helm=helm, gpu_operator_upgrade_crds="hook",
                          gpu_operator_upgrade_record_file=str(record))
        res = play(sim, extra, playbook=UPGRADE)
        assert res.rc == 0, res
        assert "revision: 1" in record.read_text() and "gpu-operator-v26.3.3" in record.read_text()
        last = history(sim, helm)[-1]
        assert (last["revision"], last["chart"], last["status"]) == (2, "gpu-operator-v26.7.0", "deployed")
        # the hook Job (new operator image, manage-crds) brought the CRDs it carries ...
        assert kget(sim, "crd", "gpuclusters.nvidia.com") is not None
        assert service_monitor(sim)["scrapeTimeout"] == "10s"
        # ... but not the resource.nvidia.com CRDs of crds/ (not in its --filepath list):
        # the consequence of hook mode, documented in docs/gpu-operator.md
        assert kget(sim, "crd", "computedomains.resource.nvidia.com") is None
        assert cluster_policy(sim)["status"]["state"] == "ready"

        back = play(sim, {"gpu_operator_kubeconfig": sim.kubeconfig, "gpu_operator_helm_binary": os.path.join(BIN, helm),
                          "gpu_operator_wait_timeout": 60, "gpu_operator_wait_stable_for": 2}, playbook=ROLLBACK)
        assert back.rc == 0, back
        last = history(sim, helm)[-1]
        assert (last["chart"], last["status"], last["description"]) == (
            "gpu-operator-v26.3.3", "deployed", "Rollback to 1")
        assert back.task_results("Wait until the ClusterPolicy is ready and reconciled")[-1]["ready"] is True
        # issue 11 defect 4: a second run must not flip back to v26.7.0
        again = play(sim, {"gpu_operator_kubeconfig": sim.kubeconfig, "gpu_operator_helm_binary": os.path.join(BIN, helm),
                           "gpu_operator_wait_timeout": 60, "gpu_operator_wait_stable_for": 2}, playbook=ROLLBACK)
        assert again.rc == 0 and again.changed() == 0, (again.changed_tasks(), again)
        assert history(sim, helm)[-1]["revision"] == last["revision"]
    finally:
        sim.stop()


def test_skip_crds_helm4_fails_unknown_field_and_rolls_back(tmp_path_factory):
    """Old CRDs + helm 4 (server-side apply, strict): the upgrade fails on the new field."""
    sim, plan = installed(tmp_path_factory, "skip-helm4", "helm4")
    try:
        extra = base_vars(sim, real_chart("v26.7.0"), plan, helm="helm4", gpu_operator_upgrade_crds="skip")
        res = play(sim, extra, playbook=UPGRADE)
        assert res.rc != 0
        msgs = "\n".join(res.failure_messages())
        assert "Upgrade to v26.7.0 failed" in msgs and "scrapeTimeout" in msgs, msgs
        hist = history(sim, "helm4")
        assert hist[-1]["chart"] == "gpu-operator-v26.3.3" and hist[-1]["status"] == "deployed", hist
        if len(hist) > 1:     # helm recorded the failed revision: the rescue rolled back to 1
            assert hist[-1]["description"] == "Rollback to 1" and "Rolled back to revision 1" in msgs, msgs
        else:
            assert "nothing to roll back" in msgs, msgs
        assert kget(sim, "crd", "gpuclusters.nvidia.com") is None
    finally:
        sim.stop()


def test_skip_crds_helm3_drops_the_new_field_silently(tmp_path_factory):
    sim, plan = installed(tmp_path_factory, "skip-helm3", "helm3")
    try:
        extra = base_vars(sim, real_chart("v26.7.0"), plan, gpu_operator_upgrade_crds="skip")
        res = play(sim, extra, playbook=UPGRADE)
        assert res.rc == 0, res
        assert history(sim)[-1]["chart"] == "gpu-operator-v26.7.0"
        assert "scrapeTimeout" not in service_monitor(sim)     # pruned by the old CRD schema
        assert kget(sim, "crd", "gpuclusters.nvidia.com") is None
    finally:
        sim.stop()


def test_failed_upgrade_rolls_back_to_the_recorded_revision(tmp_path_factory):
    """An upgrade that never gets ready (images from a mirror the cluster cannot reach)."""
    sim, plan = installed(tmp_path_factory, "fail", "helm4",
                          registries=["nvcr.io", "registry.k8s.io", "mirror.example:5000"])
    try:
        extra = base_vars(sim, real_chart("v26.7.0"), plan, helm="helm4",
                          gpu_operator_image_mirror="unreachable.example:5000/nvidia", gpu_operator_wait_timeout=8)
        res = play(sim, extra, playbook=UPGRADE)
        assert res.rc != 0
        msgs = "\n".join(res.failure_messages())
        assert "Upgrade to v26.7.0 failed" in msgs and "Rolled back to revision 1" in msgs, msgs
        assert "ready=True" in msgs, msgs
        hist = history(sim, "helm4")
        assert [h["chart"] for h in hist] == ["gpu-operator-v26.3.3", "gpu-operator-v26.7.0", "gpu-operator-v26.3.3"]
        assert hist[-1]["status"] == "deployed" and hist[-1]["description"] == "Rollback to 1"
        assert cluster_policy(sim)["status"]["state"] == "ready"
    finally:
        sim.stop()


def test_airgapped_upgrade_pulls_only_from_the_mirror(tmp_path_factory):
    """Only the mirror is reachable: the hook Job, NFD, operator and every operand pull from it."""
    mirror = {"gpu_operator_image_mirror": MIRROR, "gpu_operator_image_pull_secrets": ["regcred"]}
    sim, plan = installed(tmp_path_factory, "airgap-upgrade", "helm4", registries=["mirror.example:5000"],
                          vars=mirror)
    try:
        extra = base_vars(sim, real_chart("v26.7.0"), plan, helm="helm4", gpu_operator_upgrade_crds="hook",
                          **mirror)
        res = play(sim, extra, playbook=UPGRADE)
        assert res.rc == 0, res      # the hook Job could only complete by pulling from the mirror
        assert kget(sim, "crd", "gpuclusters.nvidia.com") is not None
        manifest = sim.run(os.path.join(BIN, "helm4"), "get", "manifest", "gpu-operator", "-n", NS).stdout
        hooks = sim.run(os.path.join(BIN, "helm4"), "get", "hooks", "gpu-operator", "-n", NS).stdout
        for registry in PUBLIC:
            assert registry not in manifest and registry not in hooks, registry
        pods = kget(sim, "pods", "-n", NS)["items"]
        images = [c["image"] for p in pods for c in p["spec"].get("initContainers", []) + p["spec"]["containers"]]
        assert images and all(i.startswith(MIRROR + "/") for i in images), images
        events = kget(sim, "events", "-n", NS)["items"]
        assert not [e for e in events if e.get("reason") in ("Failed", "BackOff")], events
    finally:
        sim.stop()


def test_upgrade_runs_the_host_detection_first(tmp_path_factory, tmp_path):
    """Issue 9: the upgrade playbook detects the host drivers itself (it used to compute the plan
    from hostvars without facts: facts_missing, then a rescue `helm rollback` of nothing)."""
    sim, plan = installed(tmp_path_factory, "facts", "helm3")
    try:
        site = {"gpu_operator_kubeconfig": sim.kubeconfig, "gpu_operator_helm_binary": os.path.join(BIN, "helm3"),
                "gpu_operator_chart_source": "archive",
                "gpu_operator_chart_ref": real_chart("v26.7.0").replace("v26.7.0", "{{ gpu_operator_chart_version }}"),
                "gpu_operator_wait_timeout": 60, "gpu_operator_wait_stable_for": 2}
        inv = write_inventory(tmp_path, {"pool_h100": {"gpu-a": True}, "pool_l40s": {"gpu-b": False}}, site)
        # issue 11 defect 3: a bad input is refused before any write, nothing is rolled back
        bad = run_playbook(UPGRADE, sim.env, inventory=inv, extra_vars={"gpu_operator_chart_version": "latest"})
        assert bad.rc != 0 and len(history(sim)) == 1, bad
        assert any("must pin a released chart version" in m for m in bad.failure_messages()), bad
        res = run_playbook(UPGRADE, sim.env, inventory=inv, extra_vars={"gpu_operator_chart_version": "v26.7.0"})
        assert res.rc == 0, res
        assert res.task_results("Gather GPU node facts (read-only)", host="gpu-a")
        assert [(h["chart"], h["description"]) for h in history(sim)] == [
            ("gpu-operator-v26.3.3", "Install complete"), ("gpu-operator-v26.7.0", "Upgrade complete")]
        assert cluster_policy(sim)["spec"]["driver"]["enabled"] is plan["driver_enabled"] is True
    finally:
        sim.stop()
