"""Integration: the design feeds the mig role, and every team's job template runs in the simulated cluster.

Inventory: tests/integration/design_inventory (two H100 nodes, one L40S node, three teams,
queue backend none so the default scheduler places everything). The KAI and Kueue variants
of the templates are validated by the API server (dry run) until their scheduling twins exist.
"""
import atexit
import os
import shutil
import tempfile
import time

import pytest
import yaml

from kit.paths import CLUSTERPOLICY_CRD as CRD, REPO
from kit.playbook import CLUSTER_DEFAULTS, run_playbook

INVENTORY = os.path.join(REPO, "tests", "integration", "design_inventory")
EXAMPLE = os.path.join(REPO, "inventories", "example")
REPORT = os.path.join(REPO, "playbooks", "design_report.yml")
MIG = os.path.join(REPO, "playbooks", "mig.yml")
OPERATOR_NS = "gpu-operator"
TEAMS = ("team-a", "team-b", "team-c")

CLUSTER = """\
crds: [%s]
# the templates' claims (checkpoints, data) bind through a default class, as a CSI driver's install gives
storage_classes:
  - {name: standard, default: true}
nodes:
  - name: gpu-h100-1
    gpus: {model: NVIDIA-H100-80GB-HBM3, count: 2, mig_capable: true}
    host_driver: "550.54.15"
    host_toolkit: true
    labels: {gpu.skaffon.io/accelerator: h100, gpu.skaffon.io/workload: training, gpu.skaffon.io/trust: mixed}
    taints: [{key: gpu.skaffon.io/workload, value: training, effect: NoSchedule}]
  - name: gpu-h100-2
    gpus: {model: NVIDIA-H100-80GB-HBM3, count: 2, mig_capable: true}
    host_driver: "550.54.15"
    host_toolkit: true
    labels: {gpu.skaffon.io/accelerator: h100, gpu.skaffon.io/workload: training, gpu.skaffon.io/trust: mixed}
    taints: [{key: gpu.skaffon.io/workload, value: training, effect: NoSchedule}]
  - name: gpu-l40s-1
    gpus: {model: NVIDIA-L40S, count: 4}
    host_driver: "550.54.15"
    host_toolkit: true
    labels: {gpu.skaffon.io/accelerator: l40s, gpu.skaffon.io/workload: inference, gpu.skaffon.io/trust: single}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  - name: cpu-1
"""


