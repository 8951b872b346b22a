# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-pool filters: labels and taints of a pool, the GPU nodes of an inventory
(docs in the .yml sidecars).

One implementation of the pool rules shared by node_prereqs (which writes the
labels and taints) and gpu_operator (whose operands must tolerate them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node.pools import (
    DEFAULT_PREFIX, POOL_KEYS, MixedPrefixError, host_prefix, hosts_label_key, site_prefix)

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Kubernetes: label value / name part of a key (<= 63), DNS-1123 subdomain prefix (<= 253).
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_error(key):
    """Why `key` is not a valid Kubernetes label (or taint) key, or None."""
    if not isinstance(key, str) or not key:
        return "must be a non-empty string"
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN_RE.match(prefix)):
        return "prefix %r must be a DNS subdomain (lower-case letters, digits, '-' and '.')" % prefix
    if not LABEL_NAME_RE.match(name):
        return ("name part %r must be 1-63 characters of [A-Za-z0-9-_.], alphanumeric at both ends"
                % name)
    return None


def check_label_prefix(prefix, field="node_prereqs_label_prefix"):
    """The prefix must be `<DNS subdomain>/`: every pool label is prefix + key."""
    if not isinstance(prefix, str) or not prefix.endswith("/"):
        raise AnsibleFilterError(
            "%s must end with '/' (like gpu.skaffon.io/), got %r: pool labels are the prefix followed "
            "directly by the key, so %r would give %r." % (field, prefix, prefix, "%saccelerator" % prefix))
    error = label_key_error(prefix + "accelerator")
    if error:
        raise AnsibleFilterError("%s %r is not a label key prefix: %s." % (field, prefix, error))
    return prefix


def node_pool_taints(taints, prefix=DEFAULT_PREFIX, host=None, check_only=False):
    """Validated pool taints with full keys (a key without '/' gets the prefix); with
    check_only, the list of input errors instead (empty when fine)."""
    if check_only:
        try:
            node_pool_taints(taints, prefix, host)
        except AnsibleFilterError as exc:
            return [str(exc)]
        return []
    where = "node_prereqs_pool_taints%s" % (" of %s" % host if host else "")
    if taints is None:
        return []
    if isinstance(taints, (str, Mapping)) or not isinstance(taints, (list, tuple)):
        raise AnsibleFilterError(
            "%s must be a list of {key, value, effect} (one item per taint, YAML '- key: ...'), got %s %r"
            % (where, "a mapping" if isinstance(taints, Mapping) else type(taints).__name__, taints))
    check_label_prefix(prefix)
    result = []
    for index, taint in enumerate(taints):
        if not isinstance(taint, Mapping) or not taint.get("key"):
            raise AnsibleFilterError("%s[%d] must be a mapping with a key, got %r" % (where, index, taint))
        unknown = sorted(set(taint) - set(("key", "value", "effect")))
        if unknown:
            raise AnsibleFilterError("%s[%d] has unknown fields %s (known: key, value, effect)"
                                     % (where, index, ", ".join(unknown)))
        key = str(taint["key"])
        key = key if "/" in key else prefix + key
        error = label_key_error(key)
        if error:
            raise AnsibleFilterError("%s[%d].key %r: %s" % (where, index, key, error))
        value = "" if taint.get("value") is None else str(taint["value"])
        if not LABEL_VALUE_RE.match(value):
            raise AnsibleFilterError("%s[%d].value %r must be a label value (<= 63 of [A-Za-z0-9-_.], "
                                     "alphanumeric at both ends)" % (where, index, value))
        if taint.get("effect") not in TAINT_EFFECTS:
            raise AnsibleFilterError("%s[%d].effect must be one of %s, got %r"
                                     % (where, index, ", ".join(TAINT_EFFECTS), taint.get("effect")))
        result.append({"key": key, "value": value, "effect": taint["effect"]})
    return result


