"""Storage: StorageClasses from the cluster file, the PV controller with an external provisioner,
and the volume rules the scheduler twins and the kubelet apply to a pod.

An independent reading of upstream (kubernetes pkg/controller/volume/persistentvolume
pv_controller.go syncUnboundClaim / provisionClaim, the external-provisioner sidecar of a CSI
driver, pkg/scheduler/framework/plugins/volumebinding volume_binding.go PreFilter, the kubelet's
volume manager):

- `register()` creates the cluster file's `storage_classes` at start (what a CSI driver's install
  does); `default: true` sets the annotation storageclass.kubernetes.io/is-default-class.
- PersistentVolumes (the twin): a claim without spec.storageClassName gets the default class
  (retroactive assignment, GA in 1.28; the API server's DefaultStorageClass admission plugin does
  it at create time, simcluster/admission.py). Then, for an unbound claim:
  a matching Available PV (same class, access modes, enough capacity; the smallest) is bound;
  else a claim with a class the cluster has is provisioned at once by that class's provisioner
  (PV pvc-<claim uid>, events ExternalProvisioning, Provisioning, ProvisioningSucceeded) and bound;
  a class that does not exist: Pending, Warning ProvisioningFailed
  `storageclass.storage.k8s.io "X" not found`; no class: Pending, FailedBinding `no persistent
  volumes available for this claim and no storage class is set`. A WaitForFirstConsumer class
  waits (WaitForFirstConsumer / WaitForPodScheduled events) until the scheduler names the node
  (annotation volume.kubernetes.io/selected-node). A claim that is gone releases its PV: Delete
  removes it, Retain leaves it Released.
- `claims_problem(ctx, pod)`: the VolumeBinding PreFilter verdict (missing claim, claim being
  deleted, claim Lost, unbound claim of an Immediate class) with kube-scheduler's texts, used by
  the default scheduler (and so Kueue's admitted pods) and the KAI scheduler twin.
- `mount_problem(ctx, pod)`: what keeps a bound pod ContainerCreating in the kubelet: a configMap
  volume whose ConfigMap does not exist (FailedMount `MountVolume.SetUp failed for volume "V" :
  configmap "X" not found`), a claim not (yet) bound.
"""

from ..errors import ApiError
from .util import parse_quantity, write_status

STORAGE_CLASSES = "storageclasses.storage.k8s.io"
PVCS = "persistentvolumeclaims"
PVS = "persistentvolumes"
DEFAULT_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BETA_DEFAULT_ANNOTATION = "storageclass.beta.kubernetes.io/is-default-class"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONER_ANNOTATIONS = ("volume.beta.kubernetes.io/storage-provisioner", "volume.kubernetes.io/storage-provisioner")
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NO_CLASS = "no persistent volumes available for this claim and no storage class is set"
EXTERNAL = ("Waiting for a volume to be created either by the external provisioner '%s' or manually by the "
            "system administrator. If volume creation is delayed, please verify that the provisioner is "
            "running and correctly registered.")


# -- StorageClasses -----------------------------------------------------------------------------

def storage_class_object(sc):
    obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
           "metadata": {"name": sc["name"]}, "provisioner": sc["provisioner"],
           "reclaimPolicy": sc.get("reclaim_policy", "Delete"),
           "volumeBindingMode": sc.get("volume_binding_mode", "Immediate")}
    if sc.get("default"):
        obj["metadata"]["annotations"] = {DEFAULT_ANNOTATION: "true"}
    if sc.get("allow_volume_expansion"):
        obj["allowVolumeExpansion"] = True
    if sc.get("parameters"):
        obj["parameters"] = dict(sc["parameters"])
    return obj


def register(store, spec):
    for sc in spec.get("storage_classes") or []:
        try:
            store.create(STORAGE_CLASSES, storage_class_object(sc), admit=False)
        except ApiError as err:
            if err.code != 409:
                raise


def is_default(sc):
    ann = sc["metadata"].get("annotations") or {}
    return ann.get(DEFAULT_ANNOTATION) == "true" or ann.get(BETA_DEFAULT_ANNOTATION) == "true"


