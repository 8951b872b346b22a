"""Validation and admission of the simulated API server.

The store calls admit() before committing a create/update/delete; admit() may
mutate the object (defaults) and raises ApiError like kube-apiserver would.
Order, as in a real server: NamespaceLifecycle -> decode errors (400) ->
defaulting + mutating admission (LimitRanger) -> validation (422) -> validating
admission (LimitRanger, PodSecurity, ResourceQuota; 403).

After commits (store.subscribe), this module also plays the controllers whose
status the admission rules need: ResourceQuota status.hard/used and
PodDisruptionBudget status. Every rule and difference: docs/simcluster-fidelity.md.
"""

import datetime
import threading
import weakref

from simcluster.errors import ApiError, forbidden, not_found
from simcluster.validation import builtin_fields, core, names, podsecurity, schema
from simcluster.validation import disruption, limitranger, vap
from simcluster.validation import quota as quota_mod

CRD_RESOURCE = "customresourcedefinitions.apiextensions.k8s.io"
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
        self.sync = threading.RLock()    # serialises status recomputation (quota, PDB)
        self.crds = {}                   # CRD name -> _CompiledCRD
        self.quotas = {}                 # namespace -> {name: quota}
        self.pdbs = {}                   # namespace -> set(names)
        self.pod_sig = {}                # (namespace, name) -> usage signature
        self.usage_memo = {}             # (uid, resourceVersion) -> pod usage


def _refs(store, resource, ns):
    """The stored objects without deep copies when the store offers it (read-only use)."""
    fn = getattr(store, "list_with_rv", None)
    if fn is not None:
        try:
            return fn(resource, ns, copy=False)[0]
        except TypeError:
            pass
    return store.list(resource, ns)


def _usage_getter(st):
    memo = st.usage_memo

    def usage_of(pod):
        meta = pod.get("metadata") or {}
        key = (meta.get("uid"), meta.get("resourceVersion"))
        if key[0] is None or key[1] is None:
            return quota_mod.pod_usage(pod)
        got = memo.get(key)
        if got is None:
            if len(memo) > 50000:
                memo.clear()
            got = memo[key] = quota_mod.pod_usage(pod)
        return got
    return usage_of


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
    """Hook the store's events (idempotent). admit() calls it on first use."""
    with _STATES_LOCK:
        st = _STATES.get(store)
        if st is not None:
            return st
        st = _STATES[store] = _State()
    store.subscribe(lambda ev, res, obj: _on_event(store, st, ev, res, obj))
    for q in store.list("resourcequotas"):
        meta = q.get("metadata") or {}
        st.quotas.setdefault(meta.get("namespace"), {})[meta.get("name")] = q
    for p in store.list("poddisruptionbudgets.policy"):
        meta = p.get("metadata") or {}
        st.pdbs.setdefault(meta.get("namespace"), set()).add(meta.get("name"))
    return st


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
    core.canonicalize_quantities(resource, obj)

    # Validation (422).
    errs = names.validate_object_meta(resource, obj, old if op == "UPDATE" else None)
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

def _count_keys(resource):
    keys = {quota_mod.count_key(resource)}
    if resource in quota_mod.LEGACY_COUNTS:
        keys.add(resource)
    return keys


def _quota(st, store, resource, obj):
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    with st.lock:
        quotas = list((st.quotas.get(ns) or {}).values())
    if not quotas:
        return
    if resource == "pods":
        delta = quota_mod.pod_usage(obj)
    elif resource == "persistentvolumeclaims":
        delta = dict(quota_mod.pvc_usage(obj), **{k: quota_mod.ONE for k in _count_keys(resource)})
    else:
        delta = {k: quota_mod.ONE for k in _count_keys(resource)}
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
                pods = _refs(store, "pods", ns)
            used = quota_mod.compute_used(q, pods, {}, _usage_getter(st))
        else:
            if not any(k in hard for k in delta):
                continue
            pvcs = (_refs(store, "persistentvolumeclaims", ns) if resource == "persistentvolumeclaims"
                    and any(quota_mod.is_pvc_key(k) for k in hard) else ())
            used = quota_mod.compute_used(q, [], _object_counts(store, ns, q), pvcs=pvcs)
        why = quota_mod.check(q, delta, used)
        if why:
            plural, group = _split(resource)
            raise forbidden(plural, meta.get("name"), why, group)


