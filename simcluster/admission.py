"""Validation and admission of the simulated API server.

The store calls admit() before committing a create/update/delete; admit() may
mutate the object (defaults) and raises ApiError like kube-apiserver would.
Order, as in a real server: NamespaceLifecycle -> decode errors (400) ->
defaulting + mutating admission (LimitRanger) -> validation (422) -> validating
admission (LimitRanger, PodSecurity, ResourceQuota; 403).

The controllers whose status the rules read (ResourceQuota, PodDisruptionBudget)
are simcluster/controllers. Every rule and difference: docs/simcluster-fidelity.md.
"""

import threading
import weakref

from simcluster.errors import ApiError, forbidden, not_found
from simcluster.quota_usage import UsageMemo, claims_in, count_keys, object_counts, refs
from simcluster.validation import builtin_fields, core, names, podsecurity, schema
from simcluster.validation import limitranger, vap
from simcluster.validation import resource as dra
from simcluster.validation import quota as quota_mod

CRD_RESOURCE = "customresourcedefinitions.apiextensions.k8s.io"
CLAIMS = "resourceclaims.resource.k8s.io"
BUILTIN_GROUPS = {
    "apps", "batch", "autoscaling", "rbac.authorization.k8s.io", "networking.k8s.io", "policy",
    "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "events.k8s.io",
    "storage.k8s.io", "node.k8s.io", "discovery.k8s.io", "admissionregistration.k8s.io",
    "authorization.k8s.io", "authentication.k8s.io", "certificates.k8s.io",
    "apiregistration.k8s.io", "flowcontrol.apiserver.k8s.io", "resource.k8s.io",
}
_POD_CONTROLLERS = set(core.TEMPLATE_PATHS)
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


# -- per-store state ---------------------------------------------------------

class _State:
    def __init__(self):
        self.lock = threading.Lock()     # caches only; never held while calling the store
        self.crds = {}                   # CRD name -> _CompiledCRD
        self.usage_of = UsageMemo()      # the quota check recounts the namespace's pods


class _CompiledCRD:
    def __init__(self, crd):
        spec = crd.get("spec") or {}
        self.rv = (crd.get("metadata") or {}).get("resourceVersion")
        self.group = spec.get("group", "")
        self.kind = (spec.get("names") or {}).get("kind", "")
        self.versions = {}
        self.storage = None
        for v in spec.get("versions") or ():
            sch = ((v.get("schema") or {}).get("openAPIV3Schema"))
            self.versions[v.get("name")] = schema.compile_schema(sch or {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True})
            if v.get("storage"):
                self.storage = v.get("name")


_STATES = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def attach(store):
    """The store's admission state; watches CRDs (a changed CRD's schema is recompiled)."""
    with _STATES_LOCK:
        st = _STATES.get(store)
        if st is not None:
            return st
        st = _STATES[store] = _State()
    store.subscribe(lambda ev, res, obj: _forget_crd(st, res, obj))
    return st


def _forget_crd(st, resource, obj):
    if resource == CRD_RESOURCE:
        with st.lock:
            st.crds.pop(((obj or {}).get("metadata") or {}).get("name"), None)


def _split(resource):
    plural, _, group = resource.partition(".")
    return plural, group


def _kind_of(obj, resource):
    return obj.get("kind") or _split(resource)[0].capitalize()


def _invalid(obj, resource, errs, kind=None, group=None):
    kind = kind or _kind_of(obj, resource)
    group = _split(resource)[1] if group is None else group
    name = (obj.get("metadata") or {}).get("name") or ""
    shown = kind + ("." + group if group else "")
    texts = [str(e) for e in errs]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (shown, name, joined),
                    {"name": name, "group": group, "kind": kind,
                     "causes": [e.cause() for e in errs]})


def _version_of(obj, default="v1"):
    api = obj.get("apiVersion")
    if not isinstance(api, str):
        return default
    return api.rsplit("/", 1)[-1] or default


# -- admit -------------------------------------------------------------------

