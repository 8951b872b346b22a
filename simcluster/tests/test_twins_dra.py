"""Dynamic Resource Allocation in the twins (simcluster/twins/dra.py, dra_allocator.py): claims from
templates, allocation by the default and KAI scheduler twins, the scheduler's messages, quota on
claims, deallocation when pods end, and the devices a CUDA container sees.

ResourceSlices are created here as NVIDIA's DRA driver publishes them (driver gpu.nvidia.com, one
pool per node, devices gpu-N / MIG devices with the driver's attributes); DeviceClasses as the GPU
Operator's state-dra-driver manifests define them.
"""
import os

import pytest

from simcluster.errors import ApiError
from simcluster.twins.testkit import TwinCluster, pod as make_pod, status_word

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "clusters", "workload-2x8.yaml")
RK = "resource.k8s.io/v1"
CLAIMS, TEMPLATES = "resourceclaims.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io"
SLICES, CLASSES = "resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io"
DRIVER = "gpu.nvidia.com"


def device_class(name, kind):
    return {"apiVersion": RK, "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                          "device.attributes['gpu.nvidia.com'].type == '%s'" % kind}}]}}


def gpu_device(node_i, i, product="NVIDIA H100 80GB HBM3", memory="81559Mi"):
    return {"name": "gpu-%d" % i, "attributes": {
        "type": {"string": "gpu"}, "uuid": {"string": "GPU-%d-%d" % (node_i, i)},
        "productName": {"string": product}, "brand": {"string": "Nvidia"}, "architecture": {"string": "Hopper"},
        "index": {"int": i}, "minor": {"int": i}, "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "550.54.15"}, "cudaDriverVersion": {"version": "12.4.0"},
        "pcieBusID": {"string": "0000:%02x:00.0" % (0x10 + i)}},
        "capacity": {"memory": {"value": memory}}}


def mig_device(node_i, parent, j, profile="1g.10gb"):
    return {"name": "gpu-%d-mig-%s-%d" % (parent, profile.replace(".", "-"), j), "attributes": {
        "type": {"string": "mig"}, "uuid": {"string": "MIG-%d-%d-%d" % (node_i, parent, j)},
        "parentUUID": {"string": "GPU-%d-%d" % (node_i, parent)}, "profile": {"string": profile},
        "productName": {"string": "NVIDIA H100 80GB HBM3"}, "index": {"int": j}, "parentIndex": {"int": parent},
        "driverVersion": {"version": "550.54.15"}},
        "capacity": {"memory": {"value": "9984Mi"}}}


def resource_slice(node, devices, generation=1, count=1, suffix=""):
    return {"apiVersion": RK, "kind": "ResourceSlice",
            "metadata": {"name": "%s-%s%s" % (node, DRIVER, suffix)},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
                     "devices": devices}}


def exact(name, klass, count=None, mode=None, selectors=()):
    req = {"deviceClassName": klass}
    if count is not None:
        req["count"] = count
    if mode:
        req["allocationMode"] = mode
    if selectors:
        req["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": req}


