"""Integration: node_prereqs labels and taints Node objects of the simulated cluster.

Hosts are local fake roots (host preparation off): one with a host driver
(nvidia-smi stand-in printing the real H100 capture), one GPU without driver
(sysfs only). The plan therefore is mixed: driver.enabled=true and
nvidia.com/gpu.deploy.driver=false on the host-driver node only.
"""
import json
import os
import stat

import pytest
import yaml

from kit.paths import NVIDIA_SMI as FIXTURES, REPO
from kit.playbook import run_playbook
from kit.roots import put

PLAYBOOK = os.path.join(REPO, "playbooks", "node_prereqs.yml")
PREFIX = "gpu.skaffon.io/"

CLUSTER = {
    "nodes": [
        {"name": "gpu-h100-1",
         "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 1, "memory_mib": 81559, "mig_capable": True},
         "host_driver": "590.48.01",
         "labels": {PREFIX + "stale": "x", "team": "ml"},
         "taints": [{"key": "example.com/maintenance", "effect": "PreferNoSchedule"},
                    {"key": PREFIX + "old", "value": "y", "effect": "NoSchedule"}]},
        {"name": "gpu-l40s-1",
         "gpus": {"model": "NVIDIA-L40S", "count": 1, "memory_mib": 46068, "mig_capable": False},
         "host_driver": None},
    ],
}

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from simcluster import testing

    work = tmp_path_factory.mktemp("labels")
    path = os.path.join(str(work), "cluster.yaml")
    with open(path, "w") as handle:
        yaml.safe_dump(CLUSTER, handle)
    sim = testing.start(path, os.path.join(str(work), "sim"))
    try:
        yield sim, str(work)
    finally:
        sim.stop()


