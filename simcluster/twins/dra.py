"""Dynamic Resource Allocation in the control plane: the resourceclaim controller twin and the
scheduler side (the DynamicResources plugin) both scheduler twins use.

ResourceClaims controller (kube-controller-manager pkg/controller/resourceclaim, 1.34):
- a pod's `spec.resourceClaims[]` entry with `resourceClaimTemplateName` gets a claim made from
  the template (template labels/annotations, generateName `<pod>-<entry>-` truncated as upstream
  to 57 characters, annotation `resource.kubernetes.io/pod-claim-name`, the pod as controlling
  owner), recorded in the pod's `status.resourceClaimStatuses`;
- `status.reservedFor` loses pods that are gone or done; a claim reserved for nobody is
  deallocated (allocation and the `resource.kubernetes.io/delete-protection` finalizer removed),
  and a claim generated for a pod that is done or gone is deleted.

Scheduler (pkg/scheduler/framework/plugins/dynamicresources): PreFilter finds the pod's claims
(messages as upstream: `pod "ns/name": ResourceClaim not created yet`, `resourceclaim "x" is being
deleted`, `request r: device class c does not exist`, `resourceclaim in use`), Filter runs the
structured allocator per node (`cannot allocate all claims`; an allocated claim's node selector:
`resourceclaim not available on the node`), PreBind writes the finalizer, then
`status.allocation` and `status.reservedFor` before the pod's Binding.
"""

from ..errors import ApiError
from . import dra_allocator as alloc
from .matching import node_selector_term_matches
from .util import clone, pod_active, random_suffix

CLAIMS, SLICES, CLASSES, TEMPLATES = alloc.CLAIMS, alloc.SLICES, alloc.CLASSES, alloc.TEMPLATES
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
MAX_BASE = 57
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
MAX_RESERVED = 256


