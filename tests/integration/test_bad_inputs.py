"""The bad-input catalogue of issue 11: each input an operator may put in an inventory copied
from inventories/example/, run against the simulated cluster where the GPU Operator (real
chart) already runs with time-slicing on the L40S pool.

For every case the test records whether it was refused before any write (the simulator's
request counters, /_sim/stats) and the message; the table is written to
build/reports/bad-inputs.md. Cases marked accepted must run through (they were refused
wrongly before).
"""
import json
import os

import pytest

from kit.paths import BIN, REPO, gpu_operator_chart
from kit.playbook import run_playbook
from kit.pool_inventory import cluster_file, write_inventory, writes

PLAYBOOKS = dict((name, os.path.join(REPO, "playbooks", name + ".yml"))
                 for name in ("gpu_operator", "node_prereqs", "mig"))
OLD_CHART = gpu_operator_chart("v26.3.3")
TIME_SLICING = {"configs": {"l40s": {"replicas": 4}}, "nodes": {"gpu-l40s-1": "l40s"}}
MPS = {"configs": {"mps": {"replicas": 4, "strategy": "mps"}}, "nodes": {"gpu-l40s-1": "mps"}}
REPORT = os.path.join(REPO, "build", "reports", "bad-inputs.md")
# in a case's -e: gpu_operator.yml plans from the GPU hosts' facts instead of the fixture's plan
PLAN_FROM_FACTS = "_plan_from_facts"

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]

