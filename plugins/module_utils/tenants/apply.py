# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge every team's objects in one pass: the body of the tenants_apply module.

Runs on the converge engine (core/converge.py). Reads: one LIST per kind (Namespaces
unfiltered, so that a namespace someone else owns is refused before anything is written;
the other kinds by the managed-by label), plus the nodes and the mig-parted ConfigMap only
when a quota needs them. Writes: one request per object that differs (create, JSON merge
patch of what we own, delete), in parallel within a bound; check mode writes nothing.
Nothing is written before every team validated; nothing without our managed-by label is
changed or deleted. The tenants rules plugged into the engine: TenantsStrategy (compare
by owned fields, merge patch, roleRef change = delete and create), which objects of a
listed team are pruned, and the namespaces of teams no longer listed (prune/force).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import converge as engine
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import claims as tenants_claims
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.quantity import (
    QuantityError,
    normalize_quantities,
    parse_quantity,
)

SELECTOR = engine.selector(engine.MANAGED_BY)


# ---------------------------------------------------------------------------
# comparison (pure)
# ---------------------------------------------------------------------------

def _drop_empty(value):
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = _drop_empty(item)
            if item not in (None, [], {}, ""):
                out[key] = item
        return out
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def _quantities(mapping):
    return dict((k, str(v)) for k, v in (normalize_quantities(mapping) or {}).items())


def _policy_spec(spec):
    spec = json.loads(json.dumps(spec or {}))
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or []:
            for port in rule.get("ports") or []:
                port.setdefault("protocol", upstream.PROTOCOL_TCP)
    if not spec.get("policyTypes"):    # the API server's default
        spec["policyTypes"] = [upstream.NETPOL_INGRESS] + ([upstream.NETPOL_EGRESS] if spec.get("egress") else [])
    return spec


def comparable(obj):
    """What we own of an object, normalised: labels and annotations we set, and the spec."""
    kind = obj["kind"]
    if kind == "ResourceQuota":
        spec = dict(obj.get("spec") or {})
        spec["hard"] = _quantities(spec.get("hard"))
        body = {"spec": spec}
    elif kind == "LimitRange":
        limits = []
        for item in (obj.get("spec") or {}).get("limits") or []:
            limits.append(dict((k, _quantities(v) if isinstance(v, dict) else v) for k, v in item.items()))
        body = {"spec": {"limits": limits}}
    elif kind == "NetworkPolicy":
        body = {"spec": _policy_spec(obj.get("spec"))}
    elif kind == "RoleBinding":
        subjects = []
        for subject in obj.get("subjects") or []:
            subject = dict(subject)
            if subject.get("kind") in (upstream.SUBJECT_USER, upstream.SUBJECT_GROUP):
                subject.setdefault("apiGroup", upstream.RBAC_API_GROUP)
            subjects.append(subject)
        body = {"roleRef": obj.get("roleRef"), "subjects": subjects}
    elif kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ResourceClaimTemplate"):
        body = {"spec": obj.get("spec") or {}}
    else:
        body = {}
    return _drop_empty(body)


