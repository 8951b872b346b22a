"""Storage twins (simcluster/twins/volumes.py): StorageClasses from the cluster file, the PV controller
with an external provisioner, the DefaultStorageClass admission plugin, and the VolumeBinding
PreFilter of the default, Kueue-admitted and KAI scheduling paths."""
import os

import pytest

from simcluster.clusterfile import ClusterFileError, validate
from simcluster.twins import volumes
from simcluster.twins.testkit import TwinCluster, pod as make_pod

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "clusters", "workload-2x8.yaml")
PVCS, PVS = "persistentvolumeclaims", "persistentvolumes"


def claim(name, cls=None, size="10Gi", modes=("ReadWriteOnce",), ns="default", volume=None, unset=True):
    spec = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None or not unset:
        spec["storageClassName"] = cls
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def volume(name, size, cls="", modes=("ReadWriteOnce",), claim_ref=None):
    spec = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
            "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/mnt/" + name}}
    if claim_ref:
        spec["claimRef"] = {"namespace": "default", "name": claim_ref}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def with_claim(name, claim_name):
    p = make_pod(name)
    p["metadata"]["annotations"] = {"simcluster.skaffon.io/behaviour": "run"}
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    p["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return p


def phase(c, name, ns="default"):
    return ((c.store.get(PVCS, ns, name) or {}).get("status") or {}).get("phase")


def messages(c, reason, name):
    return [e["message"] for e in c.events(reason, name)]


@pytest.fixture
def cluster():
    with TwinCluster(CLUSTER) as c:
        yield c
        assert c.handle.errors == []


@pytest.fixture
def bare():
    """No StorageClass at all (a cluster without a CSI driver)."""
    with TwinCluster(CLUSTER, storage_classes=[]) as c:
        yield c
        assert c.handle.errors == []


def test_cluster_file_storage_classes_are_created_with_the_default_annotation(cluster):
    classes = {sc["metadata"]["name"]: sc for sc in cluster.store.list(volumes.STORAGE_CLASSES)}
    assert sorted(classes) == ["local-nvme", "shared-rwx"]
    assert classes["shared-rwx"]["metadata"]["annotations"] == {volumes.DEFAULT_ANNOTATION: "true"}
    assert classes["shared-rwx"]["provisioner"] == "nfs.csi.k8s.io"
    assert classes["local-nvme"]["volumeBindingMode"] == "WaitForFirstConsumer"
    assert classes["local-nvme"]["reclaimPolicy"] == "Retain"
    assert "annotations" not in classes["local-nvme"]["metadata"]


def test_claim_without_class_gets_the_default_provisioned_and_bound(cluster):
    cluster.store.create(PVCS, claim("ckpt", modes=("ReadWriteMany",)))
    cluster.wait(lambda: phase(cluster, "ckpt") == "Bound", what="the claim bound")
    pvc = cluster.store.get(PVCS, "default", "ckpt")
    assert pvc["spec"]["storageClassName"] == "shared-rwx"
    pv = cluster.store.get(PVS, None, pvc["spec"]["volumeName"])
    assert pv["metadata"]["name"] == "pvc-" + pvc["metadata"]["uid"]
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    assert pv["spec"]["csi"]["driver"] == "nfs.csi.k8s.io" and pv["status"]["phase"] == "Bound"
    assert pvc["status"] == {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": {"storage": "10Gi"}}
    assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == "nfs.csi.k8s.io"
    assert messages(cluster, "ProvisioningSucceeded", "ckpt") == ["Successfully provisioned volume %s"
                                                                  % pv["metadata"]["name"]]


def test_unknown_class_stays_pending_with_provisioning_failed(cluster):
    # pv_controller.go provisionClaim: findProvisionablePlugin's error is the event, a Warning
    cluster.store.create(PVCS, claim("data", "fast-ssd"))
    cluster.wait(lambda: messages(cluster, "ProvisioningFailed", "data"), what="ProvisioningFailed")
    cluster.settle()
    assert phase(cluster, "data") == "Pending"
    assert messages(cluster, "ProvisioningFailed", "data") == ['storageclass.storage.k8s.io "fast-ssd" not found']
    assert cluster.events("ProvisioningFailed", "data")[0]["type"] == "Warning"
    assert cluster.store.list(PVS) == []


def test_no_class_and_no_default_stays_pending_with_failed_binding(bare):
    # binder_test.go TestSync "1-2 - noop": no matching volume, no class -> Normal FailedBinding
    bare.store.create(PVCS, claim("data"))
    bare.wait(lambda: messages(bare, "FailedBinding", "data"), what="FailedBinding")
    bare.settle()   # the controller records the event before it writes the phase
    assert phase(bare, "data") == "Pending"
    assert messages(bare, "FailedBinding", "data") == [volumes.NO_CLASS]
    assert bare.store.get(PVCS, "default", "data")["spec"].get("storageClassName") is None


def test_explicit_empty_class_opts_out_of_the_default(cluster):
    cluster.store.create(PVCS, claim("static-only", "", unset=False))
    cluster.wait(lambda: messages(cluster, "FailedBinding", "static-only"), what="FailedBinding")
    cluster.settle()
    assert cluster.store.get(PVCS, "default", "static-only")["spec"]["storageClassName"] == ""
    assert phase(cluster, "static-only") == "Pending"


def test_default_class_created_later_is_assigned_retroactively(bare):
    bare.store.create(PVCS, claim("late"))
    bare.wait(lambda: phase(bare, "late") == "Pending")
    bare.store.create(volumes.STORAGE_CLASSES, volumes.storage_class_object(
        {"name": "standard", "provisioner": "ebs.csi.aws.com", "default": True}))
    bare.wait(lambda: phase(bare, "late") == "Bound", what="retroactive default class")
    assert bare.store.get(PVCS, "default", "late")["spec"]["storageClassName"] == "standard"


def test_static_volume_smallest_match_is_bound(bare):
    # kubernetes pkg/controller/volume/persistentvolume/binder_test.go TestSync "1-4 - smallest volume":
    # findBestMatchForClaim picks the smallest volume that is large enough
    for name, size in (("pv-1g", "1Gi"), ("pv-20g", "20Gi"), ("pv-12g", "12Gi")):
        bare.store.create(PVS, volume(name, size))
    bare.store.create(PVCS, claim("data", "", size="10Gi", unset=False))
    bare.wait(lambda: phase(bare, "data") == "Bound", what="static binding")
    assert bare.store.get(PVCS, "default", "data")["spec"]["volumeName"] == "pv-12g"
    assert bare.store.get(PVS, None, "pv-12g")["status"]["phase"] == "Bound"
    bare.wait(lambda: (bare.store.get(PVS, None, "pv-20g").get("status") or {}).get("phase") == "Available")


def test_volume_pre_bound_to_a_claim_binds_only_that_claim(bare):
    # binder_test.go TestSync "1-5 - prebound volume by name - success" (a smaller volume is free too)
    bare.store.create(PVS, volume("reserved", "10Gi", claim_ref="wanted"))
    bare.store.create(PVS, volume("small", "1Gi"))
    bare.store.create(PVCS, claim("other", "", size="5Gi", unset=False))
    bare.store.create(PVCS, claim("wanted", "", unset=False))
    bare.wait(lambda: phase(bare, "wanted") == "Bound", what="pre-bound volume")
    bare.settle()
    assert phase(bare, "other") == "Pending"
    pv = bare.store.get(PVS, None, "reserved")
    assert bare.store.get(PVCS, "default", "wanted")["spec"]["volumeName"] == "reserved"
    assert volumes.BOUND_BY_CONTROLLER not in (pv["metadata"].get("annotations") or {})   # its author bound it
    assert bare.store.get(PVCS, "default", "wanted")["status"]["capacity"] == {"storage": "10Gi"}


def test_claim_asking_for_a_named_volume_of_another_claim_waits(bare):
    # binder_test.go TestSync "2-6 - claim prebound to already bound volume": Pending, with the
    # FailedBinding warning pv_controller.go syncUnboundClaim records
    bare.store.create(PVS, volume("taken", "10Gi"))
    bare.store.create(PVCS, claim("first", "", unset=False))
    bare.wait(lambda: phase(bare, "first") == "Bound")
    bare.store.create(PVCS, claim("second", "", unset=False, volume="taken"))
    bare.wait(lambda: messages(bare, "FailedBinding", "second"))
    bare.settle()
    assert messages(bare, "FailedBinding", "second") == ['volume "taken" already bound to a different claim.']
    assert phase(bare, "second") == "Pending"


def test_claim_prebound_to_a_free_volume_binds_it(bare):
    # binder_test.go TestSync "2-3 - claim prebound to unbound volume": bound, and the claim is not
    # marked bound-by-controller (its author chose the volume); the volume is
    bare.store.create(PVS, volume("chosen", "1Gi"))
    bare.store.create(PVCS, claim("mine", "", size="1Gi", unset=False, volume="chosen"))
    bare.wait(lambda: phase(bare, "mine") == "Bound")
    ann = bare.store.get(PVCS, "default", "mine")["metadata"]["annotations"]
    assert ann == {volumes.BIND_COMPLETED: "yes"}
    assert bare.store.get(PVS, None, "chosen")["metadata"]["annotations"] == {volumes.BOUND_BY_CONTROLLER: "yes"}


def test_claim_prebound_to_a_missing_volume_stays_pending(bare):
    # binder_test.go TestSync "2-1 - claim prebound to non-existing volume - noop"
    bare.store.create(PVCS, claim("waiting", "", unset=False, volume="not-yet"))
    bare.wait(lambda: phase(bare, "waiting") == "Pending")
    bare.settle()
    assert bare.events(name="waiting") == []
    bare.store.create(PVS, volume("not-yet", "10Gi"))
    bare.wait(lambda: phase(bare, "waiting") == "Bound", what="bound once the volume exists")


def test_volume_prebound_to_another_uid_is_not_taken(bare):
    # binder_test.go TestSync "1-7 - prebound volume to different claim" (same name, other uid)
    pv = volume("old", "10Gi", claim_ref="data")
    pv["spec"]["claimRef"]["uid"] = "uid-of-an-earlier-claim"
    bare.store.create(PVS, pv)
    bare.store.create(PVCS, claim("data", "", size="1Gi", unset=False))
    bare.wait(lambda: messages(bare, "FailedBinding", "data"))
    bare.settle()
    assert phase(bare, "data") == "Pending"
    assert bare.store.get(PVS, None, "old")["spec"]["claimRef"]["uid"] == "uid-of-an-earlier-claim"


@pytest.mark.parametrize("volume_name,message", [
    # binder_test.go TestSync "3-1 - bound claim with missing VolumeName" and "3-2 - bound claim with
    # missing volume": Lost, with a ClaimLost warning
    ("", "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"),
    ("volume3-2", "Bound claim has lost its PersistentVolume. Data on the volume is lost!"),
])
def test_bound_claim_without_its_volume_is_lost(bare, volume_name, message):
    body = claim("claim3", "", unset=False, volume=volume_name or None)
    body["metadata"]["annotations"] = {volumes.BIND_COMPLETED: "yes", volumes.BOUND_BY_CONTROLLER: "yes"}
    body["status"] = {"phase": "Bound"}
    bare.store.create(PVCS, body)
    bare.wait(lambda: phase(bare, "claim3") == "Lost")
    assert messages(bare, "ClaimLost", "claim3") == [message]
    assert bare.events("ClaimLost", "claim3")[0]["type"] == "Warning"


def test_deleted_claim_releases_or_deletes_its_volume(cluster):
    cluster.store.create(PVCS, claim("scratch"))
    cluster.wait(lambda: phase(cluster, "scratch") == "Bound")
    name = cluster.store.get(PVCS, "default", "scratch")["spec"]["volumeName"]
    cluster.store.delete(PVCS, "default", "scratch")
    cluster.wait(lambda: cluster.store.get(PVS, None, name) is None, what="reclaimPolicy Delete")


# -- scheduling ------------------------------------------------------------------------------------

def unschedulable(c, name):
    p = c.pod("default", name)
    cond = [x for x in (p.get("status") or {}).get("conditions") or [] if x["type"] == "PodScheduled"]
    return cond and cond[0]["status"] == "False" and cond[0]["message"]


def test_pod_with_a_missing_claim_is_unschedulable_then_runs_when_it_binds(cluster):
    # volume_binding.go PreFilter -> UnschedulableAndUnresolvable with the lister's NotFound text;
    # FitError.Error(): no per-node counts after a PreFilter rejection
    cluster.store.create("pods", with_claim("trainer", "ckpt"))
    msg = cluster.wait(lambda: unschedulable(cluster, "trainer"), what="FailedScheduling")
    assert msg == ('0/3 nodes are available: persistentvolumeclaim "ckpt" not found. preemption: 0/3 nodes '
                   'are available: 3 Preemption is not helpful for scheduling.')
    assert [e["message"] for e in cluster.events("FailedScheduling", "trainer")] == [msg]
    cluster.store.create(PVCS, claim("ckpt"))
    cluster.wait(lambda: cluster.pod("default", "trainer")["spec"].get("nodeName"), what="scheduled after binding")


def test_pod_with_an_unbound_immediate_claim_is_unschedulable(cluster):
    cluster.store.create(PVCS, claim("data", "fast-ssd"))
    cluster.store.create("pods", with_claim("trainer", "data"))
    msg = cluster.wait(lambda: unschedulable(cluster, "trainer"), what="FailedScheduling")
    assert msg == ("0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 "
                   "nodes are available: 3 Preemption is not helpful for scheduling.")


def test_wait_for_first_consumer_binds_on_the_chosen_node(cluster):
    # pv_controller.go emitEventForUnboundDelayBindingClaim; the scheduler's PreBind names the node
    cluster.store.create(PVCS, claim("scratch", "local-nvme"))
    cluster.wait(lambda: messages(cluster, "WaitForFirstConsumer", "scratch"))
    assert messages(cluster, "WaitForFirstConsumer", "scratch") == [
        "waiting for first consumer to be created before binding"]
    assert phase(cluster, "scratch") == "Pending"
    cluster.store.create("pods", with_claim("worker", "scratch"))
    cluster.wait(lambda: phase(cluster, "scratch") == "Bound", what="bound after scheduling")
    p = cluster.wait(lambda: (cluster.pod("default", "worker").get("status") or {}).get("phase") == "Running"
                     and cluster.pod("default", "worker"))
    pvc = cluster.store.get(PVCS, "default", "scratch")
    assert pvc["metadata"]["annotations"][volumes.SELECTED_NODE] == p["spec"]["nodeName"]
    pv = cluster.store.get(PVS, None, pvc["spec"]["volumeName"])
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        p["spec"]["nodeName"]]


class Ctx:
    """The informer lookups claims_problem uses."""
    def __init__(self, objs):
        self.objs = objs

    def get_cached(self, resource, name, ns=None):
        return self.objs.get((resource, ns, name))


def sc_obj(name, mode):
    return volumes.storage_class_object({"name": name, "provisioner": "p", "volume_binding_mode": mode})


def bound(name, cls):
    pvc = claim(name, cls, volume="pv-" + name)
    pvc["status"] = {"phase": "Bound"}
    return pvc


@pytest.mark.parametrize("case,claims,pvcs,want", [
    # kubernetes pkg/scheduler/framework/plugins/volumebinding/volume_binding_test.go TestVolumeBinding
    ("all bound", ["pvc-a"], [bound("pvc-a", "wait-sc")], None),
    ("PVC does not exist", ["pvc-a"], [], 'persistentvolumeclaim "pvc-a" not found'),
    ("Part of PVCs do not exist", ["pvc-a", "pvc-b"], [bound("pvc-a", "wait-sc")],
     'persistentvolumeclaim "pvc-b" not found'),
    ("immediate claims not bound", ["pvc-a"], [claim("pvc-a", "immediate-sc")], volumes.UNBOUND_IMMEDIATE),
    ("unbound claims no matches", ["pvc-a"], [claim("pvc-a", "wait-sc")], None),
    ("unbound claim of a class that does not exist (IsDelayBindingMode: false)", ["pvc-a"],
     [claim("pvc-a", "no-such-sc")], volumes.UNBOUND_IMMEDIATE),
])
def test_volume_binding_prefilter_cases(case, claims, pvcs, want):
    objs = {(volumes.STORAGE_CLASSES, None, "wait-sc"): sc_obj("wait-sc", "WaitForFirstConsumer"),
            (volumes.STORAGE_CLASSES, None, "immediate-sc"): sc_obj("immediate-sc", "Immediate")}
    objs.update({(PVCS, "default", p["metadata"]["name"]): p for p in pvcs})
    p = make_pod("pod-a")
    p["spec"]["volumes"] = [{"name": "v%d" % i, "persistentVolumeClaim": {"claimName": c}}
                            for i, c in enumerate(claims)]
    assert volumes.claims_problem(Ctx(objs), p) == want, case


def test_claims_problem_texts():
    lost = claim("gone")
    lost["metadata"]["uid"] = "u1"
    lost["spec"]["volumeName"] = "pv-x"
    lost["status"] = {"phase": "Lost"}
    dying = claim("dying")
    dying["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    ctx = Ctx({(PVCS, "default", "gone"): lost, (PVCS, "default", "dying"): dying})
    p = with_claim("p", "gone")
    assert volumes.claims_problem(ctx, p) == ('persistentvolumeclaim "gone" bound to non-existent '
                                              'persistentvolume "pv-x"')
    p = with_claim("p", "dying")
    assert volumes.claims_problem(ctx, p) == 'persistentvolumeclaim "dying" is being deleted'
    p = with_claim("p", "x")
    p["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]
    assert volumes.claims_problem(ctx, p) == ('waiting for ephemeral volume controller to create the '
                                              'persistentvolumeclaim "p-scratch"')
    p["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    assert volumes.claims_problem(ctx, p) is None


def test_kai_gang_waits_for_its_claims():
    from simcluster.tests.test_twins_kai import QUEUES, Kai, gang_pod, podgroup, queue
    with Kai() as kai:
        kai.install()
        kai.wait(lambda: (kai.store.get("deployments.apps", "kai-scheduler", "kai-scheduler-default") or {})
                 .get("status", {}).get("readyReplicas"), what="scheduler deployed by the operator")
        kai.store.create(QUEUES, queue("research", 4))
        kai.store.create(QUEUES, queue("team-a", 2, parent="research"))
        kai.store.create("podgroups.scheduling.run.ai", podgroup("gang", "team-a", 2, "team-a"))
        pods = [gang_pod("g-%d" % i, "team-a", "gang") for i in range(2)]
        pods[1]["spec"]["volumes"] = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]
        for p in pods:
            kai.store.create("pods", p)
        msg = kai.wait(lambda: next((c["message"] for c in (kai.pod("team-a", "g-0").get("status") or {})
                                     .get("conditions") or [] if c["type"] == "PodScheduled"), None))
        assert msg == 'Unschedulable: pod team-a/g-1: persistentvolumeclaim "ckpt" not found'
        assert kai.running("team-a") == []
        pvc = claim("ckpt", "", ns="team-a", unset=False)
        kai.store.create(PVS, volume("ckpt-pv", "10Gi"))
        kai.store.create(PVCS, pvc)
        kai.wait(lambda: kai.running("team-a") == ["g-0", "g-1"], what="the gang placed once the claim binds")
        assert kai.handle.errors == []


@pytest.mark.parametrize("data,field", [
    ({"storage_classes": {"name": "x"}}, "storage_classes"),
    ({"storage_classes": [{"name": "Bad_Name"}]}, "storage_classes[0].name"),
    ({"storage_classes": [{"name": "a"}, {"name": "a"}]}, "storage_classes[1].name"),
    ({"storage_classes": [{"name": "a", "default": "yes"}]}, "storage_classes[0].default"),
    ({"storage_classes": [{"name": "a", "volume_binding_mode": "Lazy"}]}, "storage_classes[0].volume_binding_mode"),
    ({"storage_classes": [{"name": "a", "reclaim_policy": "Recycle"}]}, "storage_classes[0].reclaim_policy"),
    ({"storage_classes": [{"name": "a", "size": 1}]}, "storage_classes[0]"),
    ({"workload": {"data_sources": {"ftp://x/y": {"bytes": 1}}}}, "workload.data_sources['ftp://x/y']"),
    ({"workload": {"data_sources": {"https://x/y": {"bytes": -1}}}}, "workload.data_sources['https://x/y'].bytes"),
    ({"workload": {"download_mbps": 0}}, "workload.download_mbps"),
    ({"workload": {"training": {"samples_per_second_per_gpu": {"default": "fast"}}}},
     "workload.training.samples_per_second_per_gpu.default"),
    ({"workload": {"training": {"epochs": 3}}}, "workload.training"),
    ({"workload": {"serving": {"latency_ms": {"p50": 90, "p90": 70, "p99": 120}}}}, "workload.serving.latency_ms"),
    ({"workload": {"serving": {"rps_per_replica": True}}}, "workload.serving.rps_per_replica"),
    ({"workload": {"cost": 1}}, "workload"),
    ({"timings": {"train_step": -1}}, "timings.train_step"),
])
def test_cluster_file_rejects_bad_storage_and_workload(data, field):
    with pytest.raises(ClusterFileError) as err:
        validate(dict(data, nodes=["n1"]))
    assert str(err.value).startswith(field + ":"), str(err.value)


def test_cluster_file_workload_defaults_and_shorthands():
    spec = validate({"nodes": ["n1"], "storage_classes": ["standard"],
                     "workload": {"data_sources": {"https://d.example/a": 5},
                                  "training": {"samples_per_second_per_gpu": 250}}})
    assert spec["storage_classes"][0] == {"name": "standard", "provisioner": "simcluster.skaffon.io/hostpath",
                                          "default": False, "volume_binding_mode": "Immediate",
                                          "reclaim_policy": "Delete", "allow_volume_expansion": False,
                                          "parameters": {}}
    w = spec["workload"]
    assert w["data_sources"] == {"https://d.example/a": {"bytes": 5}} and w["download_mbps"] == 500.0
    assert w["training"]["samples_per_second_per_gpu"] == {"default": 250.0}
    assert w["serving"] == {"latency_ms": {"p50": 40.0, "p90": 70.0, "p99": 120.0}, "rps_per_replica": 50.0}
    assert spec["timings"]["train_step"] == 0.05


def test_kueue_admitted_job_waits_in_the_scheduler_for_its_claim():
    # Kueue admits by quota only; the default scheduler then applies VolumeBinding to its pods
    from simcluster.tests.test_twins_kueue import KueueCluster, job as kueue_job
    with KueueCluster() as kq:
        body = kueue_job("train", "team-a", 1)
        body["spec"]["template"]["spec"]["volumes"] = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]
        kq.store.create("jobs.batch", body)
        msg = kq.wait(lambda: next((c["message"] for p in kq.pods("team-a")
                                    for c in (p.get("status") or {}).get("conditions") or []
                                    if c["type"] == "PodScheduled" and c["status"] == "False"), None),
                      what="FailedScheduling of the admitted pod")
        n = len(kq.store.list("nodes"))
        assert msg == volumes.prefilter_message(n, 'persistentvolumeclaim "ckpt" not found')
        assert kq.workload("team-a", "train")["status"]["admission"]["clusterQueue"] == "team-a"
        kq.store.create(PVS, volume("ckpt-pv", "10Gi"))
        kq.store.create(PVCS, claim("ckpt", "", ns="team-a", unset=False))
        kq.wait(lambda: kq.running("team-a"), what="runs once the claim binds")
        assert kq.handle.errors == []


def test_real_store_defaults_the_class_at_create_and_binds_wait_for_first_consumer():
    # DefaultStorageClass admission (plugin/pkg/admission/storage/storageclass/setdefault): the class is
    # in the object the create returns, before any controller ran
    with TwinCluster(CLUSTER, store="real") as c:
        created = c.store.create(PVCS, claim("ckpt", modes=("ReadWriteMany",)))
        assert created["spec"]["storageClassName"] == "shared-rwx"
        c.store.create(PVCS, claim("scratch", "local-nvme"))
        c.store.create("pods", with_claim("worker", "scratch"))
        c.wait(lambda: phase(c, "ckpt") == "Bound" and phase(c, "scratch") == "Bound", what="both bound")
        assert messages(c, "WaitForPodScheduled", "scratch") in ([], ["waiting for pod worker to be scheduled"])
        c.wait(lambda: (c.pod("default", "worker").get("status") or {}).get("phase") == "Running")
        assert c.handle.errors == []


def test_kubectl_get_columns_for_claims_volumes_and_classes():
    # pkg/printers/internalversion printers.go: printPersistentVolumeClaim, printPersistentVolume,
    # printStorageClass (1.35 columns; the default class's name gets " (default)")
    from simcluster import tables
    with TwinCluster(CLUSTER, store="real") as c:
        c.store.create(PVCS, claim("ckpt", modes=("ReadWriteMany", "ReadWriteOnce")))
        c.store.create(PVCS, claim("bad", "fast-ssd"))
        c.wait(lambda: phase(c, "ckpt") == "Bound")
        cols, row = tables.PRINTERS[PVCS]
        assert [x["name"] for x in cols] == ["Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass",
                                             "VolumeAttributesClass", "Age", "VolumeMode"]
        pvc = c.store.get(PVCS, "default", "ckpt")
        assert row(pvc)[:7] == ["ckpt", "Bound", pvc["spec"]["volumeName"], "10Gi", "RWO,RWX", "shared-rwx",
                                "<unset>"]
        assert row(pvc)[-1] == "Filesystem"
        assert row(c.store.get(PVCS, "default", "bad"))[1:7] == ["Pending", "", "", "", "fast-ssd", "<unset>"]
        cols, row = tables.PRINTERS[PVS]
        assert [x["name"] for x in cols][:10] == ["Name", "Capacity", "Access Modes", "Reclaim Policy", "Status",
                                                  "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age"]
        pv = c.store.get(PVS, None, pvc["spec"]["volumeName"])
        assert row(pv)[1:9] == ["10Gi", "RWO,RWX", "Delete", "Bound", "default/ckpt", "shared-rwx", "<unset>", ""]
        cols, row = tables.PRINTERS[volumes.STORAGE_CLASSES]
        rows = sorted(row(sc)[:5] for sc in c.store.list(volumes.STORAGE_CLASSES))
        assert rows == [["local-nvme", "rancher.io/local-path", "Retain", "WaitForFirstConsumer", False],
                        ["shared-rwx (default)", "nfs.csi.k8s.io", "Delete", "Immediate", False]]
        assert c.handle.errors == []


def test_node_local_volume_keeps_its_pods_on_its_node(cluster):
    # volume_binding_test.go / binder.go checkBoundClaims: a bound PV whose nodeAffinity excludes the
    # node -> "node(s) had volume node affinity conflict" (UnschedulableAndUnresolvable)
    cluster.store.create(PVCS, claim("scratch", "local-nvme"))
    cluster.store.create("pods", with_claim("first", "scratch"))
    first = cluster.wait(lambda: (cluster.pod("default", "first").get("status") or {}).get("phase") == "Running"
                         and cluster.pod("default", "first"))
    home = first["spec"]["nodeName"]
    for i in range(3):
        cluster.store.create("pods", with_claim("next-%d" % i, "scratch"))
    nodes = cluster.wait(lambda: [cluster.pod("default", "next-%d" % i)["spec"].get("nodeName") for i in range(3)]
                         if all(cluster.pod("default", "next-%d" % i)["spec"].get("nodeName") for i in range(3))
                         else None, what="all scheduled")
    assert set(nodes) == {home}
    other = next(n for n in ("gpu-1", "gpu-2", "cpu-1") if n != home)
    body = with_claim("elsewhere", "scratch")
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": other}
    cluster.store.create("pods", body)
    msg = cluster.wait(lambda: unschedulable(cluster, "elsewhere"), what="FailedScheduling")
    assert msg == ("0/3 nodes are available: 1 node(s) had volume node affinity conflict, 2 node(s) didn't match "
                   "Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful "
                   "for scheduling.")