# (id, playbook, {all|<pool>|<host>: vars} written to the inventory, -e, expected text);
# expected None = the input is fine and must be accepted.
CASES = [
    ("pull-secrets-as-objects", "gpu_operator",
     {"all": {"gpu_operator_values": {"operator": {"imagePullSecrets": [{"name": "regcred"}]}}}}, {},
     "gpu_operator_values.operator.imagePullSecrets must be a list of Secret NAMES (strings)"),
    ("driver-disabled-against-plan", "gpu_operator",
     {"all": {"gpu_operator_values": {"driver": {"enabled": False}}}}, {},
     "gpu_operator_values.driver.enabled=false, but the driver plan has the GPU Operator install the driver "
     "on gpu-l40s-1"),
    ("no-string-for-boolean", "gpu_operator",
     {"all": {"gpu_operator_values": {"toolkit": {"enabled": "no"}}}}, {},
     "gpu_operator_values.toolkit.enabled is the string 'no'"),
    ("values-as-string", "gpu_operator", {"all": {"gpu_operator_values": "driver.enabled=false"}}, {},
     "gpu_operator_values must be a mapping of chart values"),
    ("downgrade-without-flag", "gpu_operator",
     {"all": {"gpu_operator_chart_version": "v26.3.3", "gpu_operator_chart_ref": OLD_CHART}}, {},
     "gpu_operator_chart_version v26.3.3 is older than the deployed release gpu-operator (gpu-operator-v26.7.0)"),
    ("service-monitor-key-value-string", "gpu_operator", {}, {"gpu_operator_service_monitor": "false"}, None),
    ("namespace-not-dns1123", "gpu_operator", {"all": {"gpu_operator_namespace": "GPU-Operator"}}, {},
     "gpu_operator_namespace 'GPU-Operator' is not a namespace name"),
    ("configmap-not-dns1123", "gpu_operator",
     {"all": {"gpu_operator_time_slicing": dict(TIME_SLICING, configmap="Time_Slicing")}}, {},
     "gpu_operator_time_slicing.configmap 'Time_Slicing' is not a ConfigMap name"),
    ("psa-version", "gpu_operator", {"all": {"gpu_operator_psa_version": "v1.99x"}}, {},
     "gpu_operator_psa_version 'v1.99x' is not a Pod Security version"),
    ("release-name-with-space", "gpu_operator", {"all": {"gpu_operator_release_name": "gpu operator"}}, {},
     "gpu_operator_release_name 'gpu operator' is not a Helm release name"),
    ("repo-url-without-scheme", "gpu_operator",
     {"all": {"gpu_operator_chart_source": "repo", "gpu_operator_chart_ref": "gpu-operator",
              "gpu_operator_chart_repo_url": "helm.ngc.nvidia.com/nvidia"}}, {},
     "gpu_operator_chart_repo_url 'helm.ngc.nvidia.com/nvidia' must be an http(s):// (or file://) URL"),
    ("repo-url-with-password", "gpu_operator",
     {"all": {"gpu_operator_chart_source": "repo", "gpu_operator_chart_ref": "gpu-operator",
              "gpu_operator_chart_repo_url": "https://ops:hunter2@charts.example/nvidia"}}, {},
     "gpu_operator_chart_repo_url carries credentials"),
    ("helm-timeout-without-unit", "gpu_operator", {"all": {"gpu_operator_helm_timeout": "600"}}, {},
     "gpu_operator_helm_timeout '600' is not a duration with a unit"),
    ("operator-kubeconfig-missing", "gpu_operator", {"all": {"gpu_operator_kubeconfig": "/nonexistent/kubeconfig"}},
     {}, "gpu_operator_kubeconfig /nonexistent/kubeconfig does not exist on localhost"),
    ("time-slicing-unknown-node", "gpu_operator",
     {"all": {"gpu_operator_time_slicing": dict(TIME_SLICING, nodes={"gpu-l40s-9": "l40s"})}}, {},
     "gpu_operator_time_slicing.nodes names gpu-l40s-9 (did you mean gpu-l40s-1?), not a node of the cluster; "
     "known nodes: cpu-1, gpu-h100-1, gpu-h100-2, gpu-l40s-1"),
    ("label-prefix-without-slash", "node_prereqs", {"gpu_nodes": {"node_prereqs_label_prefix": "gpu.skaffon.io"}},
     {}, "node_prereqs_label_prefix must end with '/' (like gpu.skaffon.io/), got 'gpu.skaffon.io'"),
    ("label-prefix-with-space", "node_prereqs", {"gpu_nodes": {"node_prereqs_label_prefix": "gpu skaffon.io/"}},
     {}, "node_prereqs_label_prefix 'gpu skaffon.io/' is not a label key prefix"),
    ("taints-as-mapping", "node_prereqs",
     {"pool_h100_nvlink_training": {"node_prereqs_pool_taints": {"key": "workload", "value": "training",
                                                                 "effect": "NoSchedule"}}}, {},
     "node_prereqs_pool_taints"),
    ("mig-profile-number", "mig", {"pool_h100_nvlink_training": {"mig_profile": 7}}, {"mig_batch_size": 1},
     "mig_profile of gpu-h100-1 must be a mig-parted config name"),
    ("mig-batch-size-zero", "mig", {"pool_h100_nvlink_training": {"mig_profile": "all-1g.10gb"}},
     {"mig_batch_size": 0}, "mig_batch_size must be a whole number of nodes >= 1"),
    ("mig-kubeconfig-missing", "mig",
     {"all": {"mig_kubeconfig": "/nonexistent/kubeconfig"},
      "pool_h100_nvlink_training": {"mig_profile": "all-1g.10gb"}}, {"mig_batch_size": 1},
     "mig_kubeconfig /nonexistent/kubeconfig does not exist on localhost"),
    # the GPU hosts' facts read from a root that is no GPU server: every host reports no GPU
    ("gpu-hosts-without-gpu", "gpu_operator", {"gpu_nodes": {"gpu_node_facts_root": os.path.join(REPO, "docs")}},
     {PLAN_FROM_FACTS: True}, "none of the 3 host(s) of group gpu_nodes reports an NVIDIA GPU (gpu-h100-1, "
     "gpu-h100-2, gpu-l40s-1), so there is nothing to plan"),
    ("mig-pool-not-label-value", "mig",
     {"pool_h100_nvlink_training": {"mig_profile": "all-1g.10gb", "mig_pool": "H100 Training!"}},
     {"mig_batch_size": 1}, "mig_pool of gpu-h100-1 is 'H100 Training!', not a label value"),
    ("chart-archive-missing", "gpu_operator",
     {"all": {"gpu_operator_chart_ref": "/nonexistent/gpu-operator-v26.7.0.tgz"}}, {},
     "gpu_operator_chart_ref /nonexistent/gpu-operator-v26.7.0.tgz does not exist on localhost"),
    ("driver-plan-as-string", "gpu_operator", {}, {"gpu_operator_driver_plan": "auto"},
     "gpu_operator_driver_plan must be a mapping, the result of the skaffon.gpu_platform.driver_plan filter (e.g."),
    ("pool-as-string", "node_prereqs", {"pool_l40s_inference": {"node_prereqs_pool": "h100"}}, {},
     "(a string, not a mapping). Fix the inventory (group_vars of the pool or host_vars), e.g. "
     "node_prereqs_pool: {accelerator: h100"),
    ("context-not-in-kubeconfig", "gpu_operator", {"all": {"gpu_operator_context": "prod-cluster"}}, {},
     "gpu_operator_context 'prod-cluster' is not a context of the kubeconfig"),
    ("helm-binary-missing", "gpu_operator", {"all": {"gpu_operator_helm_binary": "/opt/helm/bin/helm"}}, {},
     "gpu_operator_helm_binary /opt/helm/bin/helm is not an executable on localhost"),
    ("prereqs-kubeconfig-missing", "node_prereqs", {"all": {"node_prereqs_kubeconfig": "/nonexistent/kubeconfig"}},
     {}, "node_prereqs_kubeconfig /nonexistent/kubeconfig does not exist on localhost"),
    ("keep-host-driver-without-one", "node_prereqs", {"all": {"node_prereqs_driver_enabled": False}}, {},
     "node_prereqs_driver_enabled is False (the hosts keep their own driver), but gpu-l40s-1 has no NVIDIA "
     "driver installed"),
    ("mps-mixed-trust", "gpu_operator",
     {"all": {"gpu_operator_time_slicing": dict(MPS, nodes={"gpu-h100-1": "mps"})}}, {},
     "MPS refused on gpu-h100-1 (gpu.skaffon.io/trust=mixed, config mps, MPS)"),
    ("mps-with-mixed-mig-strategy", "gpu_operator",
     {"all": {"gpu_operator_time_slicing": MPS, "gpu_operator_mig_strategy": "mixed"}}, {},
     "MPS refused on gpu-l40s-1: gpu_operator_mig_strategy is mixed"),
    ("mps-too-many-replicas", "gpu_operator",
     {"all": {"gpu_operator_time_slicing": dict(MPS, configs={"mps": {"replicas": 64, "strategy": "mps"}})}}, {},
     "sharing.mps.resources[0].replicas is 64: an MPS server takes at most 48 clients per GPU"),
    ("mig-node-name-unknown", "mig",
     {"gpu-h100-1": {"mig_node_name": "gpu-h100-9"}, "pool_h100_nvlink_training": {"mig_profile": "all-1g.10gb"}},
     {"mig_batch_size": 1}, "Node gpu-h100-9 does not exist (nodes of the cluster: cpu-1, gpu-h100-1, gpu-h100-2, "
     "gpu-l40s-1): set mig_node_name"),
]

