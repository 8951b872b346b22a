# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Labels on many Nodes at once, through the converge engine: one LIST of the Nodes, one merge
patch per Node whose labels differ, in bounded parallel. A value of None removes the label.

A role that labels the nodes of a plan or a pool would otherwise run one task iteration per node
(about a second each), on every run, even when nothing changes; at 1000 GPU nodes that is
minutes of a re-run spent confirming what one LIST shows.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.converge import Converge, Scope, Strategy
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
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


def _labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def label_patch(want, have):
    """The keys of want whose value differs from have (None: the label must be absent)."""
    return dict((k, v) for k, v in want.items() if have.get(k) != v)


class NodeLabels(Strategy):
    """Nodes are not ours: only the labels named are compared and merge-patched; nothing is created
    or pruned, and check mode sends the patches as server dry runs."""

    def compare(self, desired, live):
        patch = label_patch(_labels(desired), _labels(live))
        return ([("patch", {"metadata": {"labels": patch}})], ["metadata.labels"]) if patch else ([], [])

    def view(self, obj, desired=None):
        return {} if obj is None else {"metadata": {"name": obj["metadata"]["name"], "labels": _labels(obj)}}

    def after(self, change):
        labels = dict(_labels(change.live))
        for key, value in label_patch(_labels(change.desired), labels).items():
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        return {"metadata": {"name": change.live["metadata"]["name"], "labels": labels}}


def converge(kube, wanted, check_mode=False, diff=False, parallel=8, allow_missing=False):
    """Label the Nodes; -> the engine's result (changed, objects, requests, diff) and `unknown`."""
    wanted = check_wanted(wanted)
    engine = Converge(kube, NodeLabels(), check_mode=check_mode, diff=diff, workers=parallel)
    live = engine.read([NODES])
    names = set(name for dummy, dummy_ns, name in live)
    unknown = sorted(n for n in wanted if n not in names)
    if unknown and not allow_missing:
        known = sorted(names)
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        raise DomainError("labels: no Node named %s in the cluster (%d Nodes: %s); a node name is the "
                          "Kubernetes Node name (kubectl get nodes), or set allow_missing=true for nodes "
                          "that have not joined yet" % (with_suggestions(unknown, known), len(known), listed), unknown=unknown)
    desired = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": wanted[name]}}
               for name in sorted(wanted) if name in names]
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