def admit(store, op, resource, obj, old, *, dry_run=False, subresource=None,
          field_validation="Warn", user="admin"):
    """Validate and admit one write; returns warning texts. See module docstring."""
    st = attach(store)
    warnings = []
    if op == "DELETE":
        meta = (old or obj or {}).get("metadata") or {}
        if resource == "namespaces" and meta.get("name") in IMMORTAL_NAMESPACES:
            raise forbidden("namespaces", meta["name"], "this namespace may not be deleted")
        return warnings
    if obj is None:
        return warnings
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    plural, group = _split(resource)
    is_custom = bool(group) and group not in BUILTIN_GROUPS

    if subresource is not None:
        if is_custom and subresource == "status":
            _admit_custom(st, store, resource, obj, old, op, field_validation, warnings)
        elif resource == CLAIMS and subresource == "status":
            errs = dra.validate_claim_status(obj, old)
            if errs:
                raise _invalid(obj, resource, errs, kind="ResourceClaim")
        return warnings

    if op == "CREATE" and ns and resource != "namespaces":
        _namespace_lifecycle(store, ns, resource, meta.get("name"))

    if is_custom:
        _admit_custom(st, store, resource, obj, old, op, field_validation, warnings)
        vap.admit(store, op, resource, obj, old, user=user)
        return warnings
    try:
        return _admit_builtin(st, store, op, resource, obj, old, dry_run, field_validation,
                              warnings)
    except (AttributeError, TypeError, KeyError) as exc:
        # A field of the wrong JSON type: the real server fails decoding (400).
        kind, version = _kind_of(obj, resource), _version_of(obj)
        raise ApiError(400, "BadRequest", '%s in version "%s" cannot be handled as a %s: '
                       "json: cannot unmarshal a field of the wrong type (%s)"
                       % (kind, version, kind, exc))


def _admit_builtin(st, store, op, resource, obj, old, dry_run, field_validation, warnings):
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    group = _split(resource)[1]
    ctx = (_kind_of(obj, resource), _version_of(obj))
    # Decoding: unknown fields of built-in kinds (strict decoding error / warning / dropped).
    unknown = builtin_fields.prune_unknown(obj, group, ctx[1], ctx[0])
    if unknown:
        _unknown_fields(unknown, ctx[0], ctx[1], field_validation, warnings)
    # Defaulting and mutating admission.
    lrs = []
    if resource == "pods":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            core.default_pod_requests(spec)
            if op == "CREATE" and ns:
                lrs = store.list("limitranges", ns)
                if lrs:
                    limitranger.mutate_pod(obj, lrs)
    elif resource == "limitranges":
        core.default_limit_range(obj)
    elif resource in ("persistentvolumeclaims", "persistentvolumes"):
        _default_volume_fields(resource, obj)
        if resource == "persistentvolumeclaims" and op == "CREATE":
            _default_storage_class(store, obj)
    elif resource in dra.VALIDATORS:
        dra.default(resource, obj)
    core.canonicalize_quantities(resource, obj)

    # Validation (422).
    errs = names.validate_object_meta(resource, obj, old if op == "UPDATE" else None)
    if op == "CREATE" and resource in dra.ADMIN_CHECKED:
        errs.extend(dra.authorized_for_admin(resource, obj, store.get("namespaces", None, ns) if ns else None))
    errs.extend(_validate_kind(resource, obj, old, op, ctx))
    if errs:
        raise _invalid(obj, resource, errs)

    # Validating admission (403) and warnings.
    if resource == "pods" and op == "CREATE":
        if lrs:
            problems = limitranger.validate_pod(obj, lrs)
            if problems:
                why = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
                raise forbidden("pods", meta.get("name"), why)
    if resource == "pods" or resource in _POD_CONTROLLERS:
        warnings.extend(_pod_security(store, resource, obj, old, op))
    elif resource == "namespaces":
        warnings.extend(_namespace_security(store, obj, old, op))
    vap.admit(store, op, resource, obj, old)   # ValidatingAdmissionPolicy runs before ResourceQuota
    if op == "CREATE" and ns:
        _quota(st, store, resource, obj)
    return warnings


def _default_volume_fields(resource, obj):
    """SetDefaults_PersistentVolumeClaimSpec / SetDefaults_PersistentVolume: volumeMode Filesystem;
    a PV's reclaim policy Retain; the phase Pending."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("volumeMode", "Filesystem")
    if resource == "persistentvolumes":
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    # SetDefaults_PersistentVolumeClaim / _PersistentVolume: phase Pending (applied on every decode,
    # so a claim reads Pending before the PV controller has looked at it)
    status = obj.setdefault("status", {})
    if isinstance(status, dict) and not status.get("phase"):
        status["phase"] = "Pending"


def _default_storage_class(store, obj):
    """DefaultStorageClass: a claim created without spec.storageClassName (nil, not "") gets the
    default class; with several defaults the newest (then the first by name)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("storageClassName") is not None:
        return
    from simcluster.twins.volumes import STORAGE_CLASSES, default_class  # the one rule, shared with the twin
    chosen = default_class(store.list(STORAGE_CLASSES))
    if chosen is not None:
        spec["storageClassName"] = chosen["metadata"]["name"]


def _namespace_lifecycle(store, ns, resource, name):
    nsobj = store.get("namespaces", None, ns)
    if nsobj is None:
        raise not_found("namespaces", ns)
    if (nsobj.get("metadata") or {}).get("deletionTimestamp") or \
            (nsobj.get("status") or {}).get("phase") == "Terminating":
        plural, group = _split(resource)
        err = forbidden(plural, name or "", "unable to create new content in namespace %s "
                        "because it is being terminated" % ns, group)
        err.details["causes"] = [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                  "message": "namespace %s is being terminated" % ns}]
        raise err


