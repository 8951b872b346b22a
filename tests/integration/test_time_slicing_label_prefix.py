"""The time-slicing trust guard follows the site's label prefix.

docs/node-prereqs.md promises that a `trust: mixed` pool refuses time-slicing. node_prereqs labels
the pool `<prefix>trust=mixed`; the gpu_operator role must read that key, whatever the prefix.
The example inventory's pools (the H100 pool is `trust: mixed`), node_prereqs.yml labels the
nodes of the simulated cluster, then gpu_operator.yml with a cluster-wide time-slicing default
must stop before anything is written, naming the node and the label. Two ways a site sets its
prefix: node_prereqs_label_prefix on the GPU hosts, or gpu_platform_label_prefix once for all.
"""
import os

import pytest
import yaml

from kit.paths import REPO
from kit.playbook import run_playbook
from kit.pool_inventory import cluster_file, env_without_kubeconfig, write_inventory, writes

NODE_PREREQS = os.path.join(REPO, "playbooks", "node_prereqs.yml")
GPU_OPERATOR = os.path.join(REPO, "playbooks", "gpu_operator.yml")
TIME_SLICING = {"default": "any", "configs": {"any": {"replicas": 4}}}

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    from simcluster import testing
    work = tmp_path_factory.mktemp("prefix-trust")
    cluster = testing.start(cluster_file(str(work / "cluster.yaml")), str(work / "run"))
    try:
        yield cluster
    finally:
        cluster.stop()


def site_inventory(base, sim, how, prefix):
    """The example pools with the site's own prefix, set `how` (host or site variable)."""
    if how == "host":
        pools = {"pool_h100_nvlink_training": {"node_prereqs_label_prefix": prefix},
                 "pool_l40s_inference": {"node_prereqs_label_prefix": prefix}}
        return write_inventory(base, sim, pool_vars=pools)
    inv = write_inventory(base, sim, all_vars={"gpu_platform_label_prefix": prefix})
    path = os.path.join(inv, "group_vars", "gpu_nodes.yml")
    with open(path) as handle:
        gpu = yaml.safe_load(handle)
    gpu.pop("node_prereqs_label_prefix", None)   # the site-wide variable alone
    with open(path, "w") as handle:
        handle.write("---\n" + yaml.safe_dump(gpu, default_flow_style=False))
    return inv


@pytest.mark.parametrize("how, prefix", [("host", "gpu.example.org/"), ("site", "platform.example.net/")])
def test_mixed_trust_pool_refuses_time_slicing_under_the_sites_prefix(sim, tmp_path, how, prefix):
    inv = site_inventory(tmp_path, sim, how, prefix)
    res = run_playbook(NODE_PREREQS, env_without_kubeconfig(sim), inventory=inv)
    assert res.rc == 0, res
    plan = res.task_results("Plan driver and toolkit ownership from every host's facts", "gpu-h100-1")
    plan = plan[0]["ansible_facts"]["node_prereqs_plan"]
    labels = _labels(sim, "gpu-h100-1")
    assert labels.get(prefix + "trust") == "mixed", labels   # node_prereqs labelled under the site's prefix

    sim.reset_stats()
    res = run_playbook(GPU_OPERATOR, sim.env, inventory=inv,
                       extra_vars={"gpu_operator_driver_plan": plan, "gpu_operator_time_slicing": TIME_SLICING})
    assert res.rc != 0, res
    msg = " ".join(res.failure_messages())
    for node in ("gpu-h100-1", "gpu-h100-2"):
        assert "%s (%strust=mixed, config any)" % (node, prefix) in msg, msg
    assert writes(sim.stats()) == {}, sim.stats()


def test_gpu_hosts_under_two_prefixes_are_refused_with_the_fix(sim, tmp_path):
    pools = {"pool_h100_nvlink_training": {"node_prereqs_label_prefix": "gpu.example.org/"}}
    inv = write_inventory(tmp_path, sim, pool_vars=pools)
    res = run_playbook(NODE_PREREQS, env_without_kubeconfig(sim), inventory=inv)
    assert res.rc == 0, res
    plan = res.task_results("Plan driver and toolkit ownership from every host's facts", "gpu-h100-1")
    res = run_playbook(GPU_OPERATOR, sim.env, inventory=inv,
                       extra_vars={"gpu_operator_driver_plan": plan[0]["ansible_facts"]["node_prereqs_plan"],
                                   "gpu_operator_time_slicing": TIME_SLICING})
    assert res.rc != 0, res
    msg = " ".join(res.failure_messages())
    assert ("gpu_operator_time_slicing_trust_label: the GPU hosts are labelled under different "
            "node_prereqs_label_prefix values (gpu.example.org/ on gpu-h100-1, gpu-h100-2; gpu.skaffon.io/ on "
            "gpu-l40s-1)") in msg, msg


def _labels(sim, name):
    from kubernetes import client
    return client.CoreV1Api(sim.api_client()).read_node(name).metadata.labels or {}