def _object_counts(store, ns, quota):
    counts = {}
    for key in (quota.get("spec") or {}).get("hard") or {}:
        if key.startswith("count/") and key != "count/pods":
            res = key[len("count/"):]
        elif key in quota_mod.LEGACY_COUNTS and key != "pods":
            res = quota_mod.LEGACY_COUNTS[key]
        else:
            continue
        try:
            counts[key] = len(_refs(store, res, ns))
        except Exception:  # unknown resource: counts nothing, like the real evaluator
            counts[key] = 0
    return counts


def _refresh_quotas(store, st, ns, names_=None):
    """Write status.hard/used of the namespace's quotas when they changed."""
    with st.lock:
        quotas = dict(st.quotas.get(ns) or {})
    if not quotas:
        return
    with st.sync:
        pods = None
        for name in sorted(quotas):
            if names_ is not None and name not in names_:
                continue
            q = store.get("resourcequotas", ns, name)
            if q is None:
                continue
            if pods is None and any(quota_mod.is_pod_key(k)
                                    for k in (q.get("spec") or {}).get("hard") or {}):
                pods = _refs(store, "pods", ns)
            try:
                pvcs = (_refs(store, "persistentvolumeclaims", ns)
                        if any(quota_mod.is_pvc_key(k) for k in (q.get("spec") or {}).get("hard") or {}) else ())
                status = quota_mod.status_of(q, pods or [], _object_counts(store, ns, q),
                                             _usage_getter(st), pvcs)
            except (AttributeError, TypeError):
                continue  # malformed quota stored without admission: leave it alone
            if q.get("status") == status:
                continue
            q["status"] = status
            q.get("metadata", {}).pop("resourceVersion", None)
            try:
                store.update_status("resourcequotas", q)
            except ApiError:
                pass  # deleted meanwhile


def _pod_signature(pod):
    if not quota_mod.pod_counts(pod):
        return None
    return tuple(sorted((k, str(v)) for k, v in quota_mod.pod_usage(pod).items())), \
        (pod.get("spec") or {}).get("priorityClassName"), \
        (pod.get("spec") or {}).get("activeDeadlineSeconds")


def _on_event(store, st, event, resource, obj):
    try:
        _handle_event(store, st, event, resource, obj)
    except (AttributeError, TypeError, ValueError, KeyError):
        pass  # objects written without admission may be malformed: nothing to count


def _handle_event(store, st, event, resource, obj):
    meta = (obj or {}).get("metadata") or {}
    ns, name = meta.get("namespace"), meta.get("name")
    if resource == CRD_RESOURCE:
        with st.lock:
            st.crds.pop(name, None)
        return
    if resource == "resourcequotas":
        with st.lock:
            if event == "DELETED":
                (st.quotas.get(ns) or {}).pop(name, None)
            else:
                st.quotas.setdefault(ns, {})[name] = obj
        # Our own status writes come back as MODIFIED: recount only for spec changes.
        hard = (obj.get("spec") or {}).get("hard") or {}
        if event == "ADDED" or (event == "MODIFIED"
                                and (obj.get("status") or {}).get("hard") != hard):
            _refresh_quotas(store, st, ns, {name})
        return
    if resource == "poddisruptionbudgets.policy":
        with st.lock:
            if event == "DELETED":
                st.pdbs.get(ns, set()).discard(name)
            else:
                st.pdbs.setdefault(ns, set()).add(name)
        if event != "DELETED":
            _refresh_pdbs(store, st, ns, {name})
        return
    if not ns:
        return
    with st.lock:
        has_quota = bool(st.quotas.get(ns))
        has_pdb = bool(st.pdbs.get(ns))
    if resource == "pods":
        key = (ns, name)
        # Only pods in namespaces with a quota are tracked (a new quota recounts anyway).
        sig = None if event == "DELETED" or not has_quota else _pod_signature(obj)
        with st.lock:
            changed = st.pod_sig.get(key) != sig
            if sig is None:
                st.pod_sig.pop(key, None)
            else:
                st.pod_sig[key] = sig
        if has_quota and changed:
            _refresh_quotas(store, st, ns)
        if has_pdb:
            _refresh_pdbs(store, st, ns)
        return
    if has_quota and resource == "persistentvolumeclaims":     # counts and storage (a resize too)
        keys = _count_keys(resource)
        with st.lock:
            hit = [qn for qn, q in (st.quotas.get(ns) or {}).items()
                   if any(k in keys or quota_mod.is_pvc_key(k) for k in (q.get("spec") or {}).get("hard") or {})]
        if hit:
            _refresh_quotas(store, st, ns, set(hit))
        return
    if has_quota and event in ("ADDED", "DELETED"):
        keys = _count_keys(resource)
        with st.lock:
            hit = [qn for qn, q in (st.quotas.get(ns) or {}).items()
                   if keys & set(((q.get("spec") or {}).get("hard") or {}))]
        if hit:
            _refresh_quotas(store, st, ns, set(hit))