def _validate_kind(resource, obj, old, op, ctx):
    if resource == "pods":
        if op == "CREATE":
            return core.validate_pod_spec(obj.get("spec"), "spec", ctx)
        return core.validate_pod_update(obj, old) if old is not None else []
    if resource in _POD_CONTROLLERS:
        errs = core.validate_workload(resource, obj, ctx)
        if op == "UPDATE" and old is not None:
            errs.extend(core.validate_workload_update(resource, obj, old))
        return errs
    if resource == "resourcequotas":
        return core.validate_resource_quota(obj, ctx)
    if resource == "limitranges":
        return core.validate_limit_range(obj, ctx)
    if resource == "networkpolicies.networking.k8s.io":
        return core.validate_network_policy(obj)
    if resource == "poddisruptionbudgets.policy":
        return core.validate_pdb(obj)
    if resource in dra.VALIDATORS:
        return dra.VALIDATORS[resource](obj, old if op == "UPDATE" else None)
    return []


# -- custom resources ----------------------------------------------------------

def _crd_for(st, store, resource):
    with st.lock:
        entry = st.crds.get(resource)
    if entry is not None:
        return entry
    crd = store.get(CRD_RESOURCE, None, resource)
    if crd is None:
        return None
    entry = _CompiledCRD(crd)
    with st.lock:
        st.crds[resource] = entry
    return entry


def _admit_custom(st, store, resource, obj, old, op, field_validation, warnings):
    entry = _crd_for(st, store, resource)
    if entry is None:
        return
    version = _version_of(obj, entry.storage)
    node = entry.versions.get(version) or entry.versions.get(entry.storage)
    if node is None:
        return
    kind = obj.get("kind") or entry.kind
    unknown = schema.prune(obj, node)
    if unknown:
        _unknown_fields(unknown, kind, version, field_validation, warnings)
    schema.apply_defaults(obj, node)
    errs = names.validate_object_meta(resource, obj, old if op == "UPDATE" else None)
    schema_errs = schema.validate(obj, node, old if op == "UPDATE" else None)
    if op == "UPDATE" and old is not None and schema_errs:
        schema_errs = [e for e in schema_errs if not _unchanged(e.field, obj, old)]
    errs.extend(schema_errs)
    if errs:
        raise _invalid(obj, resource, errs, kind=kind, group=entry.group)


def _unknown_fields(paths, kind, version, field_validation, warnings):
    """fieldValidation: Strict -> 400 strict decoding error, Warn -> warnings, Ignore."""
    if field_validation == "Strict":
        raise ApiError(400, "BadRequest", '%s in version "%s" cannot be handled as a %s: '
                       "strict decoding error: %s" % (
                           kind, version, kind,
                           ", ".join('unknown field "%s"' % p for p in paths)))
    if field_validation != "Ignore":
        warnings.extend('unknown field "%s"' % p for p in paths)


_MISSING = object()


def _value_at(obj, path):
    cur = obj
    for part in path.replace("]", "").replace("[", ".").split("."):
        if isinstance(cur, dict):
            cur = cur.get(part, _MISSING)
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
        if cur is _MISSING:
            return _MISSING
    return cur


def _unchanged(path, new, old):
    """CRD validation ratcheting: an invalid value that did not change is tolerated."""
    before = _value_at(old, path)
    return before is not _MISSING and before == _value_at(new, path)


# -- Pod Security Admission -------------------------------------------------------

def _ns_policy(store, ns):
    nsobj = store.get("namespaces", None, ns) if ns else None
    labels = ((nsobj or {}).get("metadata") or {}).get("labels") or {}
    if not any(k.startswith(podsecurity.PREFIX) for k in labels):
        return None
    return podsecurity.policy_from_labels(labels)[0]


def _pod_security(store, resource, obj, old, op):
    meta = obj.get("metadata") or {}
    policy = _ns_policy(store, meta.get("namespace"))
    if policy is None:
        return []
    if resource == "pods":
        pmeta, spec = meta, obj.get("spec")
        if op == "UPDATE" and old is not None and not _significant_pod_update(obj, old):
            return []
    else:
        tmpl, _ = core.pod_template(resource, obj)
        if tmpl is None:
            return []
        if op == "UPDATE" and old is not None:
            old_tmpl, _ = core.pod_template(resource, old)
            if old_tmpl == tmpl:
                return []
        pmeta, spec = tmpl.get("metadata") or {}, tmpl.get("spec")
    warnings = []
    enforce, warn = policy["enforce"], policy["warn"]
    results = podsecurity.evaluate(enforce, pmeta, spec)
    if results:
        if resource == "pods":
            raise forbidden("pods", meta.get("name"), 'violates PodSecurity "%s": %s'
                            % (enforce, podsecurity.detail(results)))
        warnings.append('would violate PodSecurity "%s": %s' % (enforce,
                                                                podsecurity.detail(results)))
    if warn.level != "privileged" and not (warn == enforce and results):
        wres = results if warn == enforce else podsecurity.evaluate(warn, pmeta, spec)
        if wres:
            warnings.append('would violate PodSecurity "%s": %s' % (warn,
                                                                    podsecurity.detail(wres)))
    return warnings