def template(name, requests, ns="default", constraints=None):
    spec = {"devices": {"requests": requests}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    return {"apiVersion": RK, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": spec}}


def claim(name, requests, ns="default"):
    return {"apiVersion": RK, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": requests}}}


def claim_pod(name, template_name=None, claim_name=None, image="nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
              ns="default", scheduler=None, behaviour=None):
    p = make_pod(name, namespace=ns, image=image, restartPolicy="Never")
    entry = {"name": "gpu"}
    if template_name:
        entry["resourceClaimTemplateName"] = template_name
    else:
        entry["resourceClaimName"] = claim_name
    p["spec"]["resourceClaims"] = [entry]
    p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    if scheduler:
        p["spec"]["schedulerName"] = scheduler
    if behaviour:
        p["metadata"]["annotations"] = {"simcluster.skaffon.io/behaviour": behaviour}
    return p


def scheduled(c, name, ns="default"):
    pod = c.store.get("pods", ns, name) or {}
    return next((x for x in (pod.get("status") or {}).get("conditions") or [] if x["type"] == "PodScheduled"), None)


@pytest.fixture
def cluster():
    with TwinCluster(CLUSTER, store="real") as c:
        c.store.create(CLASSES, device_class("gpu.nvidia.com", "gpu"))
        c.store.create(CLASSES, device_class("mig.nvidia.com", "mig"))
        c.store.create(SLICES, resource_slice("gpu-1", [gpu_device(1, i) for i in range(2)]
                                              + [mig_device(1, 2, j) for j in range(2)]))
        c.store.create(SLICES, resource_slice("gpu-2", [gpu_device(2, i) for i in range(2)]))
        yield c
        assert c.handle.errors == []


def test_pod_with_a_claim_template_gets_its_claim_allocated_and_the_cuda_sample_sees_the_gpu(cluster):
    c = cluster
    c.store.create(TEMPLATES, template("one-gpu", [exact("gpu", "gpu.nvidia.com")]))
    c.store.create("pods", claim_pod("cuda", "one-gpu"))
    c.wait(lambda: status_word(c.pod("default", "cuda")) == "Completed", what="the CUDA sample completed")
    pod = c.pod("default", "cuda")
    st = pod["status"]["resourceClaimStatuses"]
    assert st[0]["name"] == "gpu" and st[0]["resourceClaimName"].startswith("cuda-gpu-")
    assert len(st[0]["resourceClaimName"]) == len("cuda-gpu-") + 5
    assert "Test PASSED" in c.logs("default", "cuda", pod["spec"]["containers"][0]["name"])
    # the pod is done: the controller deletes the claim it generated for it
    c.wait(lambda: c.store.get(CLAIMS, "default", st[0]["resourceClaimName"]) is None, what="the claim deleted")


def test_claim_allocation_reservation_and_finalizer_as_the_scheduler_writes_them(cluster):
    c = cluster
    c.store.create(TEMPLATES, template("one-gpu", [exact("gpu", "gpu.nvidia.com")]))
    c.store.create("pods", claim_pod("runner", "one-gpu", behaviour="run"))
    c.wait(lambda: status_word(c.pod("default", "runner")) == "Running", what="running")
    pod = c.pod("default", "runner")
    name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    cl = c.store.get(CLAIMS, "default", name)
    assert cl["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert cl["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    assert cl["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert cl["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    results = cl["status"]["allocation"]["devices"]["results"]
    assert results == [{"request": "gpu", "driver": DRIVER, "pool": pod["spec"]["nodeName"], "device": "gpu-0"}]
    assert cl["status"]["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [pod["spec"]["nodeName"]]}]}]}
    assert cl["status"]["reservedFor"] == [{"resource": "pods", "name": "runner", "uid": pod["metadata"]["uid"]}]
    # deleting the pod frees the device and removes the claim
    c.store.delete("pods", "default", "runner")
    c.wait(lambda: c.store.get(CLAIMS, "default", name) is None, what="claim removed")


def test_mig_profile_claim_runs_where_the_slices_have_it_and_stays_pending_elsewhere(cluster):
    c = cluster
    c.store.create(TEMPLATES, template("mig-1g", [exact("mig", "mig.nvidia.com", selectors=[
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"])]))
    c.store.create(TEMPLATES, template("mig-3g", [exact("mig", "mig.nvidia.com", selectors=[
        "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"])]))
    c.store.create("pods", claim_pod("small", "mig-1g", behaviour="run"))
    c.store.create("pods", claim_pod("big", "mig-3g", behaviour="run"))
    c.wait(lambda: status_word(c.pod("default", "small")) == "Running", what="small running")
    assert c.pod("default", "small")["spec"]["nodeName"] == "gpu-1"
    cond = c.wait(lambda: (scheduled(c, "big") or {}).get("message"), what="big unschedulable")
    assert cond == ("0/3 nodes are available: 3 cannot allocate all claims. preemption: 0/3 nodes are "
                    "available: 3 Preemption is not helpful for scheduling.")
    assert scheduled(c, "big")["reason"] == "Unschedulable"


def test_devices_are_not_allocated_twice_and_all_mode_takes_every_gpu(cluster):
    c = cluster
    c.store.create(TEMPLATES, template("all-gpus", [exact("gpus", "gpu.nvidia.com", mode="All")]))
    c.store.create("pods", claim_pod("a", "all-gpus", behaviour="run"))
    c.store.create("pods", claim_pod("b", "all-gpus", behaviour="run"))
    c.wait(lambda: status_word(c.pod("default", "a")) == "Running" and status_word(c.pod("default", "b")) == "Running",
           what="both running")
    nodes = {c.pod("default", n)["spec"]["nodeName"] for n in ("a", "b")}
    assert nodes == {"gpu-1", "gpu-2"}
    for n in ("a", "b"):
        name = c.pod("default", n)["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        devs = [r["device"] for r in c.store.get(CLAIMS, "default", name)["status"]["allocation"]["devices"]["results"]]
        assert devs == ["gpu-0", "gpu-1"]
    c.store.create("pods", claim_pod("c", "all-gpus", behaviour="run"))
    msg = c.wait(lambda: (scheduled(c, "c") or {}).get("message"), what="c unschedulable")
    assert "3 cannot allocate all claims" in msg


def test_prefilter_messages_missing_claim_and_missing_class(cluster):
    c = cluster
    c.store.create("pods", claim_pod("lost", claim_name="nope", behaviour="run"))
    msg = c.wait(lambda: (scheduled(c, "lost") or {}).get("message"), what="lost unschedulable")
    assert msg == ('0/3 nodes are available: resourceclaim.resource.k8s.io "nope" not found. preemption: 0/3 '
                   'nodes are available: 3 Preemption is not helpful for scheduling.')
    c.store.create(CLAIMS, claim("tpu", [exact("t", "tpu.example.com")]))
    c.store.create("pods", claim_pod("tpu-user", claim_name="tpu", behaviour="run"))
    msg = c.wait(lambda: (scheduled(c, "tpu-user") or {}).get("message"), what="tpu unschedulable")
    assert "request t: device class tpu.example.com does not exist" in msg


def test_shared_claim_is_reserved_for_both_pods_on_one_node(cluster):
    c = cluster
    c.store.create(CLAIMS, claim("shared", [exact("gpu", "gpu.nvidia.com")]))
    c.store.create("pods", claim_pod("s1", claim_name="shared", behaviour="run"))
    c.wait(lambda: status_word(c.pod("default", "s1")) == "Running", what="s1 running")
    c.store.create("pods", claim_pod("s2", claim_name="shared", behaviour="run"))
    c.wait(lambda: status_word(c.pod("default", "s2")) == "Running", what="s2 running")
    assert c.pod("default", "s1")["spec"]["nodeName"] == c.pod("default", "s2")["spec"]["nodeName"]
    cl = c.store.get(CLAIMS, "default", "shared")
    assert [r["name"] for r in cl["status"]["reservedFor"]] == ["s1", "s2"]
    c.store.delete("pods", "default", "s1")
    c.store.delete("pods", "default", "s2")
    c.wait(lambda: "allocation" not in (c.store.get(CLAIMS, "default", "shared").get("status") or {}),
           what="deallocated")
    cl = c.store.get(CLAIMS, "default", "shared")
    assert not cl["metadata"].get("finalizers")     # not generated for a pod: kept, deallocated


def test_quota_on_claims_counts_devices_per_class_with_the_real_message(cluster):
    c = cluster
    c.namespace("team-a")
    c.store.create("resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota",
                                      "metadata": {"name": "gpus", "namespace": "team-a"},
                                      "spec": {"hard": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2",
                                                        "count/resourceclaims.resource.k8s.io": "5"}}})
    c.store.create(CLAIMS, claim("two", [exact("gpu", "gpu.nvidia.com", count=2)], ns="team-a"))
    c.wait(lambda: ((c.store.get("resourcequotas", "team-a", "gpus").get("status") or {}).get("used") or {})
           .get("gpu.nvidia.com.deviceclass.resource.k8s.io/devices") == "2", what="quota used")
    with pytest.raises(ApiError) as err:
        c.store.create(CLAIMS, claim("one-more", [exact("gpu", "gpu.nvidia.com")], ns="team-a"))
    assert err.value.code == 403
    assert err.value.message == (
        'resourceclaims.resource.k8s.io "one-more" is forbidden: exceeded quota: gpus, requested: '
        'gpu.nvidia.com.deviceclass.resource.k8s.io/devices=1, used: gpu.nvidia.com.deviceclass.resource.k8s.io/'
        'devices=2, limited: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=2')
    # a MIG claim is another class: not limited by this quota
    c.store.create(CLAIMS, claim("mig", [exact("mig", "mig.nvidia.com")], ns="team-a"))
    used = c.wait(lambda: (c.store.get("resourcequotas", "team-a", "gpus").get("status") or {}).get("used"))
    assert used["count/resourceclaims.resource.k8s.io"] in ("1", "2")


def test_constraint_match_attribute_keeps_devices_on_one_parent_gpu(cluster):
    c = cluster
    c.store.create(SLICES, resource_slice("gpu-2", [mig_device(2, 0, 0), mig_device(2, 1, 0),
                                                   mig_device(2, 1, 1)], suffix="-mig"))
    # gpu-2's pool now has two slices of generation 1 but announces one: the newest complete one wins
    c.store.delete(SLICES, None, "gpu-2-%s-mig" % DRIVER)
    c.store.create(SLICES, resource_slice("cpu-1", [mig_device(3, 0, 0), mig_device(3, 1, 0), mig_device(3, 1, 1)]))
    c.store.create(TEMPLATES, template("pair", [exact("a", "mig.nvidia.com"), exact("b", "mig.nvidia.com")],
                                       constraints=[{"matchAttribute": "gpu.nvidia.com/parentUUID"}]))
    c.store.delete(SLICES, None, "gpu-1-%s" % DRIVER)
    c.store.create("pods", claim_pod("pair", "pair", behaviour="run"))
    c.wait(lambda: status_word(c.pod("default", "pair")) == "Running", what="pair running")
    pod = c.pod("default", "pair")
    assert pod["spec"]["nodeName"] == "cpu-1"
    name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    devs = [r["device"] for r in c.store.get(CLAIMS, "default", name)["status"]["allocation"]["devices"]["results"]]
    assert devs == ["gpu-1-mig-1g-10gb-0", "gpu-1-mig-1g-10gb-1"]


# -- KAI: v0.17's binder runs the DynamicResources plugin (chart: binder plugins dynamicresources=200) ----

def test_kai_gang_with_claims_is_placed_all_or_none_on_distinct_devices():
    from simcluster.tests.test_twins_kai import Kai, PODGROUPS, QUEUES, podgroup, queue
    with Kai() as c:
        c.install()
        c.wait(lambda: (c.store.get("deployments.apps", "kai-scheduler", "kai-scheduler-default") or {})
               .get("status", {}).get("readyReplicas"), what="scheduler deployed by the operator")
        c.store.create(QUEUES, queue("research", 4))
        c.store.create(QUEUES, queue("team-a", 4, parent="research"))
        c.store.create(CLASSES, device_class("gpu.nvidia.com", "gpu"))
        c.store.create(SLICES, resource_slice("gpu-1", [gpu_device(1, i) for i in range(2)]))
        c.store.create(TEMPLATES, template("one-gpu", [exact("gpu", "gpu.nvidia.com")], ns="team-a"))

        def member(name, group):
            p = claim_pod(name, "one-gpu", ns="team-a", scheduler="kai-scheduler", behaviour="run")
            p["metadata"]["annotations"].update({"pod-group-name": group, "kai.scheduler/skip-podgrouper": "true"})
            return p
        c.store.create(PODGROUPS, podgroup("three", "team-a", 3, "team-a"))
        for i in range(3):
            c.store.create("pods", member("t%d" % i, "three"))
        c.wait(lambda: all((c.pod("team-a", "t%d" % i).get("status") or {}).get("resourceClaimStatuses")
                           for i in range(3)), what="claims created")
        c.settle()
        assert c.running("team-a") == []                       # two GPUs for a gang of three: none starts
        msg = c.store.get(PODGROUPS, "team-a", "three")["status"]["schedulingConditions"][0]["message"]
        assert "cannot allocate all claims" in msg or "could not fit all pods of the gang" in msg
        for i in range(3):
            c.store.delete("pods", "team-a", "t%d" % i)
        c.store.create(PODGROUPS, podgroup("two", "team-a", 2, "team-a"))
        for i in range(2):
            c.store.create("pods", member("w%d" % i, "two"))
        c.wait(lambda: c.running("team-a") == ["w0", "w1"], what="the gang of two")
        devices = set()
        for i in range(2):
            name = c.pod("team-a", "w%d" % i)["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            cl = c.store.get(CLAIMS, "team-a", name)
            devices.update(r["device"] for r in cl["status"]["allocation"]["devices"]["results"])
            assert cl["status"]["reservedFor"][0]["name"] == "w%d" % i
        assert devices == {"gpu-0", "gpu-1"}
        assert c.handle.errors == []


def test_claim_from_a_template_over_quota_is_refused_and_the_pod_waits(cluster):
    c = cluster
    c.namespace("team-b")
    c.store.create("resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota",
                                      "metadata": {"name": "gpus", "namespace": "team-b"},
                                      "spec": {"hard": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "1"}}})
    c.store.create(TEMPLATES, template("one-gpu", [exact("gpu", "gpu.nvidia.com")], ns="team-b"))
    c.store.create("pods", claim_pod("first", "one-gpu", ns="team-b", behaviour="run"))
    c.wait(lambda: status_word(c.pod("team-b", "first")) == "Running", what="first running")
    c.store.create("pods", claim_pod("second", "one-gpu", ns="team-b", behaviour="run"))
    msg = c.wait(lambda: (scheduled(c, "second", "team-b") or {}).get("message"), what="second pending")
    assert msg == ('0/3 nodes are available: pod "team-b/second": ResourceClaim not created yet. preemption: 0/3 '
                   'nodes are available: 3 Preemption is not helpful for scheduling.')
    events = c.wait(lambda: c.events("FailedResourceClaimCreation", "second"), what="the controller's event")
    assert "is forbidden: exceeded quota: gpus, requested: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=1, " \
           "used: gpu.nvidia.com.deviceclass.resource.k8s.io/devices=1, limited: " \
           "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=1" in events[0]["message"]
    # the first pod ends: its claim goes, the quota frees, the second pod's claim is made and it runs
    c.store.delete("pods", "team-b", "first")
    c.wait(lambda: status_word(c.pod("team-b", "second")) == "Running", timeout=20, what="second running")


def test_kubelet_waits_for_the_driver_on_the_node_to_prepare_the_claim(cluster):
    c = cluster
    c.store.create(CLAIMS, claim("pinned", [exact("gpu", "gpu.nvidia.com")]))
    c.store.create("pods", claim_pod("p", claim_name="pinned", behaviour="run"))
    c.wait(lambda: status_word(c.pod("default", "p")) == "Running", what="running")
    node = c.pod("default", "p")["spec"]["nodeName"]
    # a pod bound by hand to a node (no scheduler): the claim is not reserved for it
    c.store.create(CLAIMS, claim("unreserved", [exact("gpu", "gpu.nvidia.com")]))
    bound = claim_pod("bound", claim_name="unreserved", behaviour="run")
    bound["spec"]["nodeName"] = node
    c.store.create("pods", bound)
    events = c.wait(lambda: c.events("FailedPrepareDynamicResources", "bound"), what="the kubelet's event")
    uid = c.pod("default", "bound")["metadata"]["uid"]
    cuid = c.store.get(CLAIMS, "default", "unreserved")["metadata"]["uid"]
    assert events[0]["message"] == ("Failed to prepare dynamic resources: pod bound (%s) is not allowed to use "
                                    "ResourceClaim unreserved (%s)" % (uid, cuid))
    # the kubelet records the event, then writes the pod's status
    c.wait(lambda: status_word(c.pod("default", "bound")) == "ContainerCreating", what="ContainerCreating")
    # the driver's plugin leaves the node (its slice goes): a new pod with a claim there cannot start
    c.store.delete(SLICES, None, "%s-%s" % (node, DRIVER))
    c.store.delete("pods", "default", "p")
    c.wait(lambda: "allocation" not in (c.store.get(CLAIMS, "default", "pinned").get("status") or {}),
           what="deallocated")
    alloc = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": "gpu-0"}]}}
    late = claim_pod("late", claim_name="pinned", behaviour="run")
    late["spec"]["nodeName"] = node
    late = c.store.create("pods", late)
    cl = c.store.get(CLAIMS, "default", "pinned")
    cl["status"] = {"allocation": alloc, "reservedFor": [{"resource": "pods", "name": "late",
                                                          "uid": late["metadata"]["uid"]}]}
    c.store.update_status(CLAIMS, cl)
    events = c.wait(lambda: c.events("FailedPrepareDynamicResources", "late"), what="driver not registered")
    assert events[0]["message"] == "Failed to prepare dynamic resources: DRA driver gpu.nvidia.com is not registered"


def test_namespace_with_claims_in_use_is_deleted(cluster):
    c = cluster
    c.namespace("gone")
    c.store.create(TEMPLATES, template("one-gpu", [exact("gpu", "gpu.nvidia.com")], ns="gone"))
    c.store.create("pods", claim_pod("p", "one-gpu", ns="gone", behaviour="run"))
    c.wait(lambda: status_word(c.pod("gone", "p")) == "Running", what="running")
    c.store.delete("namespaces", None, "gone")
    c.wait(lambda: c.store.get("namespaces", None, "gone") is None, timeout=20, what="namespace gone")
    assert c.store.list(CLAIMS, "gone") == []