def generate_name(pod_name, claim_name):
    """The controller's generateName: both parts shortened in proportion when too long."""
    base = pod_name + "-" + claim_name + "-"
    if len(base) > MAX_BASE:
        base = (pod_name[:len(pod_name) * MAX_BASE // len(base)] + "-" +
                claim_name[:len(claim_name) * MAX_BASE // len(base)])
    return base


def claim_name(pod, entry):
    """resourceclaim.Name: (name or None, must check owner, error text or None)."""
    if entry.get("resourceClaimName"):
        return entry["resourceClaimName"], False, None
    if entry.get("resourceClaimTemplateName"):
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
            if st.get("name") == entry.get("name"):
                return st.get("resourceClaimName"), True, None
        return None, False, 'pod "%s/%s": ResourceClaim not created yet' % (
            pod["metadata"]["namespace"], pod["metadata"]["name"])
    return None, False, 'pod "%s/%s", spec.resourceClaim %r: API unsupported' % (
        pod["metadata"]["namespace"], pod["metadata"]["name"], entry.get("name"))


def owned_by(claim, pod):
    return any(r.get("uid") == pod["metadata"].get("uid") and r.get("controller")
               for r in claim["metadata"].get("ownerReferences") or ())


def reserved_for(claim, pod):
    return any(r.get("uid") == pod["metadata"].get("uid")
               for r in (claim.get("status") or {}).get("reservedFor") or ())


def pod_claims(ctx, pod):
    """The claims of a pod that exist: {pod claim entry name: claim}."""
    out = {}
    for entry in pod["spec"].get("resourceClaims") or ():
        name, _owner, _err = claim_name(pod, entry)
        if name:
            c = ctx.get_cached(CLAIMS, name, pod["metadata"]["namespace"])
            if c is not None:
                out[entry.get("name")] = c
    return out


class Pass:
    """What the DynamicResources plugin reads once per scheduling pass: slices indexed by node,
    classes, the devices allocated (kept current while the pass allocates)."""

    def __init__(self, ctx):
        self.ctx = ctx
        slices = ctx.informer.list(SLICES)
        cache = getattr(ctx, "_dra_index", None)
        if cache is None or cache[0] is not slices:
            cache = (slices, alloc.SliceIndex(slices))
            ctx._dra_index = cache
        self.index = cache[1]
        self.classes = {c["metadata"]["name"]: c for c in ctx.list(CLASSES)}
        self.in_use = alloc.allocated_devices(ctx.list(CLAIMS))


class PodState:
    """PreFilter of one pod: its claims, or the reason it cannot be scheduled on any node."""

    def __init__(self, ctx, pod, dpass):
        self.pod, self.dpass = pod, dpass
        self.problem = None
        self.claims = []             # claims of the pod in order
        self.to_allocate = []
        self.selectors = []          # node selectors of allocated claims
        self.allocations = {}        # node -> results
        ns = pod["metadata"]["namespace"]
        for entry in pod["spec"].get("resourceClaims") or ():
            name, must_own, err = claim_name(pod, entry)
            if err:
                self.problem = err
                return
            if name is None:
                continue
            claim = ctx.get_cached(CLAIMS, name, ns)
            if claim is None:
                self.problem = 'resourceclaim.resource.k8s.io "%s" not found' % name
                return
            if claim["metadata"].get("deletionTimestamp"):
                self.problem = 'resourceclaim "%s" is being deleted' % name
                return
            if must_own and not owned_by(claim, pod):
                self.problem = "ResourceClaim %s was not created for pod %s/%s (pod is not owner)" % (
                    name, ns, pod["metadata"]["name"])
                return
            self.claims.append(claim)
        for claim in self.claims:
            st = claim.get("status") or {}
            if st.get("allocation") is not None:
                if len(st.get("reservedFor") or ()) >= MAX_RESERVED and not reserved_for(claim, pod):
                    self.problem = "resourceclaim in use"
                    return
                sel = st["allocation"].get("nodeSelector")
                if sel:
                    self.selectors.append(sel)
                continue
            self.to_allocate.append(claim)
            for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
                subs = req.get("firstAvailable")
                pairs = ([("%s/%s" % (req.get("name"), s.get("name")), s.get("deviceClassName")) for s in subs]
                         if subs else [(req.get("name"), (req.get("exactly") or {}).get("deviceClassName"))])
                for rname, cname in pairs:
                    if not cname:
                        self.problem = "request %s: unsupported request type" % rname
                        return
                    if cname not in dpass.classes:
                        self.problem = "request %s: device class %s does not exist" % (rname, cname)
                        return

    def filter(self, node):
        """None if the pod's claims fit the node, else (reason, is_error)."""
        for sel in self.selectors:
            if not any(node_selector_term_matches(t, node) for t in sel.get("nodeSelectorTerms") or ()):
                return NOT_AVAILABLE, False
        if not self.to_allocate:
            return None
        try:
            got = alloc.allocate(self.to_allocate, node, self.dpass.index, self.dpass.in_use,
                                 self.dpass.classes)
        except alloc.AllocationError as err:
            return 'running Filter plugin "DynamicResources": %s' % err, True
        if got is None:
            return CANNOT_ALLOCATE, False
        self.allocations[node["metadata"]["name"]] = got
        return None

    def prebind(self, ctx, node_name):
        """Finalizer, allocation and reservation of every claim; False if a write lost a race."""
        store = ctx.store
        results = self.allocations.get(node_name) or []
        by_uid = {c["metadata"]["uid"]: r for c, r in zip(self.to_allocate, results)}
        ref = {"resource": "pods", "name": self.pod["metadata"]["name"], "uid": self.pod["metadata"]["uid"]}
        for claim in self.claims:
            if reserved_for(claim, self.pod):
                continue
            ns, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
            allocation = by_uid.get(claim["metadata"]["uid"])
            try:
                cur = store.get(CLAIMS, ns, name)
                if cur is None:
                    return False
                if allocation is not None:
                    if (cur.get("status") or {}).get("allocation") is not None:
                        return False          # another pod was faster
                    if alloc.FINALIZER not in (cur["metadata"].get("finalizers") or []):
                        cur["metadata"].setdefault("finalizers", []).append(alloc.FINALIZER)
                        cur = store.update(CLAIMS, cur)
                    status = clone(cur.get("status") or {})
                    status["allocation"] = allocation
                    for r in allocation["devices"]["results"]:
                        if not r.get("adminAccess"):
                            self.dpass.in_use.add((r["driver"], r["pool"], r["device"]))
                else:
                    status = clone(cur.get("status") or {})
                status["reservedFor"] = list(status.get("reservedFor") or []) + [ref]
                cur["status"] = status
                store.update_status(CLAIMS, cur)
            except ApiError as err:
                if err.code in (404, 409):
                    return False
                raise
        return True


def has_claims(pod):
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def prepare_problem(ctx, pod):
    """The kubelet's PrepareDynamicResources (pkg/kubelet/cm/dra/manager.go): None when every claim
    of the pod can be prepared, else its error. A driver counts as registered on the node while it
    publishes a ResourceSlice for the node (its kubelet plugin runs there)."""
    ns, node = pod["metadata"]["namespace"], pod["spec"].get("nodeName")
    for entry in pod["spec"].get("resourceClaims") or ():
        name, must_own, err = claim_name(pod, entry)
        if err:
            return err
        if name is None:
            continue
        claim = ctx.get_cached(CLAIMS, name, ns)
        if claim is None:
            return 'fetch ResourceClaim %s: resourceclaims.resource.k8s.io "%s" not found' % (name, name)
        if must_own and not owned_by(claim, pod):
            return "ResourceClaim %s was not created for pod %s/%s (pod is not owner)" % (
                name, ns, pod["metadata"]["name"])
        if not reserved_for(claim, pod):
            return "pod %s (%s) is not allowed to use ResourceClaim %s (%s)" % (
                pod["metadata"]["name"], pod["metadata"]["uid"], name, claim["metadata"].get("uid"))
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ())
        drivers = _registered(ctx)
        for driver in sorted({r.get("driver") for r in results}):
            if (driver, node) not in drivers and (driver, None) not in drivers:
                return "DRA driver %s is not registered" % driver
    return None


def _registered(ctx):
    """{(driver, node name or None)} of the slices, recomputed only when the slices change."""
    slices = ctx.informer.list(SLICES)
    cache = getattr(ctx, "_dra_drivers", None)
    if cache is None or cache[0] is not slices:
        cache = (slices, {((s.get("spec") or {}).get("driver"), (s.get("spec") or {}).get("nodeName") or None)
                          for s in slices})
        ctx._dra_drivers = cache
    return cache[1]


def kubelet_hook(ctx):
    """Before any container starts: the pod's claims are prepared, else it stays ContainerCreating
    with the kubelet's FailedPrepareDynamicResources event."""
    def hook(pod, _elapsed):
        if not has_claims(pod):
            return None
        problem = prepare_problem(ctx, pod)
        if problem is None:
            return None
        ctx.event_once(pod, "FailedPrepareDynamicResources", "Failed to prepare dynamic resources: %s" % problem,
                       "Warning")
        return {"kind": "creating", "retry": 0.5}
    return hook


class ResourceClaimController:
    """kube-controller-manager's resourceclaim controller (see module docstring)."""

    watches = {"pods", CLAIMS, TEMPLATES}

    def __init__(self, ctx):
        self.ctx = ctx

    def reconcile(self):
        ctx = self.ctx
        claims = ctx.list(CLAIMS)
        pods = [p for p in ctx.list("pods") if has_claims(p)]
        if not claims and not pods:
            return
        for pod in pods:
            if pod_active(pod) and not pod["metadata"].get("deletionTimestamp"):
                self._create_claims(pod, claims)
        for claim in claims:
            self._sync_claim(claim)

    def _create_claims(self, pod, claims):
        ctx, ns = self.ctx, pod["metadata"]["namespace"]
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        have = {s.get("name") for s in statuses}
        added = False
        for entry in pod["spec"].get("resourceClaims") or ():
            tname = entry.get("resourceClaimTemplateName")
            if not tname or entry.get("name") in have:
                continue
            existing = next((c for c in claims if c["metadata"].get("namespace") == ns and owned_by(c, pod)
                             and (c["metadata"].get("annotations") or {}).get(POD_CLAIM_ANNOTATION)
                             == entry.get("name")), None)
            if existing is None:
                template = ctx.get_cached(TEMPLATES, tname, ns)
                if template is None:
                    ctx.event_once(pod, "FailedResourceClaimCreation",
                                   'PodResourceClaim %s: resource claim template "%s": '
                                   'resourceclaimtemplate.resource.k8s.io "%s" not found'
                                   % (entry.get("name"), tname, tname), "Warning")
                    continue
                tmeta = (template.get("spec") or {}).get("metadata") or {}
                annotations = dict(tmeta.get("annotations") or {})
                annotations[POD_CLAIM_ANNOTATION] = entry.get("name")
                claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         # generateName as upstream; the suffix is drawn here (the twins' store protocol has no
                         # generateName), the same 5 characters the API server would append
                         "metadata": {"name": generate_name(pod["metadata"]["name"], entry.get("name"))
                                      + random_suffix(5),
                                      "namespace": ns, "annotations": annotations,
                                      "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                                           "name": pod["metadata"]["name"],
                                                           "uid": pod["metadata"]["uid"],
                                                           "controller": True, "blockOwnerDeletion": True}]},
                         "spec": clone((template.get("spec") or {}).get("spec") or {})}
                if tmeta.get("labels"):
                    claim["metadata"]["labels"] = dict(tmeta["labels"])
                try:
                    existing = ctx.store.create(CLAIMS, claim)
                except ApiError as err:
                    # e.g. the namespace's ResourceQuota: the pod keeps waiting, the reason is on it
                    ctx.event_once(pod, "FailedResourceClaimCreation", "PodResourceClaim %s: create "
                                   "ResourceClaim: %s" % (entry.get("name"), err.message), "Warning")
                    continue
            statuses.append({"name": entry.get("name"), "resourceClaimName": existing["metadata"]["name"]})
            added = True
        if added:
            try:
                ctx.store.merge_patch("pods", ns, pod["metadata"]["name"],
                                      {"status": {"resourceClaimStatuses": statuses}}, subresource="status")
            except ApiError as err:
                if err.code not in (404, 409):
                    raise

    def _sync_claim(self, claim):
        ctx, store = self.ctx, self.ctx.store
        meta = claim["metadata"]
        ns, name = meta.get("namespace"), meta.get("name")
        st = claim.get("status") or {}
        reserved = st.get("reservedFor") or []
        keep = []
        for ref in reserved:
            pod = ctx.get_cached("pods", ref.get("name"), ns) if ref.get("resource") == "pods" else None
            if ref.get("resource") != "pods" or (pod is not None and pod["metadata"].get("uid") == ref.get("uid")
                                                 and pod_active(pod)):
                keep.append(ref)
        owner = next((r for r in meta.get("ownerReferences") or () if r.get("kind") == "Pod" and r.get("controller")),
                     None)
        owner_pod = ctx.get_cached("pods", owner.get("name"), ns) if owner else None
        owner_done = owner is not None and (owner_pod is None or owner_pod["metadata"].get("uid") != owner.get("uid")
                                            or not pod_active(owner_pod))
        try:
            if keep != reserved or (not keep and st.get("allocation") is not None):
                cur = store.get(CLAIMS, ns, name)
                if cur is None:
                    return
                status = clone(cur.get("status") or {})
                status["reservedFor"] = keep
                if not keep:
                    status.pop("reservedFor", None)
                    status.pop("allocation", None)       # deallocate: the devices are free again
                cur["status"] = status
                cur = store.update_status(CLAIMS, cur)
                claim = cur
            if not keep and alloc.FINALIZER in (claim["metadata"].get("finalizers") or []) \
                    and (claim.get("status") or {}).get("allocation") is None:
                cur = store.get(CLAIMS, ns, name)
                if cur is not None:
                    cur["metadata"]["finalizers"] = [f for f in cur["metadata"].get("finalizers") or []
                                                     if f != alloc.FINALIZER]
                    store.update(CLAIMS, cur)
            if not keep and owner_done and not meta.get("deletionTimestamp"):
                store.delete(CLAIMS, ns, name)
        except ApiError as err:
            if err.code not in (404, 409):
                raise
