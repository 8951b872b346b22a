"""The GPU Operator twin with a GPUCluster (DRA stack) and the DRA driver twin's ResourceSlices.

Cluster tests/clusters/dra.yaml on the real store: the operator Deployment as the chart renders
it, the GPUCluster CRD from the chart v26.7.0 (crds/nvidia.com_gpuclusters.yaml), and the
GPUCluster CR with the spec the chart renders for gpuCluster.deployCR=true.
"""

import pytest

from simcluster.errors import ApiError
from simcluster.twins import gpu_cluster as gc_state
from simcluster.twins.dra_driver import gpu_uuid
from simcluster.twins.gpu_operator import image_crd_files
from simcluster.twins.testkit import CP, TwinCluster, chart_workloads, cluster_policy

GC = "gpuclusters.nvidia.com"
SLICES = "resourceslices.resource.k8s.io"
CRD = "customresourcedefinitions.apiextensions.k8s.io"
NS = "gpu-operator"


def chart_gpu_cluster():
    """The GPUCluster `helm template` renders from the chart v26.7.0 with gpuCluster.deployCR=true,
    clusterPolicy.deployCR=false (driver.enabled=false; labels and annotations left out; checked by
    test_the_gpu_cluster_used_here_is_what_the_chart_renders)."""
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": {"name": "gpu-cluster"},
            "spec": {"daemonsets": {"annotations": {}, "labels": {}, "priorityClassName": "system-node-critical",
                                    "rollingUpdate": {"maxUnavailable": "1"},
                                    "tolerations": [{"effect": "NoSchedule", "key": "nvidia.com/gpu",
                                                     "operator": "Exists"}],
                                    "updateStrategy": "RollingUpdate"},
                     "dcgm": {"enabled": False, "image": "dcgm", "imagePullPolicy": "IfNotPresent",
                              "repository": "nvcr.io/nvidia/cloud-native", "version": "4.6.0-1-ubuntu24.04"},
                     "dcgmExporter": {"enabled": True, "image": "dcgm-exporter", "imagePullPolicy": "IfNotPresent",
                                      "repository": "nvcr.io/nvidia/k8s", "version": "4.6.0-4.8.3-distroless",
                                      "service": {"internalTrafficPolicy": "Cluster"},
                                      "serviceMonitor": {"additionalLabels": {}, "enabled": True,
                                                         "honorLabels": False, "interval": "15s",
                                                         "relabelings": [], "scrapeTimeout": "10s"}},
                     "draDriver": {"computeDomains": {"enabled": True}, "image": "dra-driver-nvidia-gpu",
                                   "imagePullPolicy": "IfNotPresent", "repository": "nvcr.io/nvidia",
                                   "version": "v0.5.0"},
                     "hostPaths": {"driverInstallDir": "/run/nvidia/driver"}}}


def start(operator=True, cluster=True):
    return start_with(operator=operator, cluster=cluster)


def start_with(operator=True, cluster=True, **spec_over):
    c = TwinCluster("dra.yaml", store="real", **spec_over)
    files = image_crd_files("v26.7.0")
    if "nvidia.com_gpuclusters.yaml" not in files:
        c.handle.stop()
        pytest.skip("chart gpu-operator-v26.7.0.tgz not found (../shared next to the repo?)")
    for crd in files["nvidia.com_gpuclusters.yaml"]:
        c.store.create(CRD, crd)
    c.namespace(NS, {"pod-security.kubernetes.io/enforce": "privileged"})
    c.ns = NS
    if operator:
        for obj in chart_workloads(NS):
            c.store.create("deployments.apps" if obj["kind"] == "Deployment" else "daemonsets.apps", obj)
    if cluster:
        c.store.create(GC, chart_gpu_cluster())
    return c


def gc_of(c):
    return c.store.get(GC, None, "gpu-cluster")


def state(c):
    return ((gc_of(c) or {}).get("status") or {}).get("state")


def cond(obj, ctype):
    return next((x for x in (obj.get("status") or {}).get("conditions") or [] if x["type"] == ctype), None)


def slices(c, node=None):
    return [s for s in c.store.list(SLICES) if node is None or s["spec"].get("nodeName") == node]


def plugin_ready(c):
    ds = c.store.get("daemonsets.apps", NS, gc_state.KUBELET_PLUGIN)
    return ds is not None and (ds.get("status") or {}).get("numberAvailable") == 4


