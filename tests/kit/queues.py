"""Shared setup of the queues integration tests: a simulated GPU cluster and an inventory directory."""
import json
import os
import time

import yaml

from kit.kubectl import kget
from kit.paths import BIN, REPO
from kit.playbook import module_python, run_playbook
from simcluster import testing as simtesting

PLAYBOOK = os.path.join(REPO, "playbooks", "queues.yml")


def start_cluster(tmp_path_factory, name, gpus=8, **extra):
    work = tmp_path_factory.mktemp("sim-" + name)
    spec = {"nodes": [
        {"name": "gpu-h100-1", "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": gpus, "memory_mib": 81559},
         "host_driver": "550.54.15", "cpu": "64", "memory": "512Gi",
         "labels": {"gpu.skaffon.io/accelerator": "h100", "gpu.skaffon.io/topology": "nvlink",
                    "gpu.skaffon.io/workload": "training"},
         "taints": [{"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}]},
        {"name": "cpu-1", "cpu": "16", "memory": "64Gi"}]}
    spec.update(extra)
    path = work / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    sim = simtesting.start(str(path), str(work / "run"))
    # As a running device plugin reports (the GPU Operator is not part of these tests).
    sim.run(os.path.join(BIN, "kubectl"), "patch", "node", "gpu-h100-1", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                                         "capacity": {"nvidia.com/gpu": str(gpus)}}}))
    for ns in ("team-a", "team-b", "team-c"):      # the tenants role creates them
        sim.run(os.path.join(BIN, "kubectl"), "create", "namespace", ns)
    return sim


def inventory(tmp_path, group_vars, gpu_hosts=None):
    """An inventory directory shaped like inventories/example/."""
    inv = tmp_path / "inventory"
    (inv / "group_vars").mkdir(parents=True, exist_ok=True)
    hosts = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                             "ansible_python_interpreter": module_python()}},
                     "children": {"gpu_nodes": {"hosts": gpu_hosts or {}}}}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (inv / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    return str(inv)


def play(sim, inv, check=False, diff=False, **extra):
    return run_playbook(PLAYBOOK, sim.env, inventory=inv, extra_vars=extra or None, check=check, diff=diff,
                        limit="localhost")


def wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError("timed out after %ss waiting for %s (last %r)" % (timeout, what, last))


def running(sim, ns, prefix=""):
    pods = (kget(sim, "pods", "-n", ns) or {}).get("items", [])
    return sorted(p["metadata"]["name"] for p in pods
                  if p["metadata"]["name"].startswith(prefix) and (p.get("status") or {}).get("phase") == "Running")


def gpu_job(name, ns, parallelism, label, value, scheduler=None, gpus=1):
    spec = {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {label: value}},
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
                "metadata": {"annotations": {"simcluster.skaffon.io/behaviour": "run"}}, "spec": spec}}}
