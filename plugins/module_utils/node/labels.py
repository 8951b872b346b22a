# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Labels on many Nodes at once, through the converge engine: one LIST of the Nodes, one merge
patch per Node whose labels differ, in bounded parallel. A value of None removes the label.

A Node may also be given its pool (`pools`): the pool labels and taints under a prefix that the
caller owns, with the rules of node/pools.py (stale labels and taints under the prefix go,
foreign ones stay). Those rules need the live Node, so they are applied here, after the LIST,
and the labels and the taint list go out in the same merge patch.

A role that labels the nodes of a plan or a pool would otherwise run one task iteration per node
(about a second each), on every run, even when nothing changes; at 1000 GPU nodes that is
minutes of a re-run spent confirming what one LIST shows.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.converge import Converge, Scope, Strategy
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node import pools as pool_rules
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import with_suggestions

NODES = Scope("v1", "Node", None, None)


def check_wanted(wanted, variable="labels"):
    """{node: {key: str or None}} -> the same with str values; refuses anything else by name."""
    if not isinstance(wanted, dict):
        raise DomainError("%s = %r: must map node names to {label: value} (null removes a label)" % (variable, wanted))
    out = {}
    for node, labels in wanted.items():
        if not isinstance(labels, dict):
            raise DomainError("%s[%s] = %r: must be a mapping {label: value} (null removes a label)"
                              % (variable, node, labels))
        clean = {}
        for key, value in labels.items():
            if isinstance(value, bool) or not (value is None or isinstance(value, (str, int, float))):
                raise DomainError("%s[%s][%s] = %r: a label value is a string (quote it in YAML), or null to remove "
                                  "the label" % (variable, node, key, value))
            clean[str(key)] = None if value is None else str(value)
        out[str(node)] = clean
    return out


def check_pools(specs, variable="pools"):
    """{node: {prefix, pool, taints, labels, host}} -> the same validated, taints with full keys."""
    if not isinstance(specs, dict):
        raise DomainError("%s = %r: must map node names to {prefix, pool, taints, labels, host}" % (variable, specs))
    out = {}
    for node, spec in specs.items():
        where = "%s[%s]" % (variable, node)
        if not isinstance(spec, dict):
            raise DomainError("%s = %r: must be a mapping {prefix, pool, taints, labels, host}" % (where, spec))
        unknown = sorted(set(spec) - set(("prefix", "pool", "taints", "labels", "host")))
        if unknown:
            raise DomainError("%s has unknown keys %s (known: prefix, pool, taints, labels, host)"
                              % (where, ", ".join(unknown)))
        host = spec.get("host")
        prefix = pool_rules.check_label_prefix(pool_rules.site_prefix(spec.get("prefix")), where + ".prefix")
        pool = spec.get("pool") or {}
        pool_rules.pool_labels(pool, prefix)        # refuses a pool that is not a mapping
        out[str(node)] = {"prefix": prefix, "pool": pool, "host": host,
                          "taints": pool_rules.pool_taints(spec.get("taints"), prefix, host),
                          "labels": check_wanted({node: spec.get("labels") or {}}, where + ".labels")[str(node)]}
    return out


def _labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def _taints(obj):
    return (obj.get("spec") or {}).get("taints") or []


def _taint_ids(taints):
    """A taint without a value has none, whether the field is absent or the empty string."""
    return [(t.get("key"), t.get("value") or "", t.get("effect")) for t in taints or ()]


def manages_taints(obj):
    return "taints" in (obj.get("spec") or {})


def pool_desired(live, spec):
    """The labels (patch form, None removes) and the full taint list the Node must have."""
    labels = pool_rules.node_label_patch(_labels(live), spec["pool"], spec["prefix"], spec["labels"])
    return labels, pool_rules.node_taint_list(_taints(live), spec["taints"], spec["prefix"])


def label_patch(want, have):
    """The keys of want whose value differs from have (None: the label must be absent)."""
    return dict((k, v) for k, v in want.items() if have.get(k) != v)


def labels_to_change(wanted, nodes):
    """The part of `wanted` ({node: {label: value}}) that the Node objects `nodes` (as read) do not
    have yet: a node whose labels all match is left out, a node that was not read stays whole (the
    module then names it). Lets a role that read the Nodes anyway skip the module on a re-run."""
    live = dict(((n.get("metadata") or {}).get("name"), _labels(n)) for n in nodes or ())
    out = {}
    for node, want in (wanted or {}).items():
        patch = label_patch(want or {}, live[node]) if node in live else dict(want or {})
        if patch or node not in live:
            out[node] = patch
    return out