def owned_keys(obj):
    """The label and annotation keys we set last time (from our annotation)."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(tenants.OWNED_KEYS_ANNOTATION)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        data = {}
    return set(data.get("labels") or []), set(data.get("annotations") or [])


def _metadata_patch(desired, live):
    """Merge-patch of labels/annotations: ours set, ours no longer wanted removed, others kept."""
    patch = {}
    old_labels, old_annotations = owned_keys(live)
    for field, old in (("labels", old_labels), ("annotations", old_annotations)):
        want = desired["metadata"].get(field) or {}
        have = live["metadata"].get(field) or {}
        change = dict((k, v) for k, v in want.items() if have.get(k) != v)
        change.update(dict((k, None) for k in old if k not in want and k in have))
        if change:
            patch[field] = change
    return patch


def merge_diff(live, desired):
    """RFC 7386 merge patch turning `live` into `desired` (lists are replaced whole)."""
    if not isinstance(live, dict) or not isinstance(desired, dict):
        return desired
    out = dict((k, None) for k in live if k not in desired)
    for key, value in desired.items():
        if isinstance(value, dict) and isinstance(live.get(key), dict):
            sub = merge_diff(live[key], value)
            if sub:
                out[key] = sub
        elif live.get(key) != value:
            out[key] = value
    return out


def plan_update(desired, live):
    """(patch or None, changed field names, replace_needed) for one existing object."""
    meta = _metadata_patch(desired, live)
    want, have = comparable(desired), comparable(live)
    fields = ["metadata.%s" % k for k in sorted(meta)]
    fields += sorted(k if k != "spec" else "spec" for k in set(want) | set(have) if want.get(k) != have.get(k))
    if not fields:
        return None, [], False
    if desired["kind"] == "RoleBinding" and want.get("roleRef") != have.get("roleRef"):
        return None, fields, True           # roleRef is immutable: delete and create
    if desired["kind"] == "ResourceClaimTemplate" and want.get("spec") != have.get("spec"):
        return None, fields, True           # a template's spec is immutable: delete and create
    patch = {}
    if meta:
        patch["metadata"] = meta
    for key in ("spec", "roleRef", "subjects"):
        if key in desired and want.get(key) != have.get(key):
            patch[key] = merge_diff(live.get(key), desired[key]) if key == "spec" else desired[key]
    return patch, fields, False


def diff_view(obj, desired=None):
    """The part of an object we own; for a live object only the label/annotation keys we set or want."""
    if obj is None:
        return {}
    meta = obj.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if desired is not None:
        old_labels, old_annotations = owned_keys(obj)
        want = desired["metadata"]
        labels = dict((k, v) for k, v in labels.items() if k in old_labels or k in (want.get("labels") or {}))
        annotations = dict((k, v) for k, v in annotations.items()
                           if k in old_annotations or k in (want.get("annotations") or {}))
    view = {"metadata": {"name": meta.get("name"), "labels": labels,
                         "annotations": dict((k, v) for k, v in annotations.items()
                                             if k != tenants.OWNED_KEYS_ANNOTATION)}}
    if meta.get("namespace"):
        view["metadata"]["namespace"] = meta["namespace"]
    view.update(comparable(obj))
    return view


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------

class TenantsStrategy(engine.Strategy):
    """Compare what we own (quantities as numbers, server defaults ignored), write a merge
    patch of it; create by POST; check mode computes locally and sends nothing."""

    create = "create"
    check_mode = engine.NO_WRITE
    honour_overrides = True

    def compare(self, desired, live):
        patch, fields, replace = plan_update(desired, live)
        if replace:
            return [("delete",), ("create",)], fields
        return ([("patch", patch)] if patch else []), fields

    def view(self, obj, desired=None):
        return diff_view(obj, desired)


def team_of(obj):
    meta = obj["metadata"]
    if obj["kind"] == "Namespace":
        return meta["name"]
    # a cluster-scoped object of a team (its admission policies) names it by label
    return meta.get("namespace") or (meta.get("labels") or {}).get(tenants.TEAM_LABEL)


class TenantsApply(object):
    def __init__(self, kube, params, check_mode=False, diff=False, log=None):
        self.params = params
        self.check_mode = check_mode
        self.want_diff = diff
        self.log = log or (lambda msg: None)
        self.engine = engine.Converge(kube, TenantsStrategy(), check_mode=check_mode, diff=diff,
                                      workers=max(1, int(params.get("parallel") or 8)))
        self.kube = self.engine.kube      # counts every request (result "requests")
        self.settings = tenants.default_settings(
            operator_namespace=params.get("operator_namespace"),
            reserved_namespaces=params.get("reserved_namespaces"),
            default_pod_security=params.get("default_pod_security"),
            pod_security_version=params.get("pod_security_version"),
            dns_namespace=params.get("dns_namespace"),
            dns_pod_labels=params.get("dns_pod_labels"),
            allow_overcommit=params.get("allow_overcommit"),
            common_labels=params.get("common_labels"),
            allowed_registries=params.get("allowed_registries"),
            gpu_access_policy=params.get("gpu_access_policy"),
            allocation_api=params.get("allocation_api"),
            gpu_allocation=params.get("gpu_allocation"),
        )

    @property
    def overrides(self):
        """Values a quota change raised that the inventory has not caught up with."""
        return self.engine.overrides

    # -- what only the cluster knows -------------------------------------------------
    def cluster_facts(self, teams):
        facts = {}
        if self.params.get("cluster_gpus") is not None:
            facts["gpus"] = int(self.params["cluster_gpus"])
        if tenants_claims.is_dra(self.settings):
            # GPUs are what the driver publishes; no node offers nvidia.com/gpu in this mode
            if not self.kube.served(upstream.RESOURCE_API_VERSION, upstream.RESOURCE_CLAIM_TEMPLATE_KIND):
                raise DomainError("%s = dra, but the cluster does not serve %s (Kubernetes serves DRA from 1.34): "
                                  "upgrade the cluster or keep the device-plugin mode"
                                  % (tenants_claims.VARIABLE, upstream.RESOURCE_API_VERSION))
            if teams:
                classes, dummy = self.kube.list(upstream.RESOURCE_API_VERSION, upstream.DEVICE_CLASS_KIND)
                slices, dummy = self.kube.list(upstream.RESOURCE_API_VERSION, upstream.RESOURCE_SLICE_KIND)
                facts["dra"] = tenants_claims.slice_facts(classes, slices)
            return facts
        if "gpus" not in facts and tenants.needs_gpu_count(teams) and not self.settings["allow_overcommit"]:
            nodes, dummy = self.kube.list("v1", "Node")
            total = 0
            for node in nodes:
                value = ((node.get("status") or {}).get("allocatable") or {}).get(upstream.GPU_RESOURCE, 0)
                try:
                    total += int(parse_quantity(value))
                except QuantityError:
                    pass
            facts["gpus"] = total
        if tenants.needs_mig_check(teams):
            facts.update(self._mig_resources())
        return facts

    def _mig_resources(self):
        from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig.profiles import MigError, MigPartedConfig
        text = self.params.get("mig_parted_config")
        namespace = self.settings["operator_namespace"]
        source = "ConfigMap %s/%s" % (namespace, upstream.DEFAULT_MIG_CONFIGMAP)
        try:
            if text:
                config = MigPartedConfig(text, source="tenants_mig_parted_config")
                source = config.source
            else:
                cm = self.kube.get("v1", "ConfigMap", upstream.DEFAULT_MIG_CONFIGMAP, namespace)
                if cm is None:
                    return {"mig_resources": None, "mig_source": source + " (not found)"}
                config = MigPartedConfig.from_configmap(cm)
        except MigError as exc:
            raise DomainError("the mig-parted config (%s) cannot be read: %s" % (source, exc))
        return {"mig_resources": tenants.mig_resources_of(config), "mig_source": source}

    # -- reads --------------------------------------------------------------------------
    def read_live(self):
        return self.engine.read([engine.Scope(api_version, kind, None, None if kind == "Namespace" else SELECTOR)
                                 for kind, api_version in tenants.kinds(self.settings)])

    @staticmethod
    def managed(obj):
        return engine.carries(obj, engine.MANAGED_BY)

    # -- the plan ---------------------------------------------------------------------
    def plan(self, teams, live):
        """([Change] of the listed teams, {team: Namespace} of managed teams no longer listed)."""
        desired = tenants.render_all(teams, self.settings)
        names = set(t["name"] for t in teams)
        problems = []
        for team in sorted(names):
            ns = live.get(("Namespace", None, team))
            if ns is not None and not self.managed(ns):
                problems.append("%s[%s].name = %s: the namespace %s exists and is not managed by %s (no label %s); "
                                "choose another team name, or label the namespace %s=%s to adopt it"
                                % (tenants.VARIABLE, team, json.dumps(team), team, tenants.MANAGED_BY, SELECTOR,
                                   upstream.LABEL_MANAGED_BY, tenants.MANAGED_BY))
            elif ns is not None and (ns.get("status") or {}).get("phase") == upstream.NAMESPACE_TERMINATING:
                problems.append("%s[%s]: the namespace %s is being deleted (pruned earlier); run again once it is gone"
                                % (tenants.VARIABLE, team, team))
        if problems:
            raise DomainError("tenants_list: %d problem(s), nothing was changed:\n- %s"
                              % (len(problems), "\n- ".join(problems)), problems=problems)
        # an object no longer rendered for a listed team is deleted; a team no longer listed
        # keeps everything until its namespace is pruned (below)
        changes = self.engine.plan(desired, live, prunable=lambda obj: team_of(obj) in names)
        orphans = dict((k[2], obj) for k, obj in live.items()
                       if k[0] == "Namespace" and k[2] not in names and self.managed(obj))
        return changes, orphans

    # -- the namespaces of teams no longer listed ----------------------------------------
    def prune(self, orphans, errors):
        """(report, [Change] of the namespaces deleted or that would be)."""
        report, deleted = [], []
        for team in sorted(orphans):
            ns = orphans[team]
            entry = {"team": team, "namespace": team}
            if (ns.get("status") or {}).get("phase") == upstream.NAMESPACE_TERMINATING:
                entry["action"] = "deleting"
                report.append(entry)
                continue
            if not self.params.get("prune"):
                entry["action"] = "kept"
                entry["reason"] = "not in tenants_list; set tenants_prune: true to delete it"
                report.append(entry)
                continue
            pods, dummy = self.kube.list("v1", "Pod", namespace=team)
            active = sorted(p["metadata"]["name"] for p in pods
                            if (p.get("status") or {}).get("phase") not in upstream.POD_DONE_PHASES)
            entry["pods"] = active
            if active and not self.params.get("force"):
                entry["action"] = "kept"
                entry["reason"] = ("%d pod(s) still run in it (%s); set tenants_force: true to delete it anyway"
                                   % (len(active), ", ".join(active[:5]) + (", ..." if len(active) > 5 else "")))
                report.append(entry)
                continue
            change = engine.Change(engine.DELETED, None, ns, [("delete",)])
            if self.check_mode:
                entry["action"] = "would_delete"
                change.done = True
            else:
                try:
                    self.engine.write(change)
                    change.done = True
                    entry["action"] = "deleted"
                except ApiError as exc:
                    entry["action"] = "failed"
                    errors.append("Namespace %s: %s" % (team, exc))
            deleted.append(change)
            report.append(entry)
        return report, deleted

    def run(self):
        teams = self.params.get("tenants") or []
        problems = tenants.validate(teams, self.settings)
        if not problems:
            problems = tenants.validate(teams, self.settings, self.cluster_facts(teams))
        if problems:
            raise DomainError("tenants_list: %d problem(s), nothing was changed:\n- %s"
                              % (len(problems), "\n- ".join(problems)), problems=problems)
        changes, orphans = self.plan(teams, self.read_live())
        errors = self.engine.apply(changes)
        pruned, deleted = self.prune(orphans, errors)
        return self.result(teams, changes, pruned, deleted, errors)

    def result(self, teams, changes, pruned, deleted, errors):
        """The engine's result (changed, objects, requests, diff) and the tenants' views of it:
        summary per kind, changes, drift, orphans, teams, overrides."""
        summary = dict((kind, {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0})
                       for kind, dummy in tenants.kinds(self.settings))
        out, drift = [], []
        for change in changes:
            if not change.done:
                continue
            summary[change.obj["kind"]][change.action] += 1
            if change.action == engine.UNCHANGED:
                continue
            out.append({"action": change.action, "object": engine.ref(change.obj)})
            if change.action == engine.UPDATED:
                drift.append({"object": engine.ref(change.obj), "fields": change.fields})
        summary["Namespace"]["pruned"] = sum(1 for p in pruned if p["action"] in ("deleted", "would_delete"))
        result = self.engine.result(changes + deleted)
        result.update(summary=summary, changes=out, drift=drift, orphans=pruned, teams=[t["name"] for t in teams],
                      overrides=list(self.overrides))
        if errors:
            raise DomainError("%d write(s) failed; what succeeded stays and a re-run completes the rest:\n- %s"
                              % (len(errors), "\n- ".join(errors[:20]) + ("\n- ..." if len(errors) > 20 else "")),
                              errors=errors, **dict((k, v) for k, v in result.items() if k != "diff"))
        return result