@pytest.fixture(scope="module")
def ready():
    c = start()
    try:
        c.wait(lambda: plugin_ready(c), 15, "kubelet plugin on the 4 GPU nodes")
        c.wait(lambda: len(slices(c)) == 4, 10, "4 ResourceSlices")
        yield c
    finally:
        c.handle.stop()


def test_finalizer_and_admin_access_namespace_label(ready):
    gc = gc_of(ready)
    assert gc_state.FINALIZER in gc["metadata"]["finalizers"]
    assert gc["status"]["namespace"] == NS
    ns = ready.store.get("namespaces", None, NS)
    assert ns["metadata"]["labels"][gc_state.ADMIN_ACCESS_LABEL] == "true"


def test_status_and_conditions_as_the_operator_sets_them(ready):
    # the validator and the exporter run on admin-access claims (a device in use stays allocatable)
    ready.wait(lambda: state(ready) == "ready", 10, "GPUCluster ready")
    gc = gc_of(ready)
    assert gc["status"]["state"] == "ready" and gc["status"]["namespace"] == NS
    assert cond(gc, "Ready")["status"] == "True" and cond(gc, "Ready")["reason"] == "Reconciled"
    assert cond(gc, "Ready")["message"] == "All resources have been successfully reconciled"
    assert cond(gc, "Error")["status"] == "False" and cond(gc, "Error")["reason"] == "Ready"


def dra_nodes(**changes):
    """dra.yaml's nodes with some facts changed: {node: {fact: value}}."""
    import os

    from simcluster import clusterfile
    from simcluster.twins.testkit import CLUSTERS
    nodes = clusterfile.load(os.path.join(CLUSTERS, "dra.yaml"))["nodes"]
    for n in nodes:
        n.update(changes.get(n["name"].replace("-", "_"), {}))
    return nodes


def test_a_node_without_driver_keeps_the_plugin_waiting_and_the_gpu_cluster_not_ready():
    # the GPUCluster stack installs no driver: the plugin's driver-validation init container waits
    c = start_with(nodes=dra_nodes(gpu_l40s_1={"host_driver": None}))
    try:
        gc = c.wait(lambda: (cond(gc_of(c) or {}, "Error") or {}).get("reason") == "OperandNotReady" and gc_of(c), 10)
        assert gc["status"]["state"] == "notReady"
        assert (cond(gc, "Error")["status"], cond(gc, "Error")["message"]) == (
            "True", "Waiting for operand pods to be ready")
        assert (cond(gc, "Ready")["status"], cond(gc, "Ready")["reason"]) == ("False", "Error")
        c.wait(lambda: len(slices(c)) == 3, 10)
        c.settle()
        assert not slices(c, "gpu-l40s-1")
        pod = c.operand_pods(gc_state.KUBELET_PLUGIN, "gpu-l40s-1")[0]
        assert pod["status"]["phase"] == "Pending"
        assert state(c) == "notReady"
    finally:
        c.handle.stop()


