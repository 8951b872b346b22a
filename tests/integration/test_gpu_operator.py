"""GPU Operator role, playbook and cluster_policy_wait against the simulated cluster.

Real ansible-playbook, real helm 3 / helm 4 and the REAL chart archives
(../shared/upstream/gpu-operator/charts/gpu-operator-v26.3.3.tgz, -v26.7.0.tgz),
installed from the archive like an air-gapped site does. Each scenario gets its
own simulated cluster (cluster files are generated here: host drivers, faults and
registries differ per scenario).
"""
import base64
import gzip
import json
import os
import threading
import time

import pytest

from kit import charts
from kit.gpu_operator import (BIN, MIRROR, NS, PUBLIC, base_vars, cluster_policy, gpu_node, kget, package_chart,
                              plan_for, play, real_chart, start_cluster, wait_result)

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


# --- fresh installs: all / none / mixed host drivers, helm 3 then helm 4 ----------------------------

FLEETS = {
    "all-host": [gpu_node("gpu-a", "550.54.15"), gpu_node("gpu-b", "550.54.15"), {"name": "cpu-1"}],
    "none": [gpu_node("gpu-a"), gpu_node("gpu-b"), {"name": "cpu-1"}],
    "mixed": [gpu_node("gpu-a", "550.54.15"), gpu_node("gpu-b"), {"name": "cpu-1"}],
}
EXPECTED_DRIVER = {"all-host": False, "none": True, "mixed": True}


@pytest.fixture(scope="module")
def fleet(request, tmp_path_factory):
    sim = start_cluster(tmp_path_factory, request.param, FLEETS[request.param])
    archive = package_chart(tmp_path_factory)
    try:
        yield request.param, sim, archive, plan_for(FLEETS[request.param])
    finally:
        sim.stop()