def default_class(classes):
    """The default StorageClass: with several, the newest (then the first by name), as the
    DefaultStorageClass admission plugin chooses since 1.26; None without one."""
    defaults = [sc for sc in classes if is_default(sc)]
    if not defaults:
        return None
    defaults.sort(key=lambda sc: sc["metadata"]["name"])
    defaults.sort(key=lambda sc: sc["metadata"].get("creationTimestamp") or "", reverse=True)
    return defaults[0]


def claim_class(pvc):
    """spec.storageClassName, else the beta annotation; None when unset (not "": no class)."""
    spec = pvc.get("spec") or {}
    if spec.get("storageClassName") is not None:
        return spec["storageClassName"]
    return (pvc["metadata"].get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")


def _request(pvc):
    req = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage", "0")
    try:
        return parse_quantity(req)
    except ValueError:
        return 0


def claim_bound(pvc):
    return bool((pvc.get("spec") or {}).get("volumeName")) and \
        (pvc.get("status") or {}).get("phase") == "Bound"


def delay_binding(ctx, pvc):
    """IsDelayBindingMode: the claim's class exists and binds WaitForFirstConsumer."""
    name = claim_class(pvc)
    if not name:
        return False
    sc = ctx.get_cached(STORAGE_CLASSES, name)
    return bool(sc) and sc.get("volumeBindingMode") == "WaitForFirstConsumer"


# -- the pod's claims (scheduler and kubelet) ---------------------------------------------------

def pod_claims(pod):
    """[(volume name, claim name, ephemeral)] of the pod's PVC-backed volumes."""
    out = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        if vol.get("persistentVolumeClaim"):
            out.append((vol.get("name"), vol["persistentVolumeClaim"].get("claimName"), False))
        elif vol.get("ephemeral"):
            out.append((vol.get("name"), "%s-%s" % (pod["metadata"]["name"], vol.get("name")), True))
    return out


def claims_problem(ctx, pod):
    """None when the pod's claims let it be scheduled, else the VolumeBinding PreFilter message
    (kube-scheduler's text). Unbound WaitForFirstConsumer claims are not a problem: the scheduler
    names the node for them (select_node)."""
    ns = pod["metadata"]["namespace"]
    unbound_immediate = False
    for _vol, name, ephemeral in pod_claims(pod):
        pvc = ctx.get_cached(PVCS, name, ns)
        if pvc is None:
            if ephemeral:
                return 'waiting for ephemeral volume controller to create the persistentvolumeclaim "%s"' % name
            return 'persistentvolumeclaim "%s" not found' % name
        if (pvc.get("status") or {}).get("phase") == "Lost":
            return 'persistentvolumeclaim "%s" bound to non-existent persistentvolume "%s"' % (
                name, (pvc.get("spec") or {}).get("volumeName", ""))
        if pvc["metadata"].get("deletionTimestamp"):
            return 'persistentvolumeclaim "%s" is being deleted' % name
        if not claim_bound(pvc) and not delay_binding(ctx, pvc):
            unbound_immediate = True
    return UNBOUND_IMMEDIATE if unbound_immediate else None


VOLUME_NODE_CONFLICT = "node(s) had volume node affinity conflict"


def volume_node_conflict(ctx, pod, node):
    """VolumeBinding Filter for bound claims: True when a bound PV's nodeAffinity excludes the node
    (a node-local volume keeps its pods on its node)."""
    from .matching import node_selector_term_matches   # local: matching is a leaf module
    ns = pod["metadata"]["namespace"]
    for _vol, name, _eph in pod_claims(pod):
        pvc = ctx.get_cached(PVCS, name, ns)
        if pvc is None or not claim_bound(pvc):
            continue
        pv = ctx.get_cached(PVS, pvc["spec"]["volumeName"])
        terms = ((((pv or {}).get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}) \
            .get("nodeSelectorTerms")
        if terms and not any(node_selector_term_matches(t, node) for t in terms):
            return True
    return False


def prefilter_message(total, reason):
    """FitError.Error() for a PreFilter rejection (UnschedulableAndUnresolvable): no per-node counts,
    and preemption cannot help on any node."""
    return ("0/%d nodes are available: %s. preemption: 0/%d nodes are available: %d Preemption is not "
            "helpful for scheduling." % (total, reason, total, total))


def select_node(ctx, pod, node):
    """The binder's PreBind for WaitForFirstConsumer claims: name the chosen node on each unbound
    claim, so the PV controller provisions for it."""
    ns = pod["metadata"]["namespace"]
    for _vol, name, _eph in pod_claims(pod):
        pvc = ctx.get_cached(PVCS, name, ns)
        if pvc is None or claim_bound(pvc) or not delay_binding(ctx, pvc):
            continue
        if (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE) == node:
            continue
        try:
            ctx.store.merge_patch(PVCS, ns, name, {"metadata": {"annotations": {SELECTED_NODE: node}}})
        except ApiError as err:
            if err.code != 404:
                raise


def mount_problem(ctx, pod):
    """(reason, message) of what the kubelet cannot mount yet, or None."""
    ns = pod["metadata"]["namespace"]
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        cm = vol.get("configMap")
        if cm is not None and not cm.get("optional") and cm.get("name") is not None:
            if ctx.get_cached("configmaps", cm["name"], ns) is None:
                return ("FailedMount", 'MountVolume.SetUp failed for volume "%s" : configmap "%s" not found'
                        % (vol.get("name"), cm["name"]))
        secret = vol.get("secret")
        if secret is not None and not secret.get("optional") and secret.get("secretName") is not None:
            if ctx.get_cached("secrets", secret["secretName"], ns) is None:
                return ("FailedMount", 'MountVolume.SetUp failed for volume "%s" : secret "%s" not found'
                        % (vol.get("name"), secret["secretName"]))
    for _vol, name, _eph in pod_claims(pod):
        pvc = ctx.get_cached(PVCS, name, ns)
        if pvc is None or not claim_bound(pvc):
            return ("FailedMount", None)          # waits for the binding (WaitForFirstConsumer)
    return None


def mounted_volume(pod, container, path):
    """The pod volume mounted at `path` or at a parent of it in the container, with its mount:
    (volume dict, volumeMount dict), or (None, None) when the path is in the image's own root."""
    best = (None, None)
    best_len = -1
    vols = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    target = path.rstrip("/") or "/"
    for mount in container.get("volumeMounts") or []:
        mp = (mount.get("mountPath") or "").rstrip("/") or "/"
        if (target == mp or target.startswith(mp + "/") or mp == "/") and len(mp) > best_len:
            if mount.get("name") in vols:
                best, best_len = (vols[mount["name"]], mount), len(mp)
    return best


# -- the PV controller and the external provisioner -------------------------------------------

class PersistentVolumes:
    """PV controller + the provisioner of every StorageClass (see the module docstring)."""

    watches = {PVCS, PVS, STORAGE_CLASSES, "pods"}

    def __init__(self, ctx):
        self.ctx = ctx

    def _event(self, obj, reason, message, type_="Normal"):
        self.ctx.event_once(obj, reason, message, type_)

    def reconcile(self):
        classes = self.ctx.list(STORAGE_CLASSES)
        by_name = {sc["metadata"]["name"]: sc for sc in classes}
        default = default_class(classes)
        claims = self.ctx.list(PVCS)
        live = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in claims}
        pvs = {pv["metadata"]["name"]: pv for pv in self.ctx.list(PVS)}
        for pv in list(pvs.values()):
            self._sync_volume(pv, live)
        for pvc in sorted(claims, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
            if pvc["metadata"].get("deletionTimestamp"):
                continue
            try:
                self._sync_claim(pvc, by_name, default, pvs)
            except ApiError as err:
                if err.code not in (404, 409):
                    raise
                self.ctx.runtime.after(0.05)

    # -- volumes -------------------------------------------------------------------------------
    def _sync_volume(self, pv, live):
        ref = (pv.get("spec") or {}).get("claimRef")
        phase = (pv.get("status") or {}).get("phase")
        if not ref:
            if phase != "Available":
                write_status(self.ctx.store, PVS, pv, {"phase": "Available"})
            return
        claim = live.get((ref.get("namespace"), ref.get("name")))
        if claim is not None and claim["metadata"]["uid"] == ref.get("uid"):
            return
        if not ref.get("uid"):
            # pre-bound by its author, waiting for that claim: Available (syncVolume)
            if phase != "Available":
                write_status(self.ctx.store, PVS, pv, {"phase": "Available"})
            return
        # the claim is gone: the reclaim policy decides
        if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy", "Retain") == "Delete":
            try:
                self.ctx.store.delete(PVS, None, pv["metadata"]["name"])
            except ApiError as err:
                if err.code != 404:
                    raise
        elif phase != "Released":
            write_status(self.ctx.store, PVS, pv, {"phase": "Released"})

    # -- claims -----------------------------------------------------------------------------------
    def _sync_claim(self, pvc, classes, default, pvs):
        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        spec = pvc.get("spec") or {}
        volume = spec.get("volumeName")
        completed = (pvc["metadata"].get("annotations") or {}).get(BIND_COMPLETED)
        if completed and not volume:
            # syncBoundClaim: bound once, the reference is gone
            if (pvc.get("status") or {}).get("phase") != "Lost":
                self._status(pvc, "Lost")
                self._event(pvc, "ClaimLost", "Bound claim has lost reference to PersistentVolume. Data on the "
                            "volume is lost!", "Warning")
            return
        if volume:
            pv = pvs.get(volume)
            if pv is None:
                if completed:
                    if (pvc.get("status") or {}).get("phase") == "Lost":
                        return
                    self._status(pvc, "Lost")
                    self._event(pvc, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the "
                                "volume is lost!", "Warning")
                else:
                    self._status(pvc, "Pending")
                return
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if ref and (ref.get("namespace"), ref.get("name")) != (ns, name):
                self._event(pvc, "FailedBinding", 'volume "%s" already bound to a different claim.' % volume,
                            "Warning")
                self._status(pvc, "Pending")
                return
            self._bind(pv, pvc)
            return
        cls = claim_class(pvc)
        if cls is None and default is not None:
            # retroactive default StorageClass assignment
            self.ctx.store.merge_patch(PVCS, ns, name, {"spec": {"storageClassName": default["metadata"]["name"]}})
            return
        cls = cls or ""
        match = self._find_volume(pvc, cls, pvs)
        if match is not None:
            self._bind(match, pvc)
            return
        sc = classes.get(cls) if cls else None
        if not cls:
            self._event(pvc, "FailedBinding", NO_CLASS)
        elif sc is None:
            self._event(pvc, "ProvisioningFailed", 'storageclass.storage.k8s.io "%s" not found' % cls, "Warning")
        elif sc.get("volumeBindingMode") == "WaitForFirstConsumer" and \
                not (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE):
            waiting = sorted(p["metadata"]["name"] for p in self.ctx.list("pods", ns)
                             if not p["spec"].get("nodeName")
                             and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                             and any(c == name for _v, c, _e in pod_claims(p)))
            if len(waiting) > 1:
                self._event(pvc, "WaitForPodScheduled", "waiting for pods %s to be scheduled" % ",".join(waiting))
            elif waiting:
                self._event(pvc, "WaitForPodScheduled", "waiting for pod %s to be scheduled" % waiting[0])
            else:
                self._event(pvc, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
        else:
            pv = self._provision(pvc, sc)
            if pv is not None:
                self._bind(pv, pvc)
                return
        self._status(pvc, "Pending")

    def _status(self, pvc, phase, pv=None):
        status = {"phase": phase}
        if pv is not None:
            status["accessModes"] = list((pv.get("spec") or {}).get("accessModes") or [])
            status["capacity"] = dict((pv.get("spec") or {}).get("capacity") or {})
        return write_status(self.ctx.store, PVCS, pvc, status)

    @staticmethod
    def _find_volume(pvc, cls, pvs):
        """findBestMatchForClaim: an Available PV of the claim's class (or pre-bound to it) with the
        access modes and at least the size asked for; the smallest."""
        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        want = _request(pvc)
        modes = set((pvc.get("spec") or {}).get("accessModes") or [])
        best = None
        for pv in pvs.values():
            pspec = pv.get("spec") or {}
            ref = pspec.get("claimRef")
            if ref and (ref.get("namespace"), ref.get("name")) != (ns, name):
                continue
            if ref and ref.get("uid") and ref["uid"] != pvc["metadata"]["uid"]:
                continue
            if (pspec.get("storageClassName") or "") != cls or (pv.get("status") or {}).get("phase") == "Released":
                continue
            if not modes <= set(pspec.get("accessModes") or []):
                continue
            try:
                size = parse_quantity((pspec.get("capacity") or {}).get("storage", "0"))
            except ValueError:
                continue
            if size < want:
                continue
            if ref:
                return pv                   # pre-bound to this claim by its author
            if best is None or size < best[0]:
                best = (size, pv)
        return best[1] if best else None

    def _provision(self, pvc, sc):
        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        provisioner = sc.get("provisioner") or ""
        ann = pvc["metadata"].get("annotations") or {}
        if any(ann.get(k) != provisioner for k in PROVISIONER_ANNOTATIONS):
            self.ctx.store.merge_patch(PVCS, ns, name, {"metadata": {"annotations": {
                k: provisioner for k in PROVISIONER_ANNOTATIONS}}})
        self._event(pvc, "ExternalProvisioning", EXTERNAL % provisioner)
        self._event(pvc, "Provisioning", 'External provisioner is provisioning volume for claim "%s/%s"' % (ns, name))
        pv_name = "pvc-" + pvc["metadata"]["uid"]
        spec = pvc.get("spec") or {}
        size = (((spec.get("resources") or {}).get("requests") or {}).get("storage")) or "1Gi"
        body = {"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": pv_name, "annotations": {PROVISIONED_BY: provisioner}},
                "spec": {"accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                         "capacity": {"storage": str(size)},
                         "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": name,
                                      "namespace": ns, "uid": pvc["metadata"]["uid"]},
                         "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
                         "storageClassName": sc["metadata"]["name"],
                         "volumeMode": spec.get("volumeMode") or "Filesystem",
                         "csi": {"driver": provisioner, "volumeHandle": "%s-%s" % (provisioner, pvc["metadata"]["uid"]),
                                 "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity":
                                                      "1700000000000-0000-%s" % provisioner}}}}
        node = ann.get(SELECTED_NODE)
        if node:
            body["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
        try:
            pv = self.ctx.store.create(PVS, body)
        except ApiError as err:
            if err.code != 409:
                raise
            pv = self.ctx.store.get(PVS, None, pv_name)
        self._event(pvc, "ProvisioningSucceeded", "Successfully provisioned volume %s" % pv_name)
        return pv

    def _bind(self, pv, pvc):
        """bind(): the PV's claimRef and phase, the claim's volumeName, annotations and phase."""
        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        store = self.ctx.store
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("uid") != pvc["metadata"]["uid"]:
            patch = {"spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": name,
                                           "namespace": ns, "uid": pvc["metadata"]["uid"]}}}
            if not ref:
                # the controller chose this volume (not its author): bindVolumeToClaim marks it
                patch["metadata"] = {"annotations": {BOUND_BY_CONTROLLER: "yes"}}
            pv = store.merge_patch(PVS, None, pv["metadata"]["name"], patch)
        if (pv.get("status") or {}).get("phase") != "Bound":
            write_status(store, PVS, pv, {"phase": "Bound"})
        ann = pvc["metadata"].get("annotations") or {}
        if (pvc.get("spec") or {}).get("volumeName") != pv["metadata"]["name"] or ann.get(BIND_COMPLETED) != "yes":
            patch = {"metadata": {"annotations": {BIND_COMPLETED: "yes"}},
                     "spec": {"volumeName": pv["metadata"]["name"]}}
            if not (pvc.get("spec") or {}).get("volumeName"):
                patch["metadata"]["annotations"][BOUND_BY_CONTROLLER] = "yes"
            pvc = store.merge_patch(PVCS, ns, name, patch)
        self._status(pvc, "Bound", pv)


__all__ = ["PersistentVolumes", "claims_problem", "mount_problem", "mounted_volume", "prefilter_message",
           "register", "select_node", "volume_node_conflict"]
