"""Helpers of the GPU Operator integration tests (test_gpu_operator*.py): clusters with GPU nodes,
the real chart archives, the driver plan, playbook runs with settings in an inventory."""
import json
import os
import tempfile

import yaml

from kit import paths
from kit.kubectl import kget
from kit.paths import BIN, CLUSTERPOLICY_CRD as CRD, REPO
from kit.playbook import run_playbook
from simcluster import testing as simtesting

PLAYBOOK = os.path.join(REPO, "playbooks", "gpu_operator.yml")
NS = "gpu-operator"
PUBLIC = ("nvcr.io", "registry.k8s.io", "ghcr.io", "docker.io", "quay.io", "gcr.io")
MIRROR = "mirror.example:5000/nvidia"


def start_cluster(tmp_path_factory, name, nodes, port=0, **extra):
    """A simulated cluster of `nodes` with the ClusterPolicy CRD (`extra`: more cluster file keys), on
    `port` (0: any free one)."""
    paths.need(CRD)
    workdir = tmp_path_factory.mktemp("sim-" + name)
    spec = {"crds": [CRD], "nodes": nodes}
    spec.update(extra)
    path = workdir / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    return simtesting.start(str(path), str(workdir / "run"), port=port)


def gpu_node(name, host_driver=None, **labels):
    node = {"name": name, "host_driver": host_driver,
            "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 2, "memory_mib": 81559, "mig_capable": True}}
    if labels:
        node["labels"] = labels
    return node


def node_facts(host_driver):
    """gpu_node facts as gpu_node_facts reports them (only what driver_plan reads)."""
    return {"gpu_node": {
        "gpu_host": True, "gpu_count": 2,
        "driver": {"state": "host", "version": "550.54.15"} if host_driver else {"state": "none"},
        "toolkit": {"state": "none"}, "container_runtime": {"nvidia_runtime": False, "nvidia_default": False},
        "nouveau_loaded": False, "kernel": {"headers_installed": True, "release": "6.8.0-45-generic"}}}


def plan_for(nodes):
    """The real driver_plan filter over facts matching the cluster's host drivers."""
    from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import driver_plan
    hosts = dict((n["name"], node_facts(n.get("host_driver"))) for n in nodes if n.get("gpus"))
    return json.loads(json.dumps(driver_plan(hosts)))


def real_chart(version="v26.7.0"):
    """Path of the real released chart archive of this version (skips without it)."""
    return paths.need(paths.gpu_operator_chart(version))


def package_chart(tmp_path_factory=None, version="v26.7.0"):
    """The archive an air-gapped site copies in: the real released chart."""
    return real_chart(version if version.startswith("v") else "v" + version)


def base_vars(sim, archive, plan, helm="helm3", **extra):
    values = {
        "gpu_operator_chart_version": os.path.basename(archive)[len("gpu-operator-"):-len(".tgz")],
        "gpu_operator_chart_source": "archive",
        "gpu_operator_chart_ref": archive,
        "gpu_operator_driver_plan": plan,
        "gpu_operator_helm_binary": os.path.join(BIN, helm),
        "gpu_operator_kubeconfig": sim.kubeconfig,
        "gpu_operator_wait_timeout": 30,
        "gpu_operator_wait_stable_for": 2,
    }
    values.update(extra)
    return values


def play(sim, settings, playbook=PLAYBOOK, typed=None, **kw):
    """Run a playbook with `settings` in an inventory's group_vars/all.yml, as a site keeps
    them (inventory variables rank below play vars: this catches playbooks overriding them);
    `typed` are the -e values a person would type."""
    inv = tempfile.mkdtemp(prefix="inventory-", dir=sim.workdir)
    os.makedirs(os.path.join(inv, "group_vars"))
    with open(os.path.join(inv, "hosts.yml"), "w") as fh:
        yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}},
                                "children": {"gpu_nodes": {"hosts": {}}}}}, fh)
    with open(os.path.join(inv, "group_vars", "all.yml"), "w") as fh:
        yaml.safe_dump(settings, fh)
    return run_playbook(playbook, sim.env, inventory=inv, extra_vars=typed, **kw)


def cluster_policy(sim):
    return kget(sim, "clusterpolicy", "cluster-policy")


def wait_result(result):
    found = result.task_results("Wait until the ClusterPolicy is ready and reconciled")
    return found[-1] if found else None