def fake_roots(work):
    h100 = os.path.join(work, "h100")
    put(h100, "/etc/os-release", 'ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n')
    smi = put(h100, "/opt/bin/nvidia-smi", "#!/bin/sh\ncat '%s'\n" % os.path.join(
        FIXTURES, "h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv"), stat.S_IRWXU)
    l40s = os.path.join(work, "l40s")
    put(l40s, "/etc/os-release", 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12"\n')
    for name, value in (("vendor", "0x10de"), ("device", "0x26b9"), ("class", "0x030200")):
        put(l40s, "/sys/bus/pci/devices/0000:01:00.0/" + name, value + "\n")
    return h100, smi, l40s


def inventory(work, sim, h100_taints=True):
    h100, smi, l40s = fake_roots(work)
    common = {"ansible_connection": "local", "ansible_become": False,
              "node_prereqs_prepare_host": False, "node_prereqs_kubeconfig": sim.kubeconfig}
    h100_vars = dict(common, node_prereqs_facts_root=h100, node_prereqs_nvidia_smi_path=smi,
                     node_prereqs_pool={"accelerator": "h100", "topology": "nvlink", "workload": "training",
                                       "trust": "mixed"},
                     node_prereqs_pool_taints=[{"key": "workload", "value": "training", "effect": "NoSchedule"}]
                     if h100_taints else [])
    l40s_vars = dict(common, node_prereqs_facts_root=l40s, node_prereqs_kernel_release="6.1.0-1-amd64",
                     node_prereqs_pool={"accelerator": "l40s", "sharing": "time-slicing"})
    data = {"all": {"children": {"gpu_nodes": {"hosts": {"gpu-h100-1": h100_vars, "gpu-l40s-1": l40s_vars}}}}}
    path = os.path.join(work, "inventory.json")
    with open(path, "w") as handle:
        json.dump(data, handle)
    return path


def detecting_inventory(work, sim, **all_vars):
    """inventory() whose hosts gpu_operator.yml's detection play reads from the same roots, with
    `all_vars` for every host; the path and the data written."""
    inv = inventory(work, sim)
    with open(inv) as handle:
        data = json.load(handle)
    for hostvars in data["all"]["children"]["gpu_nodes"]["hosts"].values():
        hostvars["gpu_node_facts_root"] = hostvars["node_prereqs_facts_root"]
    data["all"]["vars"] = all_vars
    with open(inv, "w") as handle:
        json.dump(data, handle)
    return inv, data


def node(sim, name):
    obj = sim.dynamic().resources.get(api_version="v1", kind="Node").get(name=name).to_dict()
    return obj["metadata"].get("labels") or {}, obj["spec"].get("taints") or []


def ours(labels):
    return dict((k, v) for k, v in labels.items() if k.startswith(PREFIX) or k.startswith("nvidia.com/gpu.deploy."))


def changed(result):
    return sum(result.changed(h) for h in ("gpu-h100-1", "gpu-l40s-1"))


def drop_pool_taint(sim, name):
    """Someone removes the pool taint by hand: only the foreign taint is left."""
    nodes = sim.dynamic().resources.get(api_version="v1", kind="Node")
    nodes.patch(name=name, body={"spec": {"taints": [{"key": "example.com/maintenance", "effect": "PreferNoSchedule"}]}},
                content_type="application/merge-patch+json")
    assert [t["key"] for t in node(sim, name)[1]] == ["example.com/maintenance"]


def patched(result):
    """The Nodes the one run_once task patched (or would, in check mode): it runs on the first host."""
    runs = result.task_results("Label and taint the Node objects of the play's hosts", "gpu-h100-1")
    assert len(runs) == 1, result
    return sorted(o["name"] for o in runs[0].get("objects", []))


def test_labels_and_taints_applied_idempotent_and_check_mode_safe(cluster):
    sim, work = cluster
    inv = inventory(work, sim)
    before = {name: node(sim, name) for name in ("gpu-h100-1", "gpu-l40s-1")}

    dry = run_playbook(PLAYBOOK, sim.env, inventory=inv, check=True)
    assert dry.rc == 0, dry
    assert patched(dry) == ["gpu-h100-1", "gpu-l40s-1"] and changed(dry) == 1, dry
    assert {name: node(sim, name) for name in before} == before

    first = run_playbook(PLAYBOOK, sim.env, inventory=inv)
    assert first.rc == 0, first
    assert patched(first) == ["gpu-h100-1", "gpu-l40s-1"] and changed(first) == 1, first
    labels, taints = node(sim, "gpu-h100-1")
    assert ours(labels) == {PREFIX + "accelerator": "h100", PREFIX + "topology": "nvlink",
                            PREFIX + "workload": "training", PREFIX + "trust": "mixed",
                            "nvidia.com/gpu.deploy.driver": "false"}
    assert labels["team"] == "ml"                       # not ours: kept
    assert [(t["key"], t.get("value"), t["effect"]) for t in taints] == [
        ("example.com/maintenance", None, "PreferNoSchedule"),   # not ours: kept, in place
        (PREFIX + "workload", "training", "NoSchedule")]          # PREFIX/old removed
    labels, taints = node(sim, "gpu-l40s-1")
    assert ours(labels) == {PREFIX + "accelerator": "l40s", PREFIX + "sharing": "time-slicing"}
    plan = first.task_results("Plan driver and toolkit ownership from every host's facts", "gpu-h100-1")
    assert plan and plan[0]["ansible_facts"]["node_prereqs_plan"]["driver_enabled"] is True

    second = run_playbook(PLAYBOOK, sim.env, inventory=inv)
    assert second.rc == 0 and changed(second) == 0 and patched(second) == [], second

    again_dry = run_playbook(PLAYBOOK, sim.env, inventory=inv, check=True)
    assert again_dry.rc == 0 and changed(again_dry) == 0, again_dry

    # The pool taint leaves the inventory: removed, the foreign taint stays.
    inv = inventory(work, sim, h100_taints=False)
    third = run_playbook(PLAYBOOK, sim.env, inventory=inv)
    assert third.rc == 0 and patched(third) == ["gpu-h100-1"], third
    taints = node(sim, "gpu-h100-1")[1]
    assert [t["key"] for t in taints] == ["example.com/maintenance"]


def test_one_patch_per_node_that_differs_none_on_a_rerun(cluster):
    sim, work = cluster
    inv = inventory(work, sim)
    assert run_playbook(PLAYBOOK, sim.env, inventory=inv).rc == 0
    # a re-run reads the Nodes with one LIST (not a GET per node) and writes none
    sim.reset_stats()
    result = run_playbook(PLAYBOOK, sim.env, inventory=inv)
    assert result.rc == 0 and changed(result) == 0, result
    calls = sim.stats()["by_resource"]["nodes"]
    assert calls == {"list": 1}, calls
    # one node drifts, a label and a taint: one patch, for that node only
    sim.run("kubectl", "label", "node", "gpu-l40s-1", PREFIX + "accelerator=wrong", "--overwrite")
    drop_pool_taint(sim, "gpu-h100-1")
    sim.reset_stats()
    result = run_playbook(PLAYBOOK, sim.env, inventory=inv)
    assert result.rc == 0 and patched(result) == ["gpu-h100-1", "gpu-l40s-1"], result
    calls = sim.stats()["by_resource"]["nodes"]
    assert calls == {"list": 1, "patch": 2}, calls
    assert node(sim, "gpu-l40s-1")[0][PREFIX + "accelerator"] == "l40s"
    assert [(t["key"], t.get("value")) for t in node(sim, "gpu-h100-1")[1]] == [
        ("example.com/maintenance", None), (PREFIX + "workload", "training")]
    # only the taint drifts: the patch carries the taints, the node is back
    drop_pool_taint(sim, "gpu-h100-1")
    sim.reset_stats()
    result = run_playbook(PLAYBOOK, sim.env, inventory=inv)
    assert result.rc == 0 and patched(result) == ["gpu-h100-1"], result
    assert sim.stats()["by_resource"]["nodes"] == {"list": 1, "patch": 1}
    assert PREFIX + "workload" in [t["key"] for t in node(sim, "gpu-h100-1")[1]]


def test_missing_node_is_refused(cluster):
    sim, work = cluster
    inv = inventory(work, sim)
    with open(inv) as handle:
        data = json.load(handle)
    data["all"]["children"]["gpu_nodes"]["hosts"]["gpu-l40s-1"]["node_prereqs_node_name"] = "no-such-node"
    with open(inv, "w") as handle:
        json.dump(data, handle)
    sim.reset_stats()
    result = run_playbook(PLAYBOOK, sim.env, inventory=inv)
    # one task for all hosts: the refusal stops the play (any_errors_fatal) before any Node is written
    assert result.rc != 0 and result.failed("gpu-h100-1") == 1, result
    assert any("Node no-such-node (host gpu-l40s-1) does not exist" in m and "node_prereqs_node_name" in m
               for m in result.failure_messages()), result
    assert "patch" not in sim.stats()["by_resource"].get("nodes", {})


@pytest.mark.parametrize("pool,taints,expected", [
    ({"accelerater": "h100"}, [], "node_prereqs_pool on gpu-h100-1 must map only accelerator, topology"),
    ({"accelerator": "H100 SXM"}, [], "got {\"accelerator\": \"H100 SXM\"}"),
    ({}, [{"key": "workload", "value": "x", "effect": "NoShedule"}], "NoShedule"),
])
def test_bad_pool_input_is_refused_before_anything(tmp_path, pool, taints, expected):
    root = str(tmp_path)
    h100, smi = fake_roots(root)[:2]
    hostvars = {"ansible_connection": "local", "ansible_become": False, "node_prereqs_label_nodes": False,
                "node_prereqs_facts_root": h100, "node_prereqs_nvidia_smi_path": smi,
                "node_prereqs_pool": pool, "node_prereqs_pool_taints": taints}
    path = os.path.join(root, "inventory.json")
    with open(path, "w") as handle:
        json.dump({"all": {"children": {"gpu_nodes": {"hosts": {"gpu-h100-1": hostvars}}}}}, handle)
    result = run_playbook(PLAYBOOK, dict(os.environ), inventory=path)
    assert result.failed("gpu-h100-1") == 1
    assert result.changed("gpu-h100-1") == 0
    assert any(expected in m for m in result.failure_messages()), result
    # refused before detection: no facts task ran
    assert result.task_results("Gather GPU node facts", "gpu-h100-1") == []


def test_gpu_operator_detects_only_hosts_node_prereqs_did_not_detect_in_this_run(cluster):
    """site.yml runs node_prereqs, then gpu_operator.yml: the second detection play is left out for
    the hosts node_prereqs detected in the same run; gpu_operator.yml alone detects every host."""
    sim, work = cluster
    inv, _ = detecting_inventory(work, sim)
    both = os.path.join(work, "prereqs-then-operator.yml")
    with open(both, "w") as handle:
        yaml.safe_dump([{"ansible.builtin.import_playbook": os.path.join(REPO, "playbooks", name)}
                        for name in ("node_prereqs.yml", "gpu_operator.yml")], handle)
    # the operator plays run on the control host: one that does not exist leaves only the detection
    no_install = {"gpu_operator_control_host": "no-control-host"}
    gather = "Gather GPU node facts (read-only)"
    hosts = ("gpu-h100-1", "gpu-l40s-1")
    together = run_playbook(both, sim.env, inventory=inv, extra_vars=no_install)
    assert together.rc == 0, together
    assert all(together.task_results("Gather GPU node facts", h) for h in hosts), together
    assert [h for h in hosts if together.task_results(gather, h)] == [], together
    alone = run_playbook(os.path.join(REPO, "playbooks", "gpu_operator.yml"), sim.env, inventory=inv,
                         extra_vars=no_install)
    assert alone.rc == 0, alone
    assert [h for h in hosts if alone.task_results(gather, h)] == list(hosts), alone


def test_bad_inputs_of_every_host_are_refused_together_each_host_named(tmp_path):
    """The input checks run once for the play: every host's problem is in the one message."""
    root = str(tmp_path)
    h100, smi, l40s = fake_roots(root)
    common = {"ansible_connection": "local", "ansible_become": False, "node_prereqs_label_nodes": False}
    hosts = {"gpu-h100-1": dict(common, node_prereqs_facts_root=h100, node_prereqs_nvidia_smi_path=smi,
                                node_prereqs_pool={"accelerater": "h100"}),
             "gpu-l40s-1": dict(common, node_prereqs_facts_root=l40s, node_prereqs_node_name="GPU_L40S",
                                node_prereqs_pool_taints=[{"key": "workload", "effect": "NoShedule"}])}
    path = os.path.join(root, "inventory.json")
    with open(path, "w") as handle:
        json.dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}, handle)
    result = run_playbook(PLAYBOOK, dict(os.environ), inventory=path)
    assert result.rc != 0 and changed(result) == 0, result
    message = " ".join(result.failure_messages())
    for expected in ("node_prereqs_pool on gpu-h100-1 must map only", "node_prereqs_pool_taints of gpu-l40s-1",
                     "NoShedule", "node_prereqs_node_name of gpu-l40s-1 is 'GPU_L40S'"):
        assert expected in message, message
    assert result.task_results("Gather GPU node facts", "gpu-h100-1") == []