def _assert_installed(sim, name, plan):
    cp = cluster_policy(sim)
    assert cp["spec"]["driver"]["enabled"] is EXPECTED_DRIVER[name] is plan["driver_enabled"]
    assert cp["spec"]["driver"]["useNvidiaDriverCRD"] is False
    assert cp["status"]["state"] == "ready"
    ns = kget(sim, "namespace", NS)["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert ns["pod-security.kubernetes.io/" + mode] == "privileged"
        assert ns["pod-security.kubernetes.io/%s-version" % mode] == "latest"
    default_ns = kget(sim, "namespace", "default")["metadata"].get("labels") or {}
    assert not any(k.startswith("pod-security.kubernetes.io/") for k in default_ns)
    labels = dict((n["metadata"]["name"], n["metadata"].get("labels") or {})
                  for n in kget(sim, "nodes")["items"])
    driver_pods = [p["spec"].get("nodeName") for p in kget(sim, "pods", "-n", NS)["items"]
                   if p["metadata"]["name"].startswith("nvidia-driver-daemonset")]
    for node, wanted in plan["node_labels"].items():  # the plan's labels are on the Node objects
        for key, value in wanted.items():
            assert labels[node][key] == value, (node, key)
    if name == "mixed":
        # FACTS.md: operator-managed driver + host-driver nodes labelled deploy.driver=false
        assert plan["node_labels"]["gpu-a"] == {"nvidia.com/gpu.deploy.driver": "false"}
        assert labels["gpu-a"]["nvidia.com/gpu.deploy.driver"] == "false"
        assert "gpu-a" not in driver_pods and "gpu-b" in driver_pods
    elif name == "none":
        assert sorted(driver_pods) == ["gpu-a", "gpu-b"]
    else:
        assert driver_pods == []
        assert driver_pods == []  # driver.enabled=false: the operator deploys no driver anywhere


# Helm 4 installs every fleet. Helm 3 is kept for one install path, the mixed fleet (the one with
# node labels, driver pods on one node only): a fresh install, its re-run and check mode with the
# values diff, where the clients differ (helm 4 applies server-side and diffs its own way) and a
# site may still run helm 3.
@pytest.mark.parametrize("fleet,helm", [("all-host", "helm4"), ("mixed", "helm3"), ("mixed", "helm4"),
                                        ("none", "helm4")], indirect=["fleet"])
def test_fresh_install_rerun_and_check_mode(fleet, helm):
    name, sim, archive, plan = fleet
    if sim.run(os.path.join(BIN, "helm3"), "status", "gpu-operator", "-n", NS, check=False).returncode == 0:
        # the mixed fleet's helm 3 case ran on this cluster: its release first (ClusterPolicy is a singleton)
        sim.run(os.path.join(BIN, "helm3"), "uninstall", "gpu-operator", "-n", NS)
    extra = base_vars(sim, archive, plan, helm=helm)
    live = dict((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in kget(sim, "nodes")["items"])
    to_label = [node for node, want in plan["node_labels"].items()
                if any(live[node].get(k) != v for k, v in want.items())]

    first = play(sim, extra)
    assert first.rc == 0, first
    assert first.changed() >= 1
    waited = wait_result(first)
    assert waited["ready"] is True and waited["reason"] == "Reconciled" and waited["state"] == "ready"
    _assert_installed(sim, name, plan)
    releases = json.loads(sim.run(os.path.join(BIN, helm), "list", "-n", NS, "-o", "json").stdout)
    assert [(r["name"], r["chart"]) for r in releases] == [("gpu-operator", "gpu-operator-v26.7.0")]

    again = play(sim, extra)
    assert again.rc == 0, again
    assert again.changed() == 0, again
    # the Nodes read by the role's checks carry the plan's labels now: node_labels does not run again
    label_task = "Label the nodes the driver plan keeps on host drivers or toolkits"
    assert [bool(r.get("skipped")) for r in first.task_results(label_task)] == [not to_label], first
    assert [bool(r.get("skipped")) for r in again.task_results(label_task)] == [True], again

    # check mode + diff: reports the change and the values diff, changes nothing
    check = play(sim, dict(extra, gpu_operator_mig_strategy="mixed"), check=True, diff=True)
    assert check.rc == 0, check
    assert check.changed() >= 1
    shown = check.task_results("Show the Helm values diff")
    assert shown and shown[0]["msg"]["values"] == {"mig.strategy": {"before": None, "after": "mixed"}}
    assert cluster_policy(sim)["spec"]["mig"]["strategy"] == "single"
    revision = json.loads(sim.run(os.path.join(BIN, helm), "list", "-n", NS, "-o", "json").stdout)[0]["revision"]
    assert int(revision) == 1


# --- air-gapped: local archive + mirror, the cluster only reaches the mirror -----------------------

@pytest.fixture(scope="module")
def airgap(tmp_path_factory):
    nodes = [gpu_node("gpu-a", "550.54.15"), {"name": "cpu-1"}]
    sim = start_cluster(tmp_path_factory, "airgap", nodes, registries=["mirror.example:5000"])
    try:
        yield sim, package_chart(tmp_path_factory), plan_for(nodes)
    finally:
        sim.stop()


def test_airgap_without_mirror_fails_with_pull_diagnostics(airgap):
    sim, archive, plan = airgap
    res = play(sim, base_vars(sim, archive, plan, gpu_operator_wait_timeout=3))
    assert res.rc != 0
    waited = wait_result(res)
    assert waited["ready"] is False
    text = "\n".join(waited["diagnostics"])
    assert "ImagePullBackOff" in text or "ErrImagePull" in text, text
    # the chart's pre-delete hook Job runs the (public) operator image too: it can never
    # start here, so helm would wait for it until --timeout. Clean up without hooks.
    sim.run(os.path.join(BIN, "helm3"), "uninstall", "gpu-operator", "-n", NS, "--no-hooks")


@pytest.mark.parametrize("helm", ["helm4"])
def test_airgap_install_from_archive_with_mirror(airgap, helm):
    sim, archive, plan = airgap
    extra = base_vars(sim, archive, plan, helm=helm, gpu_operator_image_mirror=MIRROR,
                      gpu_operator_image_pull_secrets=["regcred"])
    res = play(sim, extra)
    assert res.rc == 0, res
    assert wait_result(res)["ready"] is True
    manifest = sim.run(os.path.join(BIN, helm), "get", "manifest", "gpu-operator", "-n", NS).stdout
    values = sim.run(os.path.join(BIN, helm), "get", "values", "gpu-operator", "-n", NS, "-o", "yaml").stdout
    for registry in PUBLIC:
        assert registry not in manifest, registry
        assert registry not in values, registry
    images = [c["image"] for p in kget(sim, "pods", "-n", NS)["items"]
              for c in p["spec"].get("initContainers", []) + p["spec"]["containers"]]
    assert images and all(i.startswith(MIRROR + "/") for i in images), images
    pods = kget(sim, "pods", "-n", NS)["items"]
    assert all(p["spec"].get("imagePullSecrets") == [{"name": "regcred"}] for p in pods), pods
    assert play(sim, extra).changed() == 0


def _set_release_status(sim, status):
    """Set the latest revision of the gpu-operator release to `status`, in its Helm storage Secret
    (data.release is base64(gzip(JSON)), the label repeats the status), as a helm run killed
    mid-upgrade leaves it; returns the status it had."""
    secrets = kget(sim, "secrets", "-n", NS, "-l", "owner=helm,name=gpu-operator")["items"]
    latest = max(secrets, key=lambda s: int(s["metadata"]["labels"]["version"]))
    release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(latest["data"]["release"]))))
    before = release["info"]["status"]
    release["info"]["status"] = status
    latest["data"]["release"] = base64.b64encode(base64.b64encode(
        gzip.compress(json.dumps(release).encode()))).decode()
    latest["metadata"]["labels"]["status"] = status
    sim.run(os.path.join(BIN, "kubectl"), "replace", "-f", "-", input=json.dumps(latest))
    return before