def _cluster_file():
    folder = tempfile.mkdtemp(prefix="design-cluster-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "design.yaml")
    with open(path, "w") as handle:
        handle.write(CLUSTER % CRD)
    return path


pytestmark = [
    pytest.mark.needs_shared,
    pytest.mark.cluster(_cluster_file()),
]


def wait(what, fn, timeout=60):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def install_operator(sim):
    """What the gpu-operator chart creates that matters here (strategy mixed, as the design says);
    operand DaemonSets tolerate the pools' taints, as the inventory's operator values must."""
    from kubernetes import client
    api = sim.api_client()
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": OPERATOR_NS, "labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}}})
    from simcluster.twins.testkit import chart_workloads
    for obj in chart_workloads(OPERATOR_NS):     # the real chart's operator + NFD workloads
        if obj["kind"] == "Deployment":
            apps.create_namespaced_deployment(OPERATOR_NS, obj)
        else:   # the NFD worker tolerates the pools' taints, as the operator role's values make it
            obj["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
            apps.create_namespaced_daemon_set(OPERATOR_NS, obj)
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"operator": {}, "daemonsets": {"tolerations": [{"operator": "Exists"}]},
                 "dcgm": {"enabled": False}, "dcgmExporter": {"enabled": True}, "devicePlugin": {"enabled": True},
                 "driver": {"enabled": False}, "toolkit": {"enabled": False}, "gfd": {"enabled": True},
                 "nodeStatusExporter": {"enabled": False},
                 "migManager": {"enabled": True, "config": {"default": "all-disabled"}},
                 "mig": {"strategy": "mixed"}}})

    def ready():
        nodes = core.list_node().items
        alloc = dict((n.metadata.name, (n.status.allocatable or {}).get("nvidia.com/gpu")) for n in nodes)
        return alloc.get("gpu-l40s-1") == "4" and alloc.get("gpu-h100-1") == "2" and alloc.get("gpu-h100-2") == "2"
    wait("GPU operator twin to offer the GPUs", ready)
    for team in TEAMS:
        core.create_namespace({"metadata": {"name": team, "labels": {
            "gpu-platform.skaffon.io/team": team,
            "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})


@pytest.fixture(scope="module")
def designed(simcluster, tmp_path_factory):
    """Operator installed, the design report written, the design's MIG layout rolled out with the mig role."""
    install_operator(simcluster)
    out = str(tmp_path_factory.mktemp("design"))
    res = run_playbook(REPORT, simcluster.env, inventory=INVENTORY, extra_vars={"design_report_dir": out})
    assert res.rc == 0, res
    mig = run_playbook(MIG, simcluster.env, inventory=INVENTORY, extra_vars={"mig_batch_size": 1})
    assert mig.rc == 0, mig
    return simcluster, out, mig


def _core(sim):
    from kubernetes import client
    return client.CoreV1Api(sim.api_client())


def _apply(sim, path, *extra):
    return sim.run(os.path.join(REPO, ".venv", "bin", "kubectl"), "apply", "-f", path, *extra, check=False)


def _template(out, team, name):
    return os.path.join(out, "templates", team, name + ".yaml")


def test_the_design_feeds_the_mig_role(designed):
    sim, _, _ = designed
    core = _core(sim)
    labels = dict((n, core.read_node(n).metadata.labels) for n in ("gpu-h100-1", "gpu-h100-2"))
    # team-b's 7 x 1g.10gb on one node, team-a's 2 whole GPUs on the other (the report says so too)
    assert labels["gpu-h100-1"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert labels["gpu-h100-2"]["nvidia.com/mig.config"] == "all-disabled"
    alloc = core.read_node("gpu-h100-1").status.allocatable
    assert alloc.get("nvidia.com/mig-1g.10gb") == "14"
    assert "nvidia.com/mig.config" not in (core.read_node("gpu-l40s-1").metadata.labels or {})


ROLE_VALUES_PLAY = """\
- hosts: localhost
  gather_facts: false
""" + CLUSTER_DEFAULTS + """\
  tasks:
    - name: Read the nodes as the gpu_operator role does
      kubernetes.core.k8s_info:
        kind: Node
      register: nodes
    - name: Validate the design's values with the gpu_operator role's own filters
      ansible.builtin.set_fact:
        ts: >-
          {{ gpu_operator_time_slicing | skaffon.gpu_platform.time_slicing_config(
               nodes=nodes.resources, trust_label='gpu.skaffon.io/trust', mixed_trust_values=['mixed']) }}
    - name: Chart values
      ansible.builtin.set_fact:
        values: >-
          {{ {'driver_enabled': false, 'toolkit_enabled': false, 'node_labels': {}, 'warnings': [], 'errors': []}
             | skaffon.gpu_platform.gpu_operator_values(mig_strategy=gpu_operator_mig_strategy,
                 device_plugin_config={'name': ts.configmap, 'default': ts.default}) }}
    - name: Show them
      ansible.builtin.debug:
        msg: {placement: "{{ ts.placement }}", expected: "{{ ts.expected }}", mig: "{{ values.mig }}",
              device_plugin: "{{ values.devicePlugin.config }}", backend: "{{ tenants_queue_backend }}"}
"""


def test_the_design_feeds_the_gpu_operator_role_values(designed, tmp_path):
    """The time-slicing and MIG strategy values pass the gpu_operator role's own validation
    (trust check against the live nodes) and land in the chart values."""
    sim, _, _ = designed
    play = tmp_path / "values.yml"
    play.write_text(ROLE_VALUES_PLAY)
    res = run_playbook(str(play), sim.env, inventory=INVENTORY)
    assert res.rc == 0, res
    msg = res.task_results("Show them")[0]["msg"]
    assert msg["placement"] == {"gpu-l40s-1": "shared-4"}
    assert msg["expected"] == {"shared-4": {"resource": "nvidia.com/gpu", "replicas": 4, "strategy": "time-slicing"}}
    assert msg["mig"] == {"strategy": "mixed"}
    assert msg["device_plugin"]["name"] == "time-slicing-config"
    assert msg["backend"] == "none"


def test_single_gpu_job_of_every_team_runs_on_its_pool(designed):
    sim, out, _ = designed
    core = _core(sim)
    want_node = {"team-a": "gpu-h100-2", "team-b": "gpu-h100-1", "team-c": "gpu-l40s-1"}
    for team in TEAMS:
        assert _apply(sim, _template(out, team, "checkpoint-pvc")).returncode == 0
        res = _apply(sim, _template(out, team, "single-gpu-job"))
        assert res.returncode == 0, res.stderr
    for team in TEAMS:
        pod = wait("%s single-gpu pod to succeed" % team, lambda: next(
            (p for p in core.list_namespaced_pod(team, label_selector="job-name=%s-single-gpu" % team).items
             if p.status.phase == "Succeeded"), None))
        assert pod.spec.node_name == want_node[team]
        log = core.read_namespaced_pod_log(pod.metadata.name, team)
        assert log.rstrip().endswith("Test PASSED"), log
        limits = pod.spec.containers[0].resources.limits
        assert limits == pod.spec.containers[0].resources.requests
        assert pod.metadata.labels["gpu-platform.skaffon.io/team"] == team
        assert pod.metadata.labels["cost-center"]
    b = core.list_namespaced_pod("team-b", label_selector="job-name=team-b-single-gpu").items[0]
    assert b.spec.containers[0].resources.limits["nvidia.com/mig-1g.10gb"] == "1"


def test_inference_deployment_runs_on_a_slice_or_a_gpu(designed):
    sim, out, _ = designed
    from kubernetes import client
    apps = client.AppsV1Api(sim.api_client())
    for team in ("team-b", "team-c"):
        res = _apply(sim, _template(out, team, "inference-deployment"))
        assert res.returncode == 0, res.stderr
    for team in ("team-b", "team-c"):
        dep = apps.read_namespaced_deployment("%s-inference" % team, team)
        assert dep.spec.strategy.rolling_update.max_unavailable == 0
        wait("%s inference available" % team, lambda: (apps.read_namespaced_deployment(
            "%s-inference" % team, team).status.available_replicas or 0) == dep.spec.replicas)
    pod = _core(sim).list_namespaced_pod("team-b", label_selector="app.kubernetes.io/name=team-b-inference").items[0]
    assert pod.spec.node_name == "gpu-h100-1"
    assert pod.spec.containers[0].resources.limits["nvidia.com/mig-1g.10gb"] == "1"


def test_gang_job_runs_whole_with_the_default_scheduler(designed):
    sim, out, _ = designed
    core = _core(sim)
    res = _apply(sim, _template(out, "team-a", "gang-job"))
    assert res.returncode == 0, res.stderr

    def done():
        pods = core.list_namespaced_pod("team-a", label_selector="job-name=team-a-gang").items
        return len(pods) == 2 and all(p.status.phase == "Succeeded" for p in pods) and pods
    pods = wait("team-a gang pods to succeed", done)
    # team-a's whole GPUs are the all-disabled node of the design's layout
    assert {p.spec.node_name for p in pods} == {"gpu-h100-2"}
    assert [p.spec.containers[0].resources.limits["nvidia.com/gpu"] for p in pods] == ["1", "1"]
    from kubernetes import client
    job = client.BatchV1Api(sim.api_client()).read_namespaced_job("team-a-gang", "team-a")
    assert wait("Job status succeeded=2", lambda: client.BatchV1Api(sim.api_client()).read_namespaced_job(
        "team-a-gang", "team-a").status.succeeded == 2)
    assert job.spec.completion_mode == "Indexed"


def _render(tmp_path, sim, extra):
    out = str(tmp_path / ("report-%s" % extra.get("platform_requirements", {}).get("queue_backend", "x")))
    res = run_playbook(REPORT, sim.env, inventory=EXAMPLE, extra_vars=dict(extra, design_report_dir=out))
    assert res.rc == 0, res
    return out


@pytest.mark.parametrize("backend", ["kai", "kueue"])
def test_queue_backend_templates_are_accepted_by_the_api_server(designed, tmp_path, backend):
    """The KAI / Kueue variants (from the example inventory's design) pass server-side validation.
    They are not run: the KAI and Kueue scheduling twins are not part of this branch."""
    sim, _, _ = designed
    with open(os.path.join(EXAMPLE, "group_vars", "all", "platform_design.yml")) as handle:
        design = yaml.safe_load(handle)
    extra = {"platform_requirements": dict(design["platform_requirements"], queue_backend=backend)}
    if backend == "kueue":
        # KAI GPU fractions exist only in KAI: under Kueue the example's inference pool is time-sliced
        pools = design["platform_pools"]
        pools["pool_l40s_inference"] = dict((k, v) for k, v in pools["pool_l40s_inference"].items()
                                            if k not in ("allocation", "placement"))
        pools["pool_l40s_inference"].update(allocation="time-slicing", time_slicing_replicas=4)
        extra["platform_pools"] = pools
    out = _render(tmp_path, sim, extra)
    teams = sorted(os.listdir(os.path.join(out, "templates")))
    assert teams == ["team-inference", "team-nlp", "team-vision"]
    from kubernetes.client.rest import ApiException
    for team in teams:
        try:
            _core(sim).create_namespace({"metadata": {"name": team, "labels": {
                "pod-security.kubernetes.io/enforce": "baseline" if team == "team-nlp" else "restricted"}}})
        except ApiException as exc:
            assert exc.status == 409  # the other backend's run created it
    for team in teams:
        for name in ("checkpoint-pvc", "single-gpu-job", "gang-job", "inference-deployment", "fractional-inference",
                     "training-job", "nccl-allreduce-job", "data-stage-job", "load-job"):
            path = _template(out, team, name)
            # only for a team on a pool of KAI GPU fractions: the example's inference pool
            fraction = backend == "kai" and team == "team-inference"
            if name == "fractional-inference" and not fraction:
                assert not os.path.exists(path), path
                continue
            if not os.path.exists(path):    # multi-node templates: teams with whole GPUs only
                assert name in ("training-job", "nccl-allreduce-job") and team != "team-vision", path
                continue
            with open(path) as handle:
                docs = [d for d in yaml.safe_load_all(handle) if d]
            res = _apply(sim, path, "--dry-run=server")
            assert res.returncode == 0, (path, res.stderr)
            for doc in docs:
                if doc["kind"] not in ("Job", "Deployment") or name in ("data-stage-job", "load-job"):
                    continue    # no GPU: the stage and load Jobs go through no queue
                labels = doc["spec"]["template"]["metadata"]["labels"]
                if backend == "kai":
                    assert labels["kai.scheduler/queue"] == team
                    assert doc["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"
                else:
                    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == team
                    assert "schedulerName" not in doc["spec"]["template"]["spec"]
                if name == "fractional-inference":   # part of one GPU: KAI's annotation, no GPU request
                    pod = doc["spec"]["template"]
                    assert pod["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
                    assert "nvidia.com/gpu" not in str(pod["spec"]["containers"][0]["resources"])
                if name in ("gang-job", "training-job", "nccl-allreduce-job"):
                    if backend == "kai":
                        assert doc["metadata"]["annotations"]["kai.scheduler/batch-min-member"] == \
                            str(doc["spec"]["parallelism"])
                    else:
                        assert doc["spec"]["suspend"] is True