def test_cached_detection_skips_the_hosts_the_fact_cache_holds(cluster, tmp_path):
    """gpu_platform_host_detection: cached with a persistent fact cache (ansible.cfg's fact_caching, here
    its environment form): a re-run detects no host whose gpu_node facts the cache holds, plans from
    them the same way and changes nothing; a host the cache lost is detected; `-e
    gpu_platform_host_detection=always` (what a person types after changing a host) detects every host."""
    sim, work = cluster
    inv, data = detecting_inventory(work, sim, gpu_platform_host_detection="cached")
    cache = str(tmp_path / "facts")
    env = dict(sim.env, ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=cache)
    hosts = ("gpu-h100-1", "gpu-l40s-1")

    def detected(result):
        return [h for h in hosts for r in result.task_results("Gather GPU node facts", h) if not r.get("skipped")]

    first = run_playbook(PLAYBOOK, env, inventory=inv)
    assert first.rc == 0 and detected(first) == list(hosts), first
    cached = dict((h, [f for f in os.listdir(cache) if f.endswith(h)]) for h in hosts)   # ansible names them s1_<host>
    assert all(len(files) == 1 for files in cached.values()), os.listdir(cache)
    again = run_playbook(PLAYBOOK, env, inventory=inv)
    assert again.rc == 0 and detected(again) == [] and changed(again) == 0 and patched(again) == [], again
    plan = again.task_results("Plan driver and toolkit ownership from every host's facts", "gpu-h100-1")
    assert plan[0]["ansible_facts"]["node_prereqs_plan"]["driver_enabled"] is True   # as from the hosts
    # gpu_operator.yml alone follows the same setting: nothing to detect (its install plays skipped)
    operator = run_playbook(os.path.join(REPO, "playbooks", "gpu_operator.yml"), env, inventory=inv,
                            extra_vars={"gpu_operator_control_host": "no-control-host"})
    assert operator.rc == 0, operator
    assert [h for h in hosts for r in operator.task_results("Gather GPU node facts (read-only)", h)
            if not r.get("skipped")] == [], operator
    os.remove(os.path.join(cache, cached["gpu-l40s-1"][0]))
    lost = run_playbook(PLAYBOOK, env, inventory=inv)
    assert lost.rc == 0 and detected(lost) == ["gpu-l40s-1"], lost
    always = run_playbook(PLAYBOOK, env, inventory=inv, extra_vars={"gpu_platform_host_detection": "always"})
    assert always.rc == 0 and detected(always) == list(hosts), always
    # without the setting (always by default) every host is detected though the cache holds them
    data["all"]["vars"] = {}
    with open(inv, "w") as handle:
        json.dump(data, handle)
    default = run_playbook(PLAYBOOK, env, inventory=inv)
    assert default.rc == 0 and detected(default) == list(hosts), default


