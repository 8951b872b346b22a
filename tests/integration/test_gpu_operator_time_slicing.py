"""Time-slicing through the gpu_operator role on the simulated cluster.

The device plugin twin reads its config only at start (the real trap): a
content change must restart nvidia-device-plugin-daemonset, and nodes must then
advertise GPUs x replicas. Pools marked for tenants of different trust refuse
time-slicing unless overridden.
"""

import pytest

from kit.gpu_operator import NS, base_vars, gpu_node, kget, package_chart, plan_for, play, start_cluster

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
TRUST = "gpu.skaffon.io/trust"
NODES = [gpu_node("gpu-a", "550.54.15", **{TRUST: "single"}),
         gpu_node("gpu-b", "550.54.15", **{TRUST: "mixed"}),
         {"name": "cpu-1"}]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "ts", NODES)
    try:
        archive = package_chart(tmp_path_factory)
        plan = plan_for(NODES)
        res = play(sim, base_vars(sim, archive, plan))
        assert res.rc == 0, res
        yield sim, archive, plan
    finally:
        sim.stop()


def ts_vars(sim, archive, plan, ts, **extra):
    return base_vars(sim, archive, plan, gpu_operator_time_slicing=ts, gpu_operator_time_slicing_verify_retries=15,
                     **extra)


def node(sim, name):
    return kget(sim, "node", name)


def dp_restarted_at(sim):
    ds = kget(sim, "daemonset", "nvidia-device-plugin-daemonset", "-n", NS)
    return ((ds["spec"]["template"]["metadata"].get("annotations") or {})
            .get("kubectl.kubernetes.io/restartedAt"))


def test_mixed_trust_pool_is_refused_before_anything_changes(cluster):
    sim, archive, plan = cluster
    res = play(sim, ts_vars(sim, archive, plan, {"default": "any", "configs": {"any": {"replicas": 4}}}))
    assert res.rc != 0
    msgs = "\n".join(res.failure_messages())
    assert "time-slicing refused on gpu-b (gpu.skaffon.io/trust=mixed, config any)" in msgs, msgs
    assert kget(sim, "configmap", "time-slicing-config", "-n", NS) is None
    assert res.changed() == 0


def test_flags_misplacement_is_refused(cluster):
    sim, archive, plan = cluster
    raw = ("version: v1\nflags:\n  failRequestsGreaterThanOne: true\nsharing:\n  timeSlicing:\n"
           "    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n")
    res = play(sim, ts_vars(sim, archive, plan, {"configs": {"strict": raw}, "nodes": {"gpu-a": "strict"}}))
    assert res.rc != 0
    assert any("k8s-device-plugin#1433" in m for m in res.failure_messages()), res


def test_per_node_config_then_content_change_restarts_the_device_plugin(cluster):
    sim, archive, plan = cluster
    # A lone config and no default: only the labelled node is time-sliced (the operator runs
    # config-manager with FALLBACK_STRATEGIES=empty), so the mixed-trust pool is not touched.
    ts = {"configs": {"shared": {"replicas": 4}}, "nodes": {"gpu-a": "shared"}}
    first = play(sim, ts_vars(sim, archive, plan, ts))
    assert first.rc == 0, first
    a = node(sim, "gpu-a")
    assert a["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "shared"
    assert a["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "4"
    assert a["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert int(a["status"]["capacity"]["nvidia.com/gpu"]) == 8
    b = node(sim, "gpu-b")  # the mixed-trust pool keeps whole GPUs
    assert b["metadata"]["labels"].get("nvidia.com/gpu.replicas") in (None, "1")
    assert int(b["status"]["capacity"]["nvidia.com/gpu"]) == 2
    cp = kget(sim, "clusterpolicy", "cluster-policy")
    assert cp["spec"]["devicePlugin"]["config"]["name"] == "time-slicing-config"
    assert not cp["spec"]["devicePlugin"]["config"].get("default")

    # a re-run writes nothing: the Namespace and the ConfigMap are read and compared, not patched
    sim.reset_stats()
    again = play(sim, ts_vars(sim, archive, plan, ts))
    assert again.rc == 0 and again.changed() == 0, again
    stats = sim.stats()
    writes = dict((res, verbs) for res, verbs in stats["by_resource"].items()
                  if set(verbs) & {"create", "update", "patch", "delete"})
    assert writes == {}, writes
    # and reads each object once: the device plugin's pods read the current content (the ConfigMap's
    # applied checksum), so its DaemonSet is not read a second time; the nodes' selections are
    # compared with the Nodes the role's checks read
    reads = stats["by_resource"]
    assert (reads["daemonsets.apps"], reads["configmaps"], reads["namespaces"]) == ({"get": 1},) * 3, reads
    # the Nodes: the role's checks and the ClusterPolicy wait (GPU nodes offering GPUs); the replica check
    # uses the checks' read, which already shows every replica, as the run wrote nothing
    assert reads["nodes"] == {"list": 2}, reads
    assert again.task_results("Read the nodes until they advertise the configured replicas")[0].get("skipped")
    checked = again.task_results("Check the advertised time-slicing replicas")[0]
    assert checked["msg"] == "Every time-sliced node advertises its configured replicas", checked
    before = dp_restarted_at(sim)

    # Edit the content only: without a restart the plugin would keep advertising 4 replicas.
    ts["configs"]["shared"]["replicas"] = 8
    changed = play(sim, ts_vars(sim, archive, plan, ts))
    assert changed.rc == 0, changed
    assert changed.task_results("Restart the device plugin DaemonSet")[0]["changed"] is True
    # after the restart the replica check reads the Nodes again, until they advertise the new replicas
    reread = changed.task_results("Read the nodes until they advertise the configured replicas")[0]
    assert not reread.get("skipped") and reread["attempts"] >= 1, reread
    assert dp_restarted_at(sim) and dp_restarted_at(sim) != before
    a = node(sim, "gpu-a")
    assert a["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "8"
    assert int(a["status"]["capacity"]["nvidia.com/gpu"]) == 16
    assert play(sim, ts_vars(sim, archive, plan, ts)).changed() == 0


def test_override_allows_the_mixed_trust_pool(cluster):
    sim, archive, plan = cluster
    ts = {"default": "any", "configs": {"any": {"replicas": 2, "rename_by_default": True}}}
    res = play(sim, ts_vars(sim, archive, plan, ts, gpu_operator_time_slicing_allow_mixed_trust=True))
    assert res.rc == 0, res
    for name in ("gpu-a", "gpu-b"):  # gpu-a's per-node selection is gone: it follows the default
        assert "nvidia.com/device-plugin.config" not in node(sim, name)["metadata"]["labels"]
    b = node(sim, "gpu-b")
    assert b["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "2"
    assert int(b["status"]["capacity"]["nvidia.com/gpu.shared"]) == 4