class NodeLabels(Strategy):
    """Nodes are not ours: only the labels named are compared and merge-patched; nothing is created
    or pruned, and check mode sends the patches as server dry runs."""

    def compare(self, desired, live):
        patch, fields = {}, []
        labels = label_patch(_labels(desired), _labels(live))
        if labels:
            patch["metadata"], fields = {"labels": labels}, ["metadata.labels"]
        # a merge patch replaces the whole list: foreign taints are in the desired list already
        if manages_taints(desired) and _taint_ids(_taints(desired)) != _taint_ids(_taints(live)):
            patch["spec"] = {"taints": _taints(desired)}
            fields.append("spec.taints")
        return ([("patch", patch)], fields) if patch else ([], [])

    def view(self, obj, desired=None):
        if obj is None:
            return {}
        out = {"metadata": {"name": obj["metadata"]["name"], "labels": _labels(obj)}}
        if manages_taints(desired if desired is not None else obj):
            out["spec"] = {"taints": _taints(obj)}
        return out

    def after(self, change):
        labels = dict(_labels(change.live))
        for key, value in label_patch(_labels(change.desired), labels).items():
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        out = {"metadata": {"name": change.live["metadata"]["name"], "labels": labels}}
        if manages_taints(change.desired):
            out["spec"] = {"taints": _taints(change.desired)}
        return out


def _refuse_missing(unknown, known, specs):
    listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
    hosts = [n for n in unknown if specs.get(n, {}).get("host")]
    if hosts:
        # the Node of an inventory host: say which host, and which variable names its Node
        raise DomainError("%s: not in the cluster (%d Nodes: %s). Join the host first, or set %s of the host to "
                          "its Kubernetes node name (kubectl get nodes)%s" % (
                              "; ".join("Node %s (host %s) does not exist" % (with_suggestions([n], known), specs[n]["host"])
                                        for n in hosts),
                              len(known), listed, pool_rules.NODE_NAME_VARIABLE,
                              "; also no Node named %s" % ", ".join(n for n in unknown if n not in hosts)
                              if len(hosts) < len(unknown) else ""), unknown=unknown)
    raise DomainError("labels: no Node named %s in the cluster (%d Nodes: %s); a node name is the "
                      "Kubernetes Node name (kubectl get nodes), or set allow_missing=true for nodes "
                      "that have not joined yet" % (with_suggestions(unknown, known), len(known), listed), unknown=unknown)


def converge(kube, wanted, check_mode=False, diff=False, parallel=8, allow_missing=False, pools=None):
    """Label (and, for nodes in `pools`, taint) the Nodes; -> the engine's result (changed,
    objects, requests, diff) and `unknown`."""
    wanted = check_wanted(wanted or {})
    specs = check_pools(pools or {})
    engine = Converge(kube, NodeLabels(), check_mode=check_mode, diff=diff, workers=parallel)
    live = engine.read([NODES])
    by_name = dict((name, obj) for (dummy, dummy_ns, name), obj in live.items())
    unknown = sorted(n for n in set(wanted) | set(specs) if n not in by_name)
    if unknown and not allow_missing:
        _refuse_missing(unknown, sorted(by_name), specs)
    desired = []
    for name in sorted(set(wanted) | set(specs)):
        if name not in by_name:
            continue
        obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}}
        if name in specs:
            obj["metadata"]["labels"], taints = pool_desired(by_name[name], specs[name])
            obj["spec"] = {"taints": taints}
        obj["metadata"]["labels"].update(wanted.get(name) or {})
        desired.append(obj)
    changes = engine.plan(desired, live)
    errors = engine.apply(changes)
    result = engine.result(changes)
    result["objects"] = [row for row in result["objects"] if row["action"] != "unchanged"]
    result["unknown"] = unknown
    if errors:
        raise DomainError("%d Node label patches failed (a re-run patches only what still differs): %s"
                          % (len(errors), "; ".join(errors)), changed=result["changed"], objects=result["objects"],
                          errors=errors)
    return result