def node_pool_labels(current, pool, prefix=DEFAULT_PREFIX, extra=None):
    """Label patch of a node: pool labels under prefix; stale ones under it set to None."""
    check_label_prefix(prefix)
    if not isinstance(pool, Mapping):
        raise AnsibleFilterError("node_prereqs_pool must be a mapping of %s to label values, got %r"
                                 % (", ".join(POOL_KEYS), pool))
    labels = dict((key, None) for key in (current or {}) if key.startswith(prefix))
    for key, value in pool.items():
        labels[prefix + str(key)] = str(value)
    labels.update(extra or {})
    return labels


def node_taint_list(current, wanted, prefix=DEFAULT_PREFIX):
    """The node's full taint list: wanted pool taints, foreign taints kept, stale prefixed ones gone."""
    pending = dict(("%s:%s" % (t["key"], t["effect"]), t) for t in wanted)
    out = []
    for taint in current or ():
        ident = "%s:%s" % (taint.get("key"), taint.get("effect"))
        if ident in pending:
            out.append(pending.pop(ident))
        elif not str(taint.get("key", "")).startswith(prefix):
            out.append(taint)
    return out + [t for t in wanted if "%s:%s" % (t["key"], t["effect"]) in pending]


def _host_prefix(hostvars, default_prefix):
    return host_prefix(hostvars, default_prefix)


def pool_label_prefix(prefix=None):
    """The site's pool label prefix: gpu_platform_label_prefix as given, else the default."""
    return site_prefix(prefix)


def pool_label_key(key, hostvars=None, hosts=None, prefix=None, variable=None):
    """The full key of pool label `key` (trust, accelerator...) as node_prereqs labels `hosts`."""
    if key not in POOL_KEYS:
        raise AnsibleFilterError("pool_label_key: %r is not a node-pool key (%s)" % (key, ", ".join(POOL_KEYS)))
    try:
        full = hosts_label_key(key, hostvars, list(hosts or ()), prefix, variable)
    except MixedPrefixError as exc:
        raise AnsibleFilterError("%s%s" % ("%s: " % variable if variable else "", exc))
    check_label_prefix(full[:-len(key)], "node_prereqs_label_prefix (or gpu_platform_label_prefix)")
    return full


def gpu_pool_taints(hostvars, hosts, default_prefix=DEFAULT_PREFIX):
    """Every distinct pool taint of `hosts` (inventory names), as node_prereqs applies them."""
    seen, result = set(), []
    for host in hosts or ():
        if host not in hostvars:
            continue
        hv = hostvars[host]
        for taint in node_pool_taints(hv.get("node_prereqs_pool_taints"), _host_prefix(hv, default_prefix), host):
            ident = (taint["key"], taint["value"], taint["effect"])
            if ident not in seen:
                seen.add(ident)
                result.append(taint)
    return result


def gpu_node_names(hostvars, hosts):
    """Kubernetes node names of inventory hosts (node_prereqs_node_name, else the host name)."""
    names = []
    for host in hosts or ():
        hv = hostvars[host] if host in hostvars else {}
        names.append(str(hv.get("node_prereqs_node_name") or host))
    return names


def node_label_values(nodes, label, default=None):
    """{node name: value of `label`} of Node objects (a key with dots and '/' cannot go through
    Jinja's map(attribute=...), which reads dots as a path)."""
    out = {}
    for node in nodes or ():
        meta = (node or {}).get("metadata") or {}
        out[meta.get("name")] = (meta.get("labels") or {}).get(label, default)
    return out


class FilterModule(object):
    def filters(self):
        return {
            "node_pool_taints": node_pool_taints,
            "node_pool_labels": node_pool_labels,
            "node_taint_list": node_taint_list,
            "gpu_pool_taints": gpu_pool_taints,
            "gpu_node_names": gpu_node_names,
            "pool_label_prefix": pool_label_prefix,
            "pool_label_key": pool_label_key,
            "node_label_values": node_label_values,
        }
