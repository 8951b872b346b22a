"""Teams, claims and the hand-over checks in DRA mode on the simulated cluster (tests/clusters/dra.yaml:
Kubernetes 1.34, the GPUCluster stack and NVIDIA's DRA driver twin publishing ResourceSlices).

From an inventory with allocation_api dra: gpu_operator.yml installs the GPUCluster stack, tenants.yml gives
each team its ResourceClaimTemplates and a quota on claims (re-run changed=0), verify.yml passes
gpus-visible, cuda-test, wrong-node-excluded and quota-enforced with slices and claims. A pod with a claim
for a MIG profile runs on the node whose slices have it and stays Pending on a node without it; a claim over
the team's quota is refused with the API server's message; a quota on nvidia.com/gpu is refused in DRA mode.
"""

import json
import os
import shutil
import time

import pytest
import yaml

from kit.gpu_operator import base_vars, package_chart, play as operator_play
from kit.paths import BIN, CLUSTERS, REPO
from kit.playbook import run_playbook
from kit.queues import inventory
from simcluster import testing as simtesting

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
DRA_CLUSTER = os.path.join(CLUSTERS, "dra.yaml")
GPU_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_KEY = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"
TEAMS = [
    {"name": "team-a", "quota": {GPU_KEY: 4, "count/resourceclaims.resource.k8s.io": 8},
     "claim_templates": [{"name": "gpu", "gpus": 1}, {"name": "h100x2", "gpus": 2, "product": "NVIDIA H100 80GB HBM3"}]},
    {"name": "team-b", "quota": {GPU_KEY: 0, MIG_KEY: 2},
     "claim_templates": [{"name": "mig-1g.10gb", "mig_profile": "1g.10gb"}]},
]


