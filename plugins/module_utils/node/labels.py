# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Labels on many Nodes at once: one LIST of the Nodes, one merge patch per Node whose labels
differ, the patches in bounded parallel. A value of None removes the label.

A role that labels the nodes of a plan or a pool would otherwise run one task iteration per node
(about a second each), on every run, even when nothing changes; at 1000 GPU nodes that is
minutes of a re-run spent confirming what one LIST shows.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from concurrent.futures import ThreadPoolExecutor

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError


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


def plan(nodes, wanted):
    """-> (changes, unknown): changes [{name, patch, before, after}] for the Nodes whose labels differ
    (patch: only the differing keys); unknown: wanted names no Node has."""
    by_name = dict((n["metadata"]["name"], n) for n in nodes)
    changes, unknown = [], []
    for name in sorted(wanted):
        node = by_name.get(name)
        if node is None:
            unknown.append(name)
            continue
        have = node["metadata"].get("labels") or {}
        patch = dict((k, v) for k, v in wanted[name].items() if have.get(k) != v)
        if not patch:
            continue
        after = dict(have)
        for key, value in patch.items():
            if value is None:
                after.pop(key, None)
            else:
                after[key] = value
        changes.append({"name": name, "patch": patch, "before": have, "after": after})
    return changes, unknown


def converge(kube, wanted, check_mode=False, parallel=8, allow_missing=False):
    """Label the Nodes; -> result dict (changed, nodes, unknown, requests, diff)."""
    wanted = check_wanted(wanted)
    nodes, dummy = kube.list("v1", "Node")
    changes, unknown = plan(nodes, wanted)
    if unknown and not allow_missing:
        known = sorted(n["metadata"]["name"] for n in nodes)
        raise DomainError("labels: no Node named %s in the cluster (%d Nodes: %s%s); a node name is the "
                          "Kubernetes Node name (kubectl get nodes), or set allow_missing=true for nodes "
                          "that have not joined yet" % (", ".join(unknown), len(known), ", ".join(known[:10]),
                                                         ", ..." if len(known) > 10 else ""),
                          unknown=unknown)
    errors = []

    def one(change):
        try:
            kube.patch("v1", "Node", change["name"], {"metadata": {"labels": change["patch"]}}, dry_run=check_mode)
            return None
        except ApiError as exc:
            return str(exc)

    if changes:
        with ThreadPoolExecutor(max_workers=max(1, min(int(parallel), len(changes)))) as pool:
            for change, error in zip(changes, pool.map(one, changes)):
                if error:
                    errors.append(error)
    result = {
        "changed": bool(changes),
        "nodes": [c["name"] for c in changes],
        "unknown": unknown,
        "requests": {"LIST": 1, "PATCH": len(changes)},
        "diff": {"before": dict((c["name"], c["before"]) for c in changes),
                 "after": dict((c["name"], c["after"]) for c in changes)},
    }
    if errors:
        written = len(changes) - len(errors)
        raise DomainError("%d of %d Node label patches failed (%d written; a re-run patches only what still "
                          "differs): %s" % (len(errors), len(changes), written, "; ".join(errors)),
                          changed=written > 0, nodes=result["nodes"], errors=errors)
    return result