def test_a_release_left_pending_is_refused_with_the_fix(airgap):
    """An interrupted upgrade leaves the latest revision pending-upgrade; Helm would refuse every
    operation on it ("another operation is in progress"). The role's one read finds it and names the fix."""
    sim, archive, plan = airgap
    if sim.run(os.path.join(BIN, "helm3"), "status", "gpu-operator", "-n", NS, check=False).returncode != 0:
        assert play(sim, base_vars(sim, archive, plan, gpu_operator_image_mirror=MIRROR,
                                   gpu_operator_image_pull_secrets=["regcred"])).rc == 0
    before = _set_release_status(sim, "pending-upgrade")
    try:
        res = play(sim, base_vars(sim, archive, plan, gpu_operator_image_mirror=MIRROR,
                                  gpu_operator_image_pull_secrets=["regcred"]))
        assert res.rc != 0, res
        assert res.changed() == 0, res
        msgs = res.failure_messages()
        assert any("is pending-upgrade: an earlier helm run was interrupted" in m and
                   "`helm rollback gpu-operator -n %s`" % NS in m for m in msgs), msgs
    finally:
        _set_release_status(sim, before)


def test_archive_of_another_version_is_refused(airgap, tmp_path_factory):
    sim, archive, plan = airgap
    res = play(sim, base_vars(sim, archive, plan, gpu_operator_chart_version="v26.8.0"))
    assert res.rc != 0
    assert any("not gpu-operator v26.8.0" in m for m in res.failure_messages()), res


def test_unpinned_version_and_bad_values_are_refused_before_any_change(airgap):
    sim, archive, plan = airgap
    for bad, needle in ((dict(gpu_operator_chart_version="latest"), "must pin a released chart version"),
                        (dict(gpu_operator_values={"driver": {"nvidiaDriverCRD": {"enabled": True}}}),
                         "gpu-operator#1795"),
                        (dict(gpu_operator_values={"devicePlugins": {}}), "did you mean devicePlugin")):
        vars_ = base_vars(sim, archive, plan, gpu_operator_namespace="never-created")
        vars_.update(bad)
        res = play(sim, vars_)
        assert res.rc != 0
        assert any(needle in m for m in res.failure_messages()), (needle, res)
        assert kget(sim, "namespace", "never-created") is None


# --- cluster_policy_wait: failure diagnostics and watch latency ------------------------------------

@pytest.fixture(scope="module")
def crashloop(tmp_path_factory):
    nodes = [gpu_node("gpu-a", "550.54.15")]
    sim = start_cluster(tmp_path_factory, "crash", nodes, faults={"operator_validator_crashloop": ["gpu-a"]})
    try:
        yield sim, package_chart(tmp_path_factory), plan_for(nodes)
    finally:
        sim.stop()


def test_wait_failure_names_the_crashing_validator(crashloop):
    sim, archive, plan = crashloop
    res = play(sim, base_vars(sim, archive, plan, gpu_operator_wait_timeout=4))
    assert res.rc != 0
    waited = wait_result(res)
    assert waited["ready"] is False and waited["state"] == "notReady"
    text = "\n".join(waited["diagnostics"])
    assert "states not ready" in text
    assert "nvidia-operator-validator" in text and "unavailable" in text
    assert "Init:CrashLoopBackOff" in text
    assert "hint:" in text and "kubectl logs -n gpu-operator" in text
    assert waited["waited"] >= 4      # it gave up at its timeout (the run ending at all says it did not hang)


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """CRD but no operator Deployment: nothing reconciles, the test drives the status."""
    sim = start_cluster(tmp_path_factory, "bare", [gpu_node("gpu-a")])
    try:
        yield sim
    finally:
        sim.stop()


def test_wait_watches_creation_and_status_changes(bare):
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.cluster_policy import ClusterPolicyWaiter
    dyn = bare.dynamic()
    api = dyn.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    waiter = ClusterPolicyWaiter(dyn, "cluster-policy")
    out = {}

    def run():
        out["result"] = waiter.wait(20)
        out["at"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)  # the object does not exist yet
    spec = charts.by_kind(charts.render(real_chart(), release="x", namespace=None), "ClusterPolicy")[0]
    body = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": spec["spec"]}
    api.create(body)
    cond = {"lastTransitionTime": "2026-01-01T00:00:00Z", "message": "", "observedGeneration": 1}

    def set_status(state, ready_status, reason):
        obj = api.get(name="cluster-policy").to_dict()
        obj["status"] = {"state": state, "namespace": NS, "conditions": [
            dict(cond, type="Ready", status=ready_status, reason=reason),
            dict(cond, type="Error", status="False" if ready_status == "True" else "True", reason=reason)]}
        api.status.replace(body=obj)

    time.sleep(0.5)
    set_status("ready", "True", "NoGPUNodes")  # FACTS.md trap: ready but serving nothing
    time.sleep(1.0)
    assert thread.is_alive(), "NoGPUNodes must not count as ready by default"
    changed_at = time.monotonic()
    set_status("ready", "True", "Reconciled")
    thread.join(10)
    done, obj, summary, waited = out["result"]
    assert done and summary["reason"] == "Reconciled"
    assert out["at"] - changed_at < 1.0, "the watch must return within a second of the change"
    assert waited < 20