def test_state_objects_deployed(ready):
    store = ready.store
    assert sorted(d["metadata"]["name"] for d in store.list("deviceclasses.resource.k8s.io")) == [
        "compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com", "gpu.nvidia.com",
        "mig.nvidia.com", "vfio.gpu.nvidia.com"]
    ds = sorted(d["metadata"]["name"] for d in store.list("daemonsets.apps", NS))
    assert ds == ["gpu-operator-node-feature-discovery-worker", "nvidia-dcgm-exporter-dra",
                  "nvidia-dra-driver-kubelet-plugin", "nvidia-dra-validator"]
    assert store.get("deployments.apps", NS, "nvidia-dra-driver-controller") is not None
    assert sorted(t["metadata"]["name"] for t in store.list("resourceclaimtemplates.resource.k8s.io", NS)) == [
        "nvidia-dcgm-exporter-admin", "nvidia-dra-validator-gpu"]
    plugin = store.get("daemonsets.apps", NS, "nvidia-dra-driver-kubelet-plugin")
    assert plugin["metadata"]["ownerReferences"][0]["kind"] == "GPUCluster"
    image = plugin["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0"
    assert plugin["status"]["numberAvailable"] == 4      # the four GPU nodes, not cpu-1


def test_node_labels_of_the_dra_stack(ready):
    labels = ready.labels("gpu-h100-1")
    for key in gc_state.STATE_LABELS:
        assert labels[key] == "true"
    assert "nvidia.com/gpu.deploy.device-plugin" not in labels
    assert "nvidia.com/gpu.deploy.container-toolkit" not in labels
    assert not any(k.startswith("nvidia.com/gpu.deploy.") for k in ready.labels("cpu-1"))


def test_no_device_plugin_resources_in_dra_mode(ready):
    for node in ("gpu-h100-1", "gpu-l40s-1", "gpu-h100-mig-1"):
        assert ready.allocatable(node) in (None, "0")
    assert not ready.operand_pods("nvidia-device-plugin-daemonset")


def test_one_slice_per_gpu_node_with_the_driver_pool_and_owner(ready):
    assert sorted(s["spec"]["nodeName"] for s in slices(ready)) == [
        "gpu-h100-1", "gpu-h100-2", "gpu-h100-mig-1", "gpu-l40s-1"]
    s = slices(ready, "gpu-h100-1")[0]
    assert s["metadata"]["name"].startswith("00000-gpu.nvidia.com-gpu-h100-1-")
    assert s["spec"]["driver"] == "gpu.nvidia.com"
    assert s["spec"]["pool"] == {"name": "gpu-h100-1", "generation": 1, "resourceSliceCount": 1}
    owner = s["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Node", "gpu-h100-1", True)


def test_whole_gpu_devices(ready):
    devices = slices(ready, "gpu-h100-1")[0]["spec"]["devices"]
    assert [d["name"] for d in devices] == ["gpu-%d" % i for i in range(8)]
    d = devices[3]
    attrs = d["attributes"]
    assert attrs["type"] == {"string": "gpu"}
    assert attrs["uuid"] == {"string": gpu_uuid("gpu-h100-1", 3)}
    assert attrs["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert attrs["architecture"] == {"string": "Hopper"}
    assert attrs["brand"] == {"string": "Nvidia"}
    assert attrs["cudaComputeCapability"] == {"version": "9.0.0"}
    assert attrs["driverVersion"] == {"version": "580.95.5"}      # semver-normalised 580.95.05
    assert attrs["cudaDriverVersion"] == {"version": "13.0.0"}
    assert attrs["resource.kubernetes.io/pciBusID"] == {"string": "0000:48:00.0"}
    assert "resource.kubernetes.io/pcieRoot" in attrs
    assert d["capacity"] == {"memory": {"value": "81559Mi"}}
    l40s = slices(ready, "gpu-l40s-1")[0]["spec"]["devices"]
    assert len(l40s) == 4 and l40s[0]["attributes"]["architecture"] == {"string": "Ada Lovelace"}


def test_mig_gpu_publishes_only_its_mig_devices(ready):
    devices = slices(ready, "gpu-h100-mig-1")[0]["spec"]["devices"]
    names = [d["name"] for d in devices]
    # GPU 0 as all-balanced on an H100 80GB (2x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb), GPU 1 whole
    assert "gpu-0" not in names and "gpu-1" in names and len(names) == 5
    mig = [d for d in devices if d["attributes"]["type"] == {"string": "mig"}]
    assert sorted(d["attributes"]["profile"]["string"] for d in mig) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    three = next(d for d in mig if d["name"].startswith("gpu-0-mig-3g40gb-9-"))
    assert three["attributes"]["parentUUID"] == {"string": gpu_uuid("gpu-h100-mig-1", 0)}
    assert three["attributes"]["uuid"]["string"].startswith("MIG-")
    assert three["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert three["capacity"]["multiprocessors"] == {"value": "60"}
    assert three["capacity"]["memory"] == {"value": "40320Mi"}
    assert sum(1 for k in three["capacity"] if k.startswith("memorySlice")) == 4
    assert "pcieRoot" not in " ".join(three["attributes"])      # MIG devices carry the bus id only
    # the memory slices of the GPU's devices never overlap and fill its 8 slices
    used = [k for d in mig for k in d["capacity"] if k.startswith("memorySlice")]
    assert len(used) == len(set(used)) == 8
    assert [n for n in names if n.startswith("gpu-0-mig-1g10gb-19-")] == sorted(
        n for n in names if n.startswith("gpu-0-mig-1g10gb-19-"))


def test_node_with_every_gpu_in_mig_mode_keeps_the_gpu_cluster_not_ready():
    c = start_with(nodes=dra_nodes(gpu_h100_mig_1={"mig_config": "all-balanced"}))
    try:
        c.wait(lambda: len(slices(c)) == 4, 15)
        devices = slices(c, "gpu-h100-mig-1")[0]["spec"]["devices"]
        assert all(d["attributes"]["type"] == {"string": "mig"} for d in devices) and len(devices) == 8
        # the validator's claim (one whole GPU, class gpu.nvidia.com) finds no device on that node
        pod = c.wait(lambda: next((p for p in c.operand_pods(gc_state.VALIDATOR)
                                   if "gpu-h100-mig-1" in str(p["spec"].get("affinity"))), None), 10)
        c.settle()
        assert (c.pod(NS, pod["metadata"]["name"]).get("status") or {}).get("phase") == "Pending"
        assert state(c) == "notReady"
    finally:
        c.handle.stop()


def test_slices_only_while_the_kubelet_plugin_runs():
    c = start(operator=False)
    try:
        c.settle()
        assert slices(c) == []                       # no operator, no plugin, no slices
        for obj in chart_workloads(NS):
            c.store.create("deployments.apps" if obj["kind"] == "Deployment" else "daemonsets.apps", obj)
        c.wait(lambda: len(slices(c)) == 4, 15, "slices once the plugin runs")
        # the plugin pod gone from a node (deploy label paused by hand): its slice goes
        c.label("gpu-l40s-1", {gc_state.DRA_DRIVER_LABEL: "false"})
        c.wait(lambda: not slices(c, "gpu-l40s-1"), 10, "slice withdrawn")
        assert len(slices(c)) == 3
    finally:
        c.handle.stop()


def test_both_crs_refused_with_the_operators_messages():
    c = start()
    try:
        c.wait(lambda: plugin_ready(c), 15)
        c.store.create(CP, cluster_policy())
        gc = c.wait(lambda: (cond(gc_of(c), "Error") or {}).get("reason") == "PrerequisiteNotMet" and gc_of(c), 10)
        assert gc["status"]["state"] == "notReady"
        err = cond(gc, "Error")
        assert (err["reason"], err["message"]) == (
            "PrerequisiteNotMet", 'A ClusterPolicy CR "cluster-policy" exists; a ClusterPolicy CR and '
            'GPUCluster CR may not exist at the same time')
        cp = c.wait(lambda: (c.policy().get("status") or {}).get("state") == "notReady" and c.policy())
        assert cond(cp, "Error")["reason"] == "ReconcileFailed"
        assert cond(cp, "Error")["message"] == ('conflicting GPUCluster resource "gpu-cluster" detected; '
                                                'ClusterPolicy and GPUCluster cannot co-exist')
        # neither stack changes what is deployed
        c.settle()
        assert c.store.get("daemonsets.apps", NS, "nvidia-device-plugin-daemonset") is None
        assert c.store.get("daemonsets.apps", NS, "nvidia-dra-driver-kubelet-plugin") is not None
    finally:
        c.handle.stop()


def test_deleting_the_gpu_cluster_drains_claim_consumers_then_releases_it():
    c = start()
    try:
        c.wait(lambda: plugin_ready(c), 15)
        c.store.delete(GC, None, "gpu-cluster")
        c.wait(lambda: gc_of(c) is None, 15, "GPUCluster gone")
        assert c.events(reason="DrainingClaimConsumers")
        c.wait(lambda: c.store.get("daemonsets.apps", NS, "nvidia-dra-driver-kubelet-plugin") is None, 10)
        c.wait(lambda: not slices(c), 10, "slices withdrawn with the plugin")
    finally:
        c.handle.stop()


def test_switch_back_to_the_cluster_policy_sweeps_the_dra_labels():
    c = start()
    try:
        c.wait(lambda: plugin_ready(c), 15)
        c.store.delete(GC, None, "gpu-cluster")
        c.wait(lambda: gc_of(c) is None, 15)
        c.store.create(CP, cluster_policy(driver={"enabled": False}))
        c.wait(lambda: c.labels("gpu-h100-1").get("nvidia.com/gpu.deploy.device-plugin") == "true", 10)
        c.wait(lambda: gc_state.DRA_DRIVER_LABEL not in c.labels("gpu-h100-1"), 10, "DRA labels swept")
        assert not any(k in c.labels("gpu-h100-1") for k in gc_state.DRA_ONLY_LABELS)
    finally:
        c.handle.stop()


def test_singleton_name_enforced_by_the_crd():
    c = start(cluster=False)
    try:
        bad = chart_gpu_cluster()
        bad["metadata"]["name"] = "other"
        with pytest.raises(ApiError) as err:
            c.store.create(GC, bad)
        assert "GPUCluster is a singleton, metadata.name must be 'gpu-cluster'" in err.value.message
    finally:
        c.handle.stop()


def test_gpu_cluster_render_uses_the_served_dra_api():
    from simcluster.registry import Registry
    assert Registry(kubernetes_version="v1.33.5").lookup("resource.k8s.io", "v1", "deviceclasses") is None
    assert Registry(kubernetes_version="v1.34.2").lookup("resource.k8s.io", "v1", "deviceclasses") is not None


def test_gpu_cluster_on_a_cluster_without_dra_fails_its_driver_state():
    from simcluster.registry import Registry
    c = start(cluster=False)
    try:
        # a 1.33 API server: no resource.k8s.io (the CRDs stay served)
        old = Registry(kubernetes_version="v1.33.5")
        old.sync_crds(c.store.list(CRD))
        c.store.registry = old
        c.store.create(GC, chart_gpu_cluster())
        c.wait(lambda: state(c) == "notReady", 10)
        err = cond(gc_of(c), "Error")
        assert err["reason"] == "ReconcileFailed"
        assert err["message"] == (
            "Error syncing state state-dra-driver: failed to create k8s objects from manifests: failed to get "
            "DRA resource apiVersion: the resource.k8s.io DeviceClass API is not served by the cluster; ensure "
            "Dynamic Resource Allocation is enabled on the API server and kubelet")
    finally:
        c.handle.stop()


def test_chart_pre_delete_hook_deletes_the_gpu_cluster_and_waits():
    c = start()
    try:
        c.wait(lambda: plugin_ready(c), 15)
        # the chart's gpu-operator-cleanup-gpucluster hook Job, as a bare pod
        c.store.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": "cleanup-gpucluster", "namespace": NS},
                                "spec": {"restartPolicy": "OnFailure", "containers": [{
                                    "name": "cleanup-gpucluster", "image": "nvcr.io/nvidia/gpu-operator:v26.7.0",
                                    "command": ["/usr/bin/cleanup-gpuclusters", "--gpucluster-name",
                                                "gpu-cluster"]}]}})
        c.wait(lambda: (c.pod(NS, "cleanup-gpucluster").get("status") or {}).get("phase") == "Succeeded", 15)
        assert gc_of(c) is None
        assert "GPUCluster gpu-cluster deleted" in c.logs(NS, "cleanup-gpucluster", "cleanup-gpucluster")
    finally:
        c.handle.stop()


def claim_pod(c, name, template_name, ns="team-a"):
    c.namespace(ns)
    return c.store.create("pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"restartPolicy": "Never",
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
                 "containers": [{"name": "main", "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                                 "resources": {"claims": [{"name": "gpu"}]}}]}})


def claim_template(c, name, klass, expression, ns="team-a"):
    c.namespace(ns)
    return c.store.create("resourceclaimtemplates.resource.k8s.io", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": klass, "selectors": [{"cel": {"expression": expression}}]}}]}}}})


def test_claims_on_the_published_slices(ready):
    """The allocator and kubelet twins on what the DRA driver twin publishes: a MIG profile by its
    attribute runs where a node has it, a profile no node has stays Pending, a product by name."""
    c = ready
    claim_template(c, "mig-3g", "mig.nvidia.com", "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'")
    claim_template(c, "mig-7g", "mig.nvidia.com", "device.attributes['gpu.nvidia.com'].profile == '7g.80gb'")
    claim_template(c, "l40s", "gpu.nvidia.com",
                   "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L40S'")
    for name, tpl in (("on-mig", "mig-3g"), ("no-7g", "mig-7g"), ("on-l40s", "l40s")):
        claim_pod(c, name, tpl)
    c.wait(lambda: (c.pod("team-a", "on-mig").get("status") or {}).get("phase") == "Succeeded", 10)
    c.wait(lambda: (c.pod("team-a", "on-l40s").get("status") or {}).get("phase") == "Succeeded", 10)
    assert c.pod("team-a", "on-mig")["spec"]["nodeName"] == "gpu-h100-mig-1"
    assert c.pod("team-a", "on-l40s")["spec"]["nodeName"] == "gpu-l40s-1"
    assert "Test PASSED" in c.logs("team-a", "on-mig", "main")
    pending = c.wait(lambda: next((x for x in (c.pod("team-a", "no-7g").get("status") or {}).get("conditions")
                                   or [] if x["type"] == "PodScheduled" and x["status"] == "False"), None), 10)
    assert "cannot allocate all claims" in pending["message"]


def test_a_gpu_cluster_deleted_next_to_a_cluster_policy_still_goes():
    c = start()
    try:
        c.wait(lambda: plugin_ready(c), 15)
        c.store.create(CP, cluster_policy())
        c.wait(lambda: (cond(gc_of(c), "Error") or {}).get("reason") == "PrerequisiteNotMet", 10)
        c.store.delete(GC, None, "gpu-cluster")
        c.wait(lambda: gc_of(c) is None, 15, "GPUCluster gone despite the ClusterPolicy")
        # then the ClusterPolicy stack takes over
        c.wait(lambda: c.labels("gpu-h100-1").get("nvidia.com/gpu.deploy.device-plugin") == "true", 10)
    finally:
        c.handle.stop()


def test_the_gpu_cluster_used_here_is_what_the_chart_renders():
    from kit import charts
    from simcluster.twins.testkit import CHART
    docs = charts.render(CHART, {"gpuCluster": {"deployCR": True}, "clusterPolicy": {"deployCR": False},
                                 "driver": {"enabled": False}},
                         args=["--api-versions", "resource.k8s.io/v1/DeviceClass"])
    rendered = charts.by_kind(docs, "GPUCluster")
    assert [d["metadata"]["name"] for d in rendered] == ["gpu-cluster"]
    assert rendered[0]["apiVersion"] == "nvidia.com/v1alpha1"
    assert rendered[0]["spec"] == chart_gpu_cluster()["spec"]
    assert not charts.by_kind(docs, "ClusterPolicy")
    crd = image_crd_files("v26.7.0")["nvidia.com_gpuclusters.yaml"][0]
    assert (crd["spec"]["group"], crd["spec"]["scope"], crd["spec"]["names"]["kind"]) == (
        "nvidia.com", "Cluster", "GPUCluster")


def test_a_restarted_plugin_republishes_a_changed_mig_layout_with_the_next_generation():
    c = start()
    try:
        c.wait(lambda: plugin_ready(c), 15)
        c.wait(lambda: slices(c, "gpu-h100-mig-1"), 10)
        # the MIG layout changes under the running plugin (an administrator's nvidia-smi): the
        # plugin read NVML at start, so nothing changes until its pod is replaced
        c.handle.ctx.mig.layouts["gpu-h100-mig-1"] = [None, None]
        c.settle()
        assert slices(c, "gpu-h100-mig-1")[0]["spec"]["pool"]["generation"] == 1
        pod = c.operand_pods(gc_state.KUBELET_PLUGIN, "gpu-h100-mig-1")[0]
        c.store.delete("pods", NS, pod["metadata"]["name"])
        s = c.wait(lambda: next((x for x in slices(c, "gpu-h100-mig-1")
                                 if x["spec"]["pool"]["generation"] == 2), None), 15, "generation 2")
        assert [d["name"] for d in s["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    finally:
        c.handle.stop()


def test_from_the_cluster_policy_to_the_gpu_cluster_the_device_plugin_resources_drop_to_zero():
    c = start(cluster=False)
    try:
        c.store.create(CP, cluster_policy(driver={"enabled": False}))
        c.wait(lambda: c.allocatable("gpu-h100-1") == "8", 15, "device plugin advertising 8 GPUs")
        c.store.delete(CP, None, "cluster-policy")
        c.store.create(GC, chart_gpu_cluster())
        c.wait(lambda: c.allocatable("gpu-h100-1") == "0", 15, "allocatable 0 without a device plugin")
        c.wait(lambda: len(slices(c)) == 4, 15)
        labels = c.labels("gpu-h100-1")
        assert "nvidia.com/gpu.deploy.device-plugin" not in labels
        assert labels[gc_state.DRA_DRIVER_LABEL] == "true"
        # kubelet keeps the extended resource's capacity until it restarts
        assert c.node("gpu-h100-1")["status"]["capacity"]["nvidia.com/gpu"] == "8"
    finally:
        c.handle.stop()