def _significant_pod_update(new, old):
    """PSA ignores pod updates that only touch metadata, status or container images."""
    def strip(pod):
        spec = dict(pod.get("spec") or {})
        for key in ("containers", "initContainers"):
            spec[key] = [{k: v for k, v in (c or {}).items() if k != "image"}
                         for c in spec.get(key) or ()]
        return spec
    return strip(new) != strip(old)


def _namespace_security(store, obj, old, op):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not any(k.startswith(podsecurity.PREFIX) for k in labels):
        return []
    policy, errs = podsecurity.policy_from_labels(labels)
    if errs:
        name = (obj.get("metadata") or {}).get("name")
        texts = [str(e) for e in errs]
        joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        raise ApiError(422, "Invalid", 'namespaces "%s" is invalid: %s' % (name, joined),
                       {"name": name, "group": "", "kind": "namespaces",
                        "causes": [e.cause() for e in errs]})
    if op != "UPDATE" or old is None:
        return []
    old_policy = podsecurity.policy_from_labels(
        (old.get("metadata") or {}).get("labels") or {})[0]
    enforce = policy["enforce"]
    if enforce == old_policy["enforce"] or enforce.level == "privileged":
        return []
    ns = (obj.get("metadata") or {}).get("name")
    by_reason = {}
    for pod in store.list("pods", ns):
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        res = podsecurity.evaluate(enforce, pod.get("metadata") or {}, pod.get("spec"))
        if res:
            by_reason.setdefault(podsecurity.reasons(res), []).append(pod["metadata"]["name"])
    if not by_reason:
        return []
    out = ['existing pods in namespace "%s" violate the new PodSecurity enforce level "%s"'
           % (ns, enforce)]
    for reason, pods in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        pods = sorted(pods)
        if len(pods) == 1:
            out.append("%s: %s" % (pods[0], reason))
        else:
            out.append("%s (and %d other %s): %s" % (pods[0], len(pods) - 1,
                                                    "pod" if len(pods) == 2 else "pods", reason))
    return out


# -- ResourceQuota ------------------------------------------------------------------

def _quota(st, store, resource, obj):
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    quotas = refs(store, "resourcequotas", ns)
    if not quotas:
        return
    if resource == "pods":
        delta = quota_mod.pod_usage(obj)
    elif resource == "persistentvolumeclaims":
        delta = dict(quota_mod.pvc_usage(obj), **{k: quota_mod.ONE for k in count_keys(resource)})
    elif resource == CLAIMS:
        delta = quota_mod.claim_usage(obj)
    else:
        delta = {k: quota_mod.ONE for k in count_keys(resource)}
    pods = None
    for q in sorted(quotas, key=lambda x: x["metadata"]["name"]):
        hard = quota_mod.hard_of(q)
        if resource == "pods":
            if not any(quota_mod.is_pod_key(k) for k in hard):
                continue
            if not quota_mod.quota_matches_pod(q, obj):
                continue
            # Constraints come before usage: a cpu/memory quota needs explicit values.
            missing = quota_mod.constraints(obj, [k for k in hard if quota_mod.is_pod_key(k)])
            if missing:
                raise forbidden("pods", meta.get("name"), "failed quota: %s: %s"
                                % (q["metadata"]["name"], missing))
            if pods is None:
                pods = refs(store, "pods", ns)
            used = quota_mod.compute_used(q, pods, {}, st.usage_of)
        else:
            if not any(k in hard for k in delta):
                continue
            pvcs = (refs(store, "persistentvolumeclaims", ns) if resource == "persistentvolumeclaims"
                    and any(quota_mod.is_pvc_key(k) for k in hard) else ())
            claims = (claims_in(store, ns) if any(quota_mod.is_claim_key(k) for k in hard) else ())
            used = quota_mod.compute_used(q, [], object_counts(store, ns, q), pvcs=pvcs, claims=claims)
        why = quota_mod.check(q, delta, used)
        if why:
            plural, group = _split(resource)
            raise forbidden(plural, meta.get("name"), why, group)


__all__ = ["admit", "attach"]