def _plan(nodes):
    from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import driver_plan
    hosts = {}
    for n in nodes:
        hosts[n["name"]] = {"gpu_node": {
            "gpu_host": True, "gpu_count": int(n["gpus"]["count"]),
            "driver": {"state": "host", "version": n["host_driver"]}, "toolkit": {"state": "none"},
            "container_runtime": {"nvidia_runtime": False, "nvidia_default": False},
            "nouveau_loaded": False, "kernel": {"headers_installed": True, "release": "6.8.0-45-generic"}}}
    return json.loads(json.dumps(driver_plan(hosts)))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The simulated cluster with the GPUCluster stack installed through the gpu_operator role."""
    if not os.path.exists(DRA_CLUSTER):
        pytest.skip("tests/clusters/dra.yaml is not there (the simulator's DRA support)")
    with open(DRA_CLUSTER) as fh:
        nodes = [n for n in (yaml.safe_load(fh) or {}).get("nodes") or [] if n.get("gpus")]
    work = tmp_path_factory.mktemp("sim-dra-teams")
    path = str(work / "cluster.yaml")
    shutil.copy(DRA_CLUSTER, path)
    sim = simtesting.start(path, str(work / "run"))
    try:
        settings = base_vars(sim, package_chart(tmp_path_factory), _plan(nodes), gpu_operator_allocation_api="dra",
                             gpu_operator_dra_experimental=True, gpu_operator_wait_timeout=120)
        res = operator_play(sim, settings)
        assert res.rc == 0, "\n".join(res.failure_messages())
        yield sim, nodes, tmp_path_factory
    finally:
        sim.stop()


def kubectl(sim, *args, check=True):
    return sim.run(os.path.join(BIN, "kubectl"), *args, check=check)


def kget(sim, *args):
    res = kubectl(sim, "get", *args, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def run(sim, factory, playbook, teams, gpu_hosts=None, **extra):
    group_vars = {"tenants_allocation_api": "dra", "tenants_list": teams}
    group_vars.update(extra)
    inv = inventory(factory.mktemp("inv"), group_vars, gpu_hosts)
    return run_playbook(os.path.join(REPO, "playbooks", playbook), sim.env, inventory=inv, limit="localhost")


def test_tenants_render_claim_templates_and_quota_then_rerun_unchanged(site):
    sim, nodes, factory = site
    first = run(sim, factory, "tenants.yml", TEAMS)
    assert first.rc == 0, "\n".join(first.failure_messages())
    rct = kget(sim, "resourceclaimtemplate", "mig-1g.10gb", "-n", "team-b")
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]
    quota = kget(sim, "resourcequota", "tenant-quota", "-n", "team-a")
    assert quota["spec"]["hard"][GPU_KEY] == "4"
    again = run(sim, factory, "tenants.yml", TEAMS)
    assert again.rc == 0 and again.changed() == 0, again.changed_tasks()


def test_quota_on_nvidia_com_gpu_is_refused_in_dra_mode(site):
    sim, nodes, factory = site
    res = run(sim, factory, "tenants.yml", [{"name": "team-x", "quota": {"requests.nvidia.com/gpu": 2}}])
    assert res.rc != 0
    text = "\n".join(res.failure_messages())
    assert "in DRA mode (tenants_allocation_api: dra) no device plugin runs" in text, text
    assert kget(sim, "namespace", "team-x") is None


def _pod(name, ns, template, node=None):
    spec = {"restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                            "resources": {"claims": [{"name": "gpu"}]},
                            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                                "runAsUser": 1000, "capabilities": {"drop": ["ALL"]},
                                                "seccompProfile": {"type": "RuntimeDefault"}}}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _wait(sim, ns, name, predicate, timeout=60):
    deadline = time.time() + timeout
    pod = None
    while time.time() < deadline:
        pod = kget(sim, "pod", name, "-n", ns)
        if pod and predicate(pod):
            return pod
        time.sleep(0.5)
    return pod


def test_mig_claim_runs_where_the_slices_have_it_and_waits_elsewhere(site):
    sim, nodes, factory = site
    assert run(sim, factory, "tenants.yml", TEAMS).rc == 0
    for pod in (_pod("mig-anywhere", "team-b", "mig-1g.10gb"), _pod("mig-wrong", "team-b", "mig-1g.10gb",
                                                                      node="gpu-h100-1")):
        kubectl(sim, "apply", "-f", "-", input=json.dumps(pod))
    ran = _wait(sim, "team-b", "mig-anywhere", lambda p: p["status"].get("phase") in ("Running", "Succeeded"))
    assert ran["spec"]["nodeName"] == "gpu-h100-mig-1", ran["status"]
    waiting = _wait(sim, "team-b", "mig-wrong",
                    lambda p: any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                                  for c in p["status"].get("conditions") or []))
    cond = [c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled"][0]
    assert cond["reason"] == "Unschedulable" and not waiting["spec"].get("nodeName"), cond
    kubectl(sim, "delete", "pod", "-n", "team-b", "mig-anywhere", "mig-wrong", "--wait=false")


def test_claim_over_the_team_quota_is_refused_with_the_real_message(site):
    sim, nodes, factory = site
    assert run(sim, factory, "tenants.yml", TEAMS).rc == 0
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "too-many", "namespace": "team-a"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 5}}]}}}
    res = kubectl(sim, "create", "-f", "-", input=json.dumps(claim), check=False)
    assert res.returncode != 0
    assert 'resourceclaims.resource.k8s.io "too-many" is forbidden: exceeded quota: tenant-quota' in res.stderr, \
        res.stderr
    assert "requested: %s=5" % GPU_KEY in res.stderr


def test_verify_passes_the_gpu_checks_with_slices_and_claims(site):
    sim, nodes, factory = site
    assert run(sim, factory, "tenants.yml", TEAMS).rc == 0
    hosts = dict((n["name"], {"gpu_node": {"gpu_count": int(n["gpus"]["count"])}}) for n in nodes)
    checks = ["gpus-visible", "cuda-test", "wrong-node-excluded", "quota-enforced"]
    res = run(sim, factory, "verify.yml", TEAMS, gpu_hosts=hosts, acceptance_checks=checks,
              acceptance_report_dir=str(factory.mktemp("report")), acceptance_pod_timeout=90)
    results = res.task_results("Run the hand-over checks")[0]["results"]
    by_id = dict((r["id"], r) for r in results)
    for check in checks:
        assert by_id[check]["status"] == "PASS", by_id[check]
    assert res.rc == 0
    assert "1g.10gb" in by_id["wrong-node-excluded"]["summary"]