RESULTS = []


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The example fleet prepared by node_prereqs and running the operator with time-slicing."""
    from simcluster import testing
    work = tmp_path_factory.mktemp("bad-inputs")
    sim = testing.start(cluster_file(str(work / "cluster.yaml")), str(work / "run"))
    try:
        inv = write_inventory(work, sim, all_vars={"gpu_operator_time_slicing": TIME_SLICING})
        prep = run_playbook(PLAYBOOKS["node_prereqs"], sim.env, inventory=inv)
        assert prep.rc == 0, prep
        plan = prep.task_results("Plan driver and toolkit ownership from every host's facts",
                                 "gpu-h100-1")[0]["ansible_facts"]["node_prereqs_plan"]
        res = run_playbook(PLAYBOOKS["gpu_operator"], sim.env, inventory=inv,
                           extra_vars={"gpu_operator_driver_plan": plan})
        assert res.rc == 0, res
        yield sim, plan
    finally:
        sim.stop()
        write_report()


def write_report():
    if not RESULTS:
        return
    os.makedirs(os.path.dirname(REPORT), exist_ok=True)
    with open(REPORT, "w") as handle:
        handle.write("| case | playbook | refused | before any write | message |\n|---|---|---|---|---|\n")
        for row in RESULTS:
            handle.write("| %s | %s | %s | %s | %s |\n" % (
                row["case"], row["playbook"], row["refused"], row["no_write"],
                row["message"].replace("|", "\\|").replace("\n", " ")[:400]))


def node_labels(sim, name):
    res = sim.run(os.path.join(BIN, "kubectl"), "get", "node", name, "-o", "json")
    return json.loads(res.stdout)["metadata"].get("labels") or {}


def split(overrides):
    pools, hosts, all_vars = {}, {}, dict(overrides.get("all", {}))
    for key, value in overrides.items():
        if key.startswith("pool_"):
            pools[key] = value
        elif key == "gpu_nodes":
            hosts.update(dict((h, value) for h in ("gpu-h100-1", "gpu-h100-2", "gpu-l40s-1")))
        elif key != "all":
            hosts[key] = value
    return all_vars, pools, hosts


@pytest.mark.parametrize("case,playbook,overrides,extra,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input(installed, tmp_path, record_property, case, playbook, overrides, extra, expected):
    sim, plan = installed
    all_vars, pools, hosts = split(overrides)
    inv = write_inventory(tmp_path, sim, all_vars=dict({"gpu_operator_time_slicing": TIME_SLICING}, **all_vars),
                          pool_vars=pools, host_vars=hosts)
    extra = dict(extra)
    if playbook == "gpu_operator" and not extra.pop(PLAN_FROM_FACTS, False):
        extra.setdefault("gpu_operator_driver_plan", plan)
    before = node_labels(sim, "gpu-l40s-1")
    sim.reset_stats()
    res = run_playbook(PLAYBOOKS[playbook], sim.env, inventory=inv, extra_vars=extra)
    written = writes(sim.stats())
    message = " ".join(res.failure_messages())
    RESULTS.append({"case": case, "playbook": playbook, "refused": res.rc != 0, "no_write": not written,
                    "message": message or "(accepted, rc=%d)" % res.rc})
    record_property("refused_before_any_write", res.rc != 0 and not written)
    record_property("message", message)
    if expected is None:
        assert res.rc == 0 and res.changed() == 0, res
        return
    assert res.rc != 0, res
    assert expected in message, message
    assert written == {}, written
    assert node_labels(sim, "gpu-l40s-1") == before
