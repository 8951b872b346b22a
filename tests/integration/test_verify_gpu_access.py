"""verify.yml's gpu-access-by-request on a node whose container toolkit is installed on the host.

The host's config.toml (cluster file host_toolkit_config) as node_prereqs_gpu_access_by_request leaves
it: the CUDA sample with NVIDIA_VISIBLE_DEVICES=all and no request finds no GPU, and the team's
GPU access policy (as tenants renders it) refuses the same pod in team-a with the reason. With the
toolkit's defaults (the control off) the pod runs CUDA on the node's GPUs and the check fails naming
the cause and the fix.
"""
import os

import pytest

from kit.paths import REPO
from kit.playbook import run_playbook
from kit.kubectl import apply
from kit.queues import inventory, start_cluster

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
BY_REQUEST = {"accept-nvidia-visible-devices-envvar-when-unprivileged": False,
              "accept-nvidia-visible-devices-as-volume-mounts": True}


def node(config):
    out = {"name": "gpu-h100-1", "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 8, "memory_mib": 81559},
           "host_driver": "550.54.15", "host_toolkit": True, "cpu": "64", "memory": "512Gi"}
    if config:
        out["host_toolkit_config"] = config
    return out


def verify(tmp_path_factory, name, config, policy=True):
    sim = start_cluster(tmp_path_factory, name, nodes=[node(config), {"name": "cpu-1", "cpu": "16", "memory": "64Gi"}])
    try:
        if policy:
            for obj in tenants.render_team({"name": "team-a"}, tenants.default_settings()):
                if obj["metadata"]["name"].startswith("skaffon-gpu-access-"):
                    apply(sim, obj)
        inv = inventory(tmp_path_factory.mktemp("inv-" + name),
                        {"tenants_list": [{"name": "team-a"}], "acceptance_pod_timeout": 60},
                        {"gpu-h100-1": {}})
        res = run_playbook(os.path.join(REPO, "playbooks", "verify.yml"), sim.env, inventory=inv, limit="localhost",
                           extra_vars={"acceptance_checks": ["gpu-access-by-request"],
                                       "acceptance_report_dir": str(tmp_path_factory.mktemp("report-" + name))})
        return res, res.task_results("Run the hand-over checks")[0]["results"][0]
    finally:
        sim.stop()


def test_passes_with_the_host_config_and_the_team_policy(tmp_path_factory):
    res, result = verify(tmp_path_factory, "gpu-access-on", BY_REQUEST)
    assert result["status"] == "PASS", result
    assert res.rc == 0, res
    assert "in team-a such a pod is refused with the reason" in result["summary"]
    assert any("no CUDA-capable device" in e for e in result["evidence"]), result
    assert any("container acceptance-gpu-envvar sets NVIDIA_VISIBLE_DEVICES" in e for e in result["evidence"]), result


def test_fails_with_the_cause_when_the_toolkit_keeps_its_defaults(tmp_path_factory):
    res, result = verify(tmp_path_factory, "gpu-access-off", None)
    assert result["status"] == "FAIL", result
    assert res.rc != 0
    assert "a pod that requests no GPU ran CUDA on gpu-h100-1: NVIDIA_VISIBLE_DEVICES=all granted" in result["summary"]
    assert "node_prereqs_gpu_access_by_request: true" in result["summary"]
