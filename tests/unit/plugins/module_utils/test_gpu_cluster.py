"""GPUCluster readiness (the ClusterPolicy wait with another Stack) and the ResourceSlices per node:
what the DRA driver publishes, what a node needs to be claimable, why it is not."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import Kube
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import cluster_policy as cp
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import gpu_cluster as gc
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube
from ansible_collections.skaffon.gpu_platform.tests.unit.fakedynamic import Clock, FakeDynamic, FakeList, FakeResource


def gpucluster(state, reason, status="True", message=""):
    """Conditions as internal/conditions/gpucluster.go sets them: Ready/Error in pairs."""
    ready = {"type": "Ready", "status": status, "reason": reason if status == "True" else "Error",
             "message": message if status == "True" else ""}
    error = {"type": "Error", "status": "False" if status == "True" else "True",
             "reason": "Ready" if status == "True" else reason, "message": "" if status == "True" else message}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
            "metadata": {"name": "gpu-cluster", "generation": 1, "resourceVersion": "3"},
            "status": {"state": state, "namespace": "gpu-operator", "conditions": [ready, error]}}


PREREQ = 'A ClusterPolicy CR "cluster-policy" exists; a ClusterPolicy CR and GPUCluster CR may not exist at the same time'


def attrs(**values):
    out = {}
    for key, value in values.items():
        kind = "version" if key in ("driverVersion",) else "string"
        out[key] = {kind: value}
    return out


def gpu(index, uuid, product="NVIDIA H100 80GB HBM3"):
    return {"name": "gpu-%d" % index, "attributes": attrs(type="gpu", uuid=uuid, productName=product,
                                                          driverVersion="580.95.5"),
            "capacity": {"memory": {"value": "80Gi"}}}


def mig(parent_index, profile, parent_uuid, n):
    return {"name": "gpu-%d-mig-%s-%d-%d" % (parent_index, profile, 19, n),
            "attributes": attrs(type="mig", uuid="MIG-%s-%d" % (parent_uuid, n), parentUUID=parent_uuid,
                                profile=profile, productName="NVIDIA H100 80GB HBM3")}


def rslice(node, devices, generation=1, count=1, driver="gpu.nvidia.com", name=None):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name or "%s-%s-x" % (node, driver), "resourceVersion": "1"},
            "spec": {"driver": driver, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": count}}}


H100 = rslice("gpu-h100-1", [gpu(0, "GPU-a"), gpu(1, "GPU-b")])
H100_MIG = rslice("gpu-h100-2", [gpu(0, "GPU-c")] + [mig(1, "1g.10gb", "GPU-d", n) for n in range(7)])


def test_evaluate_reads_the_gpucluster_like_the_operator_writes_it():
    assert cp.evaluate(gpucluster("ready", "Reconciled"), stack=gc.GPU_CLUSTER)[0] is True
    done, summary = cp.evaluate(gpucluster("notReady", "PrerequisiteNotMet", "False", PREREQ), stack=gc.GPU_CLUSTER)
    assert not done and summary["reason"] == "PrerequisiteNotMet" and summary["message"] == PREREQ
    assert not cp.evaluate(gpucluster("notReady", "OperandNotReady", "False", "Waiting for operand pods to be ready"),
                           stack=gc.GPU_CLUSTER)[0]
    assert "GPUCluster gpu-cluster does not exist yet" in cp.evaluate(None, name="gpu-cluster", stack=gc.GPU_CLUSTER)[1][
        "message"]


def test_published_counts_gpus_mig_devices_by_profile_and_physical_gpus():
    report = gc.published([H100, H100_MIG, rslice("gpu-h100-1", [{"name": "channel-0"}], driver="compute-domain.nvidia.com")])
    assert report["gpu-h100-1"]["gpus"] == 2 and report["gpu-h100-1"]["physical_gpus"] == 2
    assert report["gpu-h100-2"]["mig"] == {"1g.10gb": 7}
    assert report["gpu-h100-2"]["physical_gpus"] == 2            # gpu-0 and the MIG parent
    assert report["gpu-h100-2"]["problems"] == []
    assert gc.node_problems("gpu-h100-2", report, {"gpu-h100-2": 2}) == []


def test_qualified_attribute_names_count_too():
    device = {"name": "gpu-0", "attributes": {"gpu.nvidia.com/type": {"string": "gpu"},
                                              "gpu.nvidia.com/uuid": {"string": "GPU-q"},
                                              "gpu.nvidia.com/productName": {"string": "NVIDIA L40S"}}}
    report = gc.published([rslice("gpu-l40s-1", [device])])
    assert report["gpu-l40s-1"]["gpus"] == 1 and report["gpu-l40s-1"]["problems"] == []


def test_only_the_newest_generation_counts_and_an_incomplete_pool_is_a_problem():
    old = rslice("n1", [gpu(0, "GPU-old")], generation=1, name="n1-old")
    new = rslice("n1", [gpu(0, "GPU-new")], generation=2, count=2, name="n1-new")
    report = gc.published([old, new])
    assert report["n1"]["physical_gpus"] == 1
    assert report["n1"]["problems"] == ["pool n1 generation 2 is incomplete: 1 of 2 ResourceSlices published"]


def test_node_problems_name_what_a_claim_would_miss():
    bare = rslice("n2", [{"name": "gpu-0", "attributes": attrs(type="mig", parentUUID="GPU-x")}])
    report = gc.published([H100, bare, rslice("n3", [])])
    assert gc.node_problems("n2", report) == ["device gpu-0 (type mig) lacks the attributes profile, productName"]
    assert gc.node_problems("n3", report) == ["its ResourceSlices list no GPU or MIG device"]
    assert gc.node_problems("n4", report) == ["no ResourceSlice of driver gpu.nvidia.com for the node"]
    assert gc.node_problems("gpu-h100-1", report, {"gpu-h100-1": 8}) == [
        "publishes 2 physical GPUs (gpu devices and MIG parents), the host reports 8"]


def node(name, labels=None, taints=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def plugin_pod(node_name, waiting=None):
    status = {"phase": "Running" if not waiting else "Pending",
              "conditions": [{"type": "Ready", "status": "False" if waiting else "True"}]}
    if waiting:
        status["containerStatuses"] = [{"name": "gpus", "state": {"waiting": {"reason": waiting}}}]
    return {"metadata": {"name": "nvidia-dra-driver-kubelet-plugin-x1", "namespace": "gpu-operator"},
            "spec": {"nodeName": node_name}, "status": status}


def test_why_no_slices_names_the_kubelet_plugin_first():
    gpu_labels = {"nvidia.com/gpu.present": "true"}
    why = gc.why_no_slices("n1", node("n1", gpu_labels), [], [], {})
    assert why[0] == "label nvidia.com/gpu.deploy.dra-driver=true is missing: the operator has not selected it for " \
                     "the DRA kubelet plugin"
    assert "no nvidia-dra-driver-kubelet-plugin pod runs on it" in why
    labels = dict(gpu_labels, **{"nvidia.com/gpu.deploy.dra-driver": "true"})
    why = gc.why_no_slices("n1", node("n1", labels), [], [plugin_pod("n1", "CrashLoopBackOff")], {},
                           logs={"nvidia-dra-driver-kubelet-plugin-x1": "failed to initialize NVML"})
    assert why[0] == ("DRA kubelet plugin pod nvidia-dra-driver-kubelet-plugin-x1 is CrashLoopBackOff: "
                      "last log line: failed to initialize NVML")
    ds = {"metadata": {"name": "nvidia-dra-driver-kubelet-plugin", "ownerReferences": [{"kind": "GPUCluster"}]},
          "spec": {"template": {"spec": {"tolerations": []}}}}
    taint = {"key": "gpu.skaffon.io/pool", "value": "h100", "effect": "NoSchedule"}
    why = gc.why_no_slices("n1", node("n1", labels, [taint]), [ds], [], {})
    assert why[0].startswith("taint gpu.skaffon.io/pool=h100:NoSchedule is not tolerated by "
                             "nvidia-dra-driver-kubelet-plugin")


# --- the wait through kube.Kube with a fake dynamic client ----------------------------


def make_watch(batches, clock, step=0.5):
    batches = list(batches)

    class W(object):
        def stream(self, func, **kw):
            batch = batches.pop(0) if batches else []
            for event in batch:
                clock.now += step
                yield event
            clock.now += kw["timeout_seconds"] if not batch else 0

        def stop(self):
            pass
    return W


def waiter(res, W, clock, **kw):
    kube = Kube(FakeDynamic(res), retry_seconds=5, sleep=clock.sleep, clock=clock)
    return gc.GPUClusterWaiter(kube, "gpu-cluster", watch_factory=W, clock=clock, **kw)


def test_wait_lasts_until_every_expected_node_publishes_its_gpus():
    clock = Clock()
    # LIST GPUCluster (ready), then one LIST of ResourceSlices (one node missing), then its watch
    res = FakeResource([FakeList([gpucluster("ready", "Reconciled")], "1"), FakeList([H100], "2")])
    W = make_watch([[{"type": "ADDED", "object": H100_MIG}]], clock)
    w = waiter(res, W, clock, expect_nodes=["gpu-h100-1", "gpu-h100-2"], expect_gpus={"gpu-h100-2": 2})
    done, _obj, summary, waited = w.wait(60)
    assert done and summary["reason"] == "Reconciled" and waited == 0.5
    assert len(res.calls) == 2      # one LIST each; the slices then come from the watch
    assert w.extra_result()["resource_slices"]["gpu-h100-2"]["mig"] == {"1g.10gb": 7}


def test_wait_times_out_naming_the_nodes_without_slices():
    clock = Clock()
    res = FakeResource([FakeList([gpucluster("ready", "Reconciled")], "1"), FakeList([H100], "2")])
    w = waiter(res, make_watch([], clock), clock, expect_nodes=["gpu-h100-1", "gpu-l40s-1"])
    done, _obj, summary, _waited = w.wait(10)
    assert not done and summary["nodes_without_gpus"] == ["gpu-l40s-1"]
    assert w.node_reasons == {"gpu-l40s-1": ["no ResourceSlice of driver gpu.nvidia.com for the node"]}


class FakeModule(object):
    def __init__(self, served=True, check_mode=False, objects=(), **params):
        self.check_mode = check_mode
        self.kube = FakeKube(objects=objects, served=served)
        self.params = dict(name="gpu-cluster", timeout=5, stable_for=0, operator_namespace="gpu-operator",
                           wait_operator=False, expect_nodes=[], expect_gpus={})
        self.params.update(params)


def test_a_cluster_without_resource_api_is_refused_before_any_read():
    with pytest.raises(DomainError) as err:
        cp.run(FakeModule(served=False), gc.GPUClusterWaiter, gc.prerequisites)
    assert "serves no resource.k8s.io/v1 ResourceSlice" in str(err.value)
    assert "GA from Kubernetes 1.34" in str(err.value)


def test_check_mode_reads_the_gpucluster_once():
    module = FakeModule(check_mode=True, objects=[gpucluster("ready", "Reconciled")])
    res = cp.run(module, gc.GPUClusterWaiter, gc.prerequisites)
    assert res["ready"] is True and res["state"] == "ready" and res["waited"] == 0.0


def test_diagnostics_quote_the_schedulers_reason_once_per_text():
    msg = "0/5 nodes are available: 5 cannot allocate all claims."
    pending = [{"metadata": {"name": "nvidia-dcgm-exporter-dra-%d" % i}, "spec": {},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                               "reason": "Unschedulable", "message": msg}]}}
               for i in range(2)]
    summary = cp.evaluate(gpucluster("notReady", "OperandNotReady", "False", "Waiting for operand pods to be ready"),
                          stack=gc.GPU_CLUSTER)[1]
    lines, data = cp.diagnose(summary, [], pending, name="gpu-cluster", stack=gc.GPU_CLUSTER)
    assert lines[0] == ("GPUCluster gpu-cluster state=notReady reason=OperandNotReady: "
                        "Waiting for operand pods to be ready")
    assert lines[1].endswith("Pending: the scheduler says: " + msg)
    assert lines[2].endswith("Pending: the same scheduler message")
    assert data["pods"][0]["unschedulable"] == msg


def test_a_node_of_mig_devices_only_explains_the_pending_operands():
    report = gc.published([H100, rslice("gpu-h100-mig-1", [mig(0, "1g.10gb", "GPU-m", n) for n in range(2)])])
    pods = [{"name": "nvidia-dra-validator-x", "node": None, "unschedulable": "0/5 nodes are available: ..."}]
    hint = gc.mig_only_hint(report, pods)
    assert hint.startswith("gpu-h100-mig-1 publishes only MIG devices (every GPU runs MIG)")
    assert "DeviceClass gpu.nvidia.com" in hint
    assert gc.mig_only_hint(report, []) is None and gc.mig_only_hint(gc.published([H100]), pods) is None