def test_cached_hosts_are_not_visited_and_their_nodes_follow_the_inventory(cluster, tmp_path):
    """With cached detection a re-run visits only the hosts the cache does not hold, or the first host
    when it holds all (the steps made once for all hosts run there): the other hosts get no task, yet
    their cached facts plan the drivers and their Nodes follow the inventory, whose errors are refused."""
    sim, work = cluster
    inv, data = detecting_inventory(work, sim, gpu_platform_host_detection="cached")
    env = dict(sim.env, ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"))
    l40s = data["all"]["children"]["gpu_nodes"]["hosts"]["gpu-l40s-1"]

    def visited(result):
        return sorted(h for h in ("gpu-h100-1", "gpu-l40s-1")
                      if result.task_results("Check the node-pool inputs and keep what the Node object gets", h))

    def rewrite():
        with open(inv, "w") as handle:
            json.dump(data, handle)

    first = run_playbook(PLAYBOOK, env, inventory=inv)
    assert first.rc == 0 and visited(first) == ["gpu-h100-1", "gpu-l40s-1"], first
    planned = first.task_results("Plan driver and toolkit ownership from every host's facts", "gpu-h100-1")
    l40s["node_prereqs_pool"] = dict(l40s["node_prereqs_pool"], workload="inference")
    rewrite()
    again = run_playbook(PLAYBOOK, env, inventory=inv)
    assert again.rc == 0 and visited(again) == ["gpu-h100-1"], again
    assert again.stats.get("gpu-l40s-1", {}).get("ok", 0) == 0, again.stats   # not one task ran there
    labels = node(sim, "gpu-l40s-1")[0]
    assert labels[PREFIX + "workload"] == "inference" and labels[PREFIX + "accelerator"] == "l40s", labels
    # the cached host's facts plan as the first run's detection did (the H100 host alone would keep its driver)
    plan = again.task_results("Plan driver and toolkit ownership from every host's facts", "gpu-h100-1")
    assert plan[0]["ansible_facts"]["node_prereqs_plan"] == planned[0]["ansible_facts"]["node_prereqs_plan"]
    assert sorted(plan[0]["ansible_facts"]["node_prereqs_plan"]["nodes"]) == ["gpu-h100-1", "gpu-l40s-1"]
    assert plan[0]["ansible_facts"]["node_prereqs_plan"]["driver_enabled"] is True
    rerun = run_playbook(PLAYBOOK, env, inventory=inv)
    assert rerun.rc == 0 and changed(rerun) == 0 and patched(rerun) == [], rerun
    # a bad input of a host the play does not visit is refused like a visited host's, before any write
    l40s["node_prereqs_pool"] = {"accelerator": "l40s", "colour": "red"}
    rewrite()
    bad = run_playbook(PLAYBOOK, env, inventory=inv)
    assert bad.rc != 0 and visited(bad) == ["gpu-h100-1"], bad
    message = " ".join(bad.failure_messages())
    assert "node_prereqs_pool on gpu-l40s-1 must map only accelerator" in message, message
    assert node(sim, "gpu-l40s-1")[0][PREFIX + "workload"] == "inference"


def test_a_kept_host_driver_that_is_missing_is_refused_once_before_any_change(cluster):
    """node_prereqs_driver_enabled: false keeps every host's own driver: the L40S host has none. One
    run_once refusal names it (not a task per host), before any Node is written; the H100 host's
    working driver is reported kept."""
    sim, work = cluster
    inv, _ = detecting_inventory(work, sim, node_prereqs_driver_enabled=False)
    before = {name: node(sim, name) for name in ("gpu-h100-1", "gpu-l40s-1")}
    res = run_playbook(PLAYBOOK, sim.env, inventory=inv)
    assert res.rc != 0
    msg = " ".join(res.failure_messages())
    assert "node_prereqs_driver_enabled is False (the hosts keep their own driver), but gpu-l40s-1 has no NVIDIA " \
           "driver installed" in msg, msg
    assert "gpu-h100-1" not in msg.split("Refuse host drivers", 1)[-1], msg
    runs = [h for h in ("gpu-h100-1", "gpu-l40s-1")
            for r in res.task_results("Refuse host drivers the plan keeps that are missing or do not answer", h)]
    assert len(runs) == 1, res
    assert {name: node(sim, name) for name in before} == before
    kept = run_playbook(PLAYBOOK, sim.env, inventory=detecting_inventory(work, sim)[0])
    assert kept.rc == 0, kept
    report = kept.task_results("Report the host drivers kept", "gpu-h100-1")[0]["msg"]
    assert "Host driver 590.48.01 on gpu-h100-1 serves 1 GPU(s); host preparation skipped." in report
    assert "gpu-l40s-1" not in report
