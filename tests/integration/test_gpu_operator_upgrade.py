"""Upgrade with a way back, and the manual rollback playbook, on the simulated cluster.

The cluster pulls only from the public registries and mirror.example:5000, so
an upgrade pointing at an unreachable mirror never gets ready: the upgrade
playbook must roll back to the recorded revision.
"""
import json
import os
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from test_gpu_operator import (BIN, NS, REPO, SHARED, base_vars, cluster_policy, gpu_node,  # noqa: E402
                               package_chart, plan_for, play, start_cluster)

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
UPGRADE = os.path.join(REPO, "playbooks", "gpu_operator_upgrade.yml")
ROLLBACK = os.path.join(REPO, "playbooks", "gpu_operator_rollback.yml")
CRDS = os.path.join(SHARED, "upstream", "gpu-operator", "crds")
NODES = [gpu_node("gpu-a", "550.54.15"), {"name": "cpu-1"}]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "upgrade", NODES,
                        registries=["nvcr.io", "registry.k8s.io", "mirror.example:5000"])
    try:
        charts = dict((v, package_chart(tmp_path_factory, v)) for v in ("26.7.0", "26.8.0", "26.9.0"))
        plan = plan_for(NODES)
        res = play(sim, base_vars(sim, charts["26.7.0"], plan))
        assert res.rc == 0, res
        yield sim, charts, plan
    finally:
        sim.stop()


def history(sim, helm="helm3"):
    out = sim.run(os.path.join(BIN, helm), "history", "gpu-operator", "-n", NS, "-o", "json").stdout
    return json.loads(out)


def test_upgrade_applies_crds_records_and_waits(cluster, tmp_path):
    sim, charts, plan = cluster
    record = tmp_path / "record.yml"
    extra = base_vars(sim, charts["26.8.0"], plan, gpu_operator_upgrade_crds="apply",
                      gpu_operator_upgrade_crds_dir=CRDS, gpu_operator_upgrade_record_file=str(record))
    res = play(sim, extra, playbook=UPGRADE)
    assert res.rc == 0, res
    rec = yaml.safe_load(record.read_text())
    assert rec["revision"] == 1 and rec["chart"] == "gpu-operator-26.7.0"
    assert rec["values"]["driver"]["enabled"] is False
    last = history(sim)[-1]
    assert (last["revision"], last["chart"], last["status"]) == (2, "gpu-operator-26.8.0", "deployed")
    # CRD upgrade through our apply, so the chart's hook is off for this release
    values = json.loads(sim.run(os.path.join(BIN, "helm3"), "get", "values", "gpu-operator", "-n", NS,
                                "-o", "json").stdout)
    assert values["operator"]["upgradeCRD"] is False
    assert cluster_policy(sim)["status"]["state"] == "ready"


def test_failed_upgrade_rolls_back_to_the_recorded_revision(cluster):
    sim, charts, plan = cluster
    before = history(sim)[-1]
    extra = base_vars(sim, charts["26.9.0"], plan, helm="helm4", gpu_operator_upgrade_crds="skip",
                      gpu_operator_image_mirror="unreachable.example:5000/nvidia", gpu_operator_wait_timeout=8)
    res = play(sim, extra, playbook=UPGRADE)
    assert res.rc != 0
    msgs = "\n".join(res.failure_messages())
    assert "Upgrade to v26.9.0 failed" in msgs and "Rolled back to revision %d" % before["revision"] in msgs, msgs
    assert "ready=True" in msgs, msgs
    hist = history(sim, "helm4")
    assert [h["chart"] for h in hist[-2:]] == ["gpu-operator-26.9.0", "gpu-operator-" + before["chart"][len("gpu-operator-"):]]
    assert hist[-1]["status"] == "deployed"
    assert cluster_policy(sim)["status"]["state"] == "ready"


def test_manual_rollback_playbook(cluster):
    sim, charts, plan = cluster
    res = play(sim, {"gpu_operator_rollback_revision": 1, "gpu_operator_kubeconfig": sim.kubeconfig,
                     "gpu_operator_helm_binary": os.path.join(BIN, "helm3"), "gpu_operator_wait_timeout": 30, "gpu_operator_wait_stable_for": 2},
               playbook=ROLLBACK)
    assert res.rc == 0, res
    last = history(sim)[-1]
    assert last["chart"] == "gpu-operator-26.7.0" and last["status"] == "deployed"
    waited = res.task_results("Wait until the ClusterPolicy is ready and reconciled")[0]
    assert waited["ready"] is True


def test_upgrade_of_a_missing_release_is_refused(cluster):
    sim, charts, plan = cluster
    res = play(sim, base_vars(sim, charts["26.8.0"], plan, gpu_operator_namespace="nothing-here"), playbook=UPGRADE)
    assert res.rc != 0
    assert any("install with playbooks/gpu_operator.yml first" in m for m in res.failure_messages()), res
