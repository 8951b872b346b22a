# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The labels and taints the node_prereqs role puts on one Node (filter node_labels_taints).

Labels and taints under the role's prefix are owned by it: ones no longer wanted are
removed (label value null in the merge patch, taint left out of the list); all others
are kept as they are. Pure: input the Node object, output the patch values.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class NodeLabelsError(ValueError):
    """A wrong input (the filter raises it as AnsibleFilterError)."""


def _check(label_prefix, pool_labels, pool_taints, plan_labels):
    if not isinstance(label_prefix, str) or not label_prefix.endswith("/") or " " in label_prefix:
        raise NodeLabelsError("node_labels_taints: the label prefix must be a DNS subdomain followed by '/' "
                              "(for example gpu.skaffon.io/), got %r" % (label_prefix,))
    if not isinstance(pool_labels, Mapping):
        raise NodeLabelsError("node_labels_taints: pool labels must be a mapping key -> value, got %r"
                              % (pool_labels,))
    if not isinstance(plan_labels, Mapping):
        raise NodeLabelsError("node_labels_taints: plan labels must be a mapping, got %r" % (plan_labels,))
    if not isinstance(pool_taints, (list, tuple)):
        raise NodeLabelsError("node_labels_taints: pool taints must be a list of {key, value, effect}, got %r"
                              % (pool_taints,))
    for taint in pool_taints:
        if not isinstance(taint, Mapping) or not taint.get("key") or taint.get("effect") not in TAINT_EFFECTS:
            raise NodeLabelsError("node_labels_taints: each pool taint needs key and effect %s, got %r"
                                  % ("|".join(TAINT_EFFECTS), taint))


def node_labels_taints(node, label_prefix, pool_labels=None, pool_taints=None, plan_labels=None):
    """{"labels": merge-patch labels, "taints": the full spec.taints list} for one Node object."""
    pool_labels = {} if pool_labels is None else pool_labels
    pool_taints = [] if pool_taints is None else pool_taints
    plan_labels = {} if plan_labels is None else plan_labels
    _check(label_prefix, pool_labels, pool_taints, plan_labels)
    meta = (node or {}).get("metadata") or {}
    current_labels = meta.get("labels") or {}
    current_taints = ((node or {}).get("spec") or {}).get("taints") or []

    labels = dict((key, None) for key in current_labels if key.startswith(label_prefix))
    for key, value in pool_labels.items():
        labels[label_prefix + str(key)] = str(value)
    labels.update(plan_labels)

    wanted = {}
    for taint in pool_taints:
        key = taint["key"] if "/" in taint["key"] else label_prefix + taint["key"]
        value = taint.get("value")
        wanted[(key, taint["effect"])] = {"key": key, "value": "" if value is None else str(value),
                                          "effect": taint["effect"]}
    taints = []
    for taint in current_taints:
        ident = (taint.get("key"), taint.get("effect"))
        if ident in wanted:
            taints.append(wanted.pop(ident))
        elif not str(taint.get("key")).startswith(label_prefix):
            taints.append(taint)
    return {"labels": labels, "taints": taints + list(wanted.values())}