# -- PodDisruptionBudget status and eviction ------------------------------------------

def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _refresh_pdbs(store, st, ns, names_=None):
    with st.sync:
        pods = None
        for pdb in store.list("poddisruptionbudgets.policy", ns):
            if names_ is not None and pdb["metadata"]["name"] not in names_:
                continue
            if pods is None:
                pods = _refs(store, "pods", ns)
            try:
                status = disruption.status_of(pdb, pods, _now(), _scale_getter(store))
            except (AttributeError, TypeError, ValueError):
                continue  # malformed budget stored without admission: leave it alone
            old = dict(pdb.get("status") or {})
            old.pop("disruptedPods", None)
            if old == status:
                continue
            pdb["status"] = status
            pdb.get("metadata", {}).pop("resourceVersion", None)
            try:
                store.update_status("poddisruptionbudgets.policy", pdb)
            except ApiError:
                pass


_SCALED = {"ReplicaSet": "replicasets.apps", "StatefulSet": "statefulsets.apps",
           "ReplicationController": "replicationcontrollers", "Deployment": "deployments.apps"}


def _scale_getter(store):
    """Replicas of a pod's controller; a ReplicaSet owned by a Deployment uses the Deployment."""
    def scale_of(ns, ref):
        res = _SCALED.get(ref.get("kind"))
        obj = store.get(res, ns, ref.get("name")) if res else None
        if obj is None:
            return None
        if ref.get("kind") == "ReplicaSet":
            owner = next((r for r in (obj.get("metadata") or {}).get("ownerReferences") or ()
                          if r.get("controller") and r.get("kind") == "Deployment"), None)
            if owner is not None:
                dep = scale_of(ns, owner)
                if dep is not None:
                    return dep
        return int((obj.get("spec") or {}).get("replicas", 1))
    return scale_of


def evict(store, namespace, name, body):
    """POST pods/{name}/eviction (policy/v1 Eviction), honouring PodDisruptionBudgets."""
    attach(store)
    body = body or {}
    bname = (body.get("metadata") or {}).get("name")
    if bname and bname != name:
        raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
    pod = store.get("pods", namespace, name)
    if pod is None:
        raise not_found("pods", name)
    opts = body.get("deleteOptions") or {}
    dry_run = "All" in (opts.get("dryRun") or ())
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed", "Pending") or \
            (pod.get("metadata") or {}).get("deletionTimestamp"):
        return _evict_delete(store, namespace, name, dry_run)
    pdbs = [p for p in store.list("poddisruptionbudgets.policy", namespace)
            if disruption.matching_pods(p, [pod])]
    if len(pdbs) > 1:
        raise ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, "
                       "which the eviction subresource does not support.")
    if not pdbs:
        return _evict_delete(store, namespace, name, dry_run)
    pdb = pdbs[0]
    pods = store.list("pods", namespace)
    nums = disruption.budget(pdb, pods, _scale_getter(store))
    if not disruption.pod_healthy(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow" or (nums["currentHealthy"] >= nums["desiredHealthy"]
                                       and nums["desiredHealthy"] > 0):
            return _evict_delete(store, namespace, name, dry_run)
    if nums["disruptionsAllowed"] <= 0:
        raise ApiError(429, "TooManyRequests",
                       "Cannot evict pod as it would violate the pod's disruption budget.",
                       {"causes": [{"reason": "DisruptionBudget",
                                    "message": "The disruption budget %s needs %d healthy pods "
                                    "and has %d currently" % (pdb["metadata"]["name"],
                                                              nums["desiredHealthy"],
                                                              nums["currentHealthy"])}]})
    return _evict_delete(store, namespace, name, dry_run)


def _evict_delete(store, namespace, name, dry_run):
    if not dry_run:
        store.delete("pods", namespace, name)
    return None


__all__ = ["admit", "evict", "attach"]
