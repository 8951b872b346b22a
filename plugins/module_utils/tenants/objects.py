# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tenants: validate `tenants_list` and render each team's objects (pure, no cluster access).

    problems = validate(teams, settings, cluster)   # [] = every team is acceptable
    objects = render_all(teams, settings)           # [Namespace, ResourceQuota, ...]

`settings` holds the role-wide options (operator namespace, Pod Security version, DNS
selector, overcommit); `cluster` what only the cluster knows (its GPUs, the MIG resources
its mig-parted config offers). Every problem names the team, the field, the value and
the fix, so a person can correct the inventory from the message alone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import json
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import claims as tenants_claims
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import gpu_access as tenants_gpu_access
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import registry as tenants_registry
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.quantity import QuantityError, parse_quantity
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import (  # noqa: F401 is_dns_label: quota reads it here
    DNS1123_LABEL_FIX,
    DNS1123_SUBDOMAIN_MAX,
    LABEL_VALUE_FIX,
    is_dns_label,
    is_dns_subdomain,
    is_label_value,
    label_key_problem,
)

MANAGED_BY = upstream.MANAGED_BY   # the value of upstream.LABEL_MANAGED_BY on every team object
TEAM_LABEL = "gpu-platform.skaffon.io/team"
DESCRIPTION_ANNOTATION = "gpu-platform.skaffon.io/description"
# What the team's pods get from the GPUs (platform_design's tenants_gpu_allocation, docs/design.md)
GPU_ALLOCATION_ANNOTATION = "gpu-platform.skaffon.io/gpu-allocation"
# Label and annotation keys we set, so that keys dropped from the inventory are removed
# again without touching keys other tools set (like kubectl's last-applied annotation).
OWNED_KEYS_ANNOTATION = "gpu-platform.skaffon.io/owned-metadata"
VARIABLE = "tenants_list"

QUOTA_NAME = "tenant-quota"
LIMIT_RANGE_NAME = "tenant-limits"
NP_DENY = "tenant-default-deny"
NP_SAME_NAMESPACE = "tenant-allow-same-namespace"
NP_DNS = "tenant-allow-dns"
NP_INGRESS = "tenant-allow-ingress"
NP_EGRESS = "tenant-allow-egress"
ROLE_BINDING_PREFIX = "tenant-"

# (kind, apiVersion, plural) in the order they are written: the Namespace first.
KINDS = (
    ("Namespace", "v1"),
    ("ResourceQuota", "v1"),
    ("LimitRange", "v1"),
    ("NetworkPolicy", upstream.NETWORKING_API_VERSION),
    ("RoleBinding", upstream.RBAC_API_VERSION),
) + tenants_registry.KINDS

TEAM_KEYS = ("name", "description", "quota", "limit_range", "pod_security", "groups", "role_bindings",
             "network", "labels", "annotations", "queue", "images", "claim_templates")
LIMIT_RANGE_KEYS = {"default": "default", "default_request": "defaultRequest", "max": "max", "min": "min",
                    "max_limit_request_ratio": "maxLimitRequestRatio"}
NETWORK_KEYS = ("egress_cidrs", "egress_to_namespaces", "ingress_from_namespaces", "allow_same_namespace",
                "allow_dns")
PEER_NS_KEYS = ("namespace", "pod_labels", "ports")
PEER_CIDR_KEYS = ("cidr", "except", "ports")
PORT_KEYS = ("port", "protocol", "end_port")
ROLE_BINDING_KEYS = ("name", "cluster_role", "role", "groups", "users", "service_accounts")
PROTOCOLS = upstream.PROTOCOLS
POD_SECURITY_LEVELS = ("baseline", "restricted")
BOTH_DIRECTIONS = [upstream.NETPOL_INGRESS, upstream.NETPOL_EGRESS]

_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_PSA_VERSION = re.compile(r"^(latest|v[0-9]+\.(0|[1-9][0-9]*))$")


def default_settings(**overrides):
    settings = {
        "operator_namespace": "gpu-operator",
        "reserved_namespaces": [],
        "default_pod_security": "restricted",
        "pod_security_version": upstream.PSA_LATEST,
        "dns_namespace": upstream.DNS_NAMESPACE,
        "dns_pod_labels": dict(upstream.DNS_POD_LABELS),
        "allow_overcommit": False,
        "common_labels": {},
        "allowed_registries": [],
        "gpu_access_policy": True,
        "allocation_api": tenants_claims.DEVICE_PLUGIN,
        "gpu_allocation": {},
    }
    settings.update(dict((k, v) for k, v in overrides.items() if v is not None))
    return settings


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------

class _Problems(object):
    def __init__(self):
        self.items = []

    def add(self, team, field, value, fix):
        where = "%s[%s].%s" % (VARIABLE, team, field) if field else "%s[%s]" % (VARIABLE, team)
        self.items.append("%s = %s: %s" % (where, _show(value), fix))


def _show(value):
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def reserved_namespace(name, settings):
    """Why `name` is not a team's namespace, or None."""
    if name.startswith(upstream.SYSTEM_NAMESPACE_PREFIX) or name in upstream.SYSTEM_NAMESPACES:
        return "a Kubernetes system namespace"
    if name == settings.get("operator_namespace"):
        return "the GPU Operator's namespace (gpu_operator_namespace)"
    if name in upstream.QUEUE_BACKEND_NAMESPACES:
        return "the queue backend's namespace"
    if name in (settings.get("reserved_namespaces") or []):
        return "listed in tenants_reserved_namespaces"
    return None


def _unknown(problems, team, field, mapping, allowed):
    for key in sorted(set(mapping) - set(allowed), key=str):
        problems.add(team, ("%s.%s" % (field, key)) if field else key, mapping[key],
                     "unknown key; allowed here: %s" % ", ".join(allowed))


def _mapping(problems, team, field, value):
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(team, field, value, "must be a mapping")
        return {}
    return value


def _str_list(problems, team, field, value):
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list):
        problems.add(team, field, value, "must be a list of strings")
        return []
    good = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            problems.add(team, "%s[%d]" % (field, index), item, "must be a non-empty string")
        else:
            good.append(item)
    return good


def kinds(settings):
    """The kinds of a run: ResourceClaimTemplates only in DRA mode (resource.k8s.io/v1 is served from 1.34)."""
    return KINDS + ((tenants_claims.KIND,) if tenants_claims.is_dra(settings) else ())


def is_extended_resource(resource):
    """quota key without requests./limits. -> True for nvidia.com/gpu, False for cpu, count/pods."""
    if resource.startswith(upstream.QUOTA_NATIVE_PREFIXES) or upstream.QUOTA_STORAGE_CLASS_MARKER in resource \
            or tenants_claims.is_claim_quota(resource):
        return False
    if "/" not in resource:
        return False
    return not resource.split("/", 1)[0].endswith("kubernetes.io")


def quota_resource(key):
    """'requests.nvidia.com/gpu' -> ('requests', 'nvidia.com/gpu'); 'pods' -> (None, 'pods')."""
    for prefix in ("requests.", "limits."):
        if key.startswith(prefix):
            return prefix[:-1], key[len(prefix):]
    return None, key


def _check_quota(problems, team, quota, cluster, settings):
    for key in sorted(quota, key=str):
        value = quota[key]
        field = "quota.%s" % key
        if not isinstance(key, str) or label_key_problem(quota_resource(key)[1]):
            problems.add(team, field, value, "%r is not a resource name (e.g. requests.cpu, requests.nvidia.com/gpu)"
                         % (key,))
            continue
        if tenants_claims.check_quota_key(problems, team, field, value, key, settings):
            continue
        prefix, resource = quota_resource(key)
        if is_extended_resource(resource) and prefix != "requests":
            problems.add(team, field, value,
                         "quota on the extended resource %s is only enforced as requests.%s; the API accepts %s "
                         "but never enforces it: rename the key to requests.%s" % (resource, resource, key, resource))
            continue
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            problems.add(team, field, value, "%s" % exc)
            continue
        if amount < 0:
            problems.add(team, field, value, "must not be negative")
        if cluster is not None and resource.startswith(upstream.MIG_RESOURCE_PREFIX):
            offered = cluster.get("mig_resources")
            if offered is None:
                problems.add(team, field, value,
                             "no mig-parted config to check the MIG resource against (%s): install the GPU "
                             "Operator first or set tenants_mig_parted_config" % cluster.get("mig_source"))
            elif resource not in offered:
                problems.add(team, field, value,
                             "no MIG profile of %s offers %s; offered: %s" % (
                                 cluster.get("mig_source"), resource, ", ".join(sorted(offered)) or "none"))
        if is_extended_resource(resource) and amount != int(amount):
            problems.add(team, field, value, "extended resources are counted in whole units: use an integer")


def _check_limit_range(problems, team, limit_range):
    _unknown(problems, team, "limit_range", limit_range, list(LIMIT_RANGE_KEYS))
    parsed = {}
    for key in LIMIT_RANGE_KEYS:
        values = _mapping(problems, team, "limit_range.%s" % key, limit_range.get(key))
        parsed[key] = {}
        for resource in sorted(values, key=str):
            field = "limit_range.%s.%s" % (key, resource)
            if not isinstance(resource, str) or label_key_problem(resource) or \
                    resource.startswith(("requests.", "limits.")):
                problems.add(team, field, values[resource], "not a resource name (e.g. cpu, memory)")
                continue
            try:
                parsed[key][resource] = parse_quantity(values[resource])
            except QuantityError as exc:
                problems.add(team, field, values[resource], str(exc))
    for resource, request in parsed["default_request"].items():
        limit = parsed["default"].get(resource)
        if limit is not None and request > limit:
            problems.add(team, "limit_range.default_request.%s" % resource, limit_range["default_request"][resource],
                         "is above limit_range.default.%s (%s); the API refuses a default request above the "
                         "default limit" % (resource, limit_range["default"][resource]))


def _check_ports(problems, team, field, ports):
    if ports is None:
        return
    if not isinstance(ports, list):
        problems.add(team, field, ports, "must be a list of ports (80, metrics, or {port, protocol, end_port})")
        return
    for index, item in enumerate(ports):
        where = "%s[%d]" % (field, index)
        spec = item if isinstance(item, dict) else {"port": item}
        if isinstance(item, dict):
            _unknown(problems, team, where, item, PORT_KEYS)
        port = spec.get("port")
        if isinstance(port, bool) or port is None or not isinstance(port, (int, str)):
            problems.add(team, where, item, "port must be a number 1-65535 or a container port name")
            continue
        if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
            if not 1 <= int(port) <= 65535:
                problems.add(team, where, item, "port must be between 1 and 65535")
        elif len(port) > 15 or not _PORT_NAME.match(port) or "--" in port or not re.search("[a-z]", port):
            problems.add(team, where, item, "a named port is at most 15 lowercase letters, digits and '-' "
                                            "(IANA service name), e.g. metrics")
        protocol = spec.get("protocol", upstream.PROTOCOL_TCP)
        if protocol not in PROTOCOLS:
            problems.add(team, where, item, "protocol must be one of %s" % ", ".join(PROTOCOLS))
        end = spec.get("end_port")
        if end is not None:
            if not isinstance(port, int) or isinstance(end, bool) or not isinstance(end, int) \
                    or not port <= end <= 65535:
                problems.add(team, where, item, "end_port needs a numeric port and must be between port and 65535")


def _check_cidr(problems, team, field, text):
    if not isinstance(text, str) or "/" not in text:
        problems.add(team, field, text, "not a CIDR: an address and a prefix length, e.g. 10.20.0.0/16 or "
                                        "192.0.2.7/32")
        return None
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError:
        pass
    try:
        loose = ipaddress.ip_network(text, strict=False)
    except ValueError:
        problems.add(team, field, text, "not a CIDR (e.g. 10.20.0.0/16)")
        return None
    problems.add(team, field, text, "has host bits set: did you mean %s?" % loose)
    return None


def _check_network(problems, team, network, settings):
    _unknown(problems, team, "network", network, NETWORK_KEYS)
    for flag in ("allow_same_namespace", "allow_dns"):
        if flag in network and not isinstance(network[flag], bool):
            problems.add(team, "network.%s" % flag, network[flag], "must be true or false")
    cidrs = network.get("egress_cidrs")
    if cidrs is not None and not isinstance(cidrs, list):
        problems.add(team, "network.egress_cidrs", cidrs, "must be a list of CIDRs")
        cidrs = []
    for index, item in enumerate(cidrs or []):
        field = "network.egress_cidrs[%d]" % index
        spec = item if isinstance(item, dict) else {"cidr": item}
        if isinstance(item, dict):
            _unknown(problems, team, field, item, PEER_CIDR_KEYS)
        net = _check_cidr(problems, team, field + (".cidr" if isinstance(item, dict) else ""), spec.get("cidr"))
        for j, exc in enumerate(spec.get("except") or []):
            inner = _check_cidr(problems, team, "%s.except[%d]" % (field, j), exc)
            if net is not None and inner is not None and (inner.version != net.version or not inner.subnet_of(net)
                                                          or inner == net):
                problems.add(team, "%s.except[%d]" % (field, j), exc, "must be a strict subset of %s" % net)
        _check_ports(problems, team, field + ".ports", spec.get("ports"))
    for key in ("ingress_from_namespaces", "egress_to_namespaces"):
        peers = network.get(key)
        if peers is not None and not isinstance(peers, list):
            problems.add(team, "network.%s" % key, peers, "must be a list of namespace names")
            continue
        for index, item in enumerate(peers or []):
            field = "network.%s[%d]" % (key, index)
            spec = item if isinstance(item, dict) else {"namespace": item}
            if isinstance(item, dict):
                _unknown(problems, team, field, item, PEER_NS_KEYS)
            if not is_dns_label(spec.get("namespace")):
                problems.add(team, field, item, "namespace must be a DNS-1123 label (lowercase letters, digits, '-')")
            pod_labels = _mapping(problems, team, field + ".pod_labels", spec.get("pod_labels"))
            _check_labels(problems, team, field + ".pod_labels", pod_labels)
            _check_ports(problems, team, field + ".ports", spec.get("ports"))


def _check_labels(problems, team, field, labels, reserved=()):
    for key in sorted(labels, key=str):
        value = labels[key]
        if label_key_problem(key):
            problems.add(team, "%s.%s" % (field, key), value,
                         "not a valid label key ([prefix/]name, name at most 63 characters)")
            continue
        if key in reserved or key.startswith(upstream.PSA_LABEL_PREFIX):
            problems.add(team, "%s.%s" % (field, key), value,
                         "set by the role itself; use pod_security for Pod Security labels")
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)) or not is_label_value(str(value)):
            problems.add(team, "%s.%s" % (field, key), value, "not a label value: " + LABEL_VALUE_FIX)


def _check_role_bindings(problems, team, bindings):
    if not isinstance(bindings, list):
        problems.add(team, "role_bindings", bindings, "must be a list of {name, cluster_role|role, groups, ...}")
        return
    names = set()
    for index, item in enumerate(bindings):
        field = "role_bindings[%d]" % index
        if not isinstance(item, dict):
            problems.add(team, field, item, "must be a mapping {name, cluster_role|role, groups, users, "
                                            "service_accounts}")
            continue
        _unknown(problems, team, field, item, ROLE_BINDING_KEYS)
        name = item.get("name")
        if not is_dns_subdomain(name, DNS1123_SUBDOMAIN_MAX - len(ROLE_BINDING_PREFIX)):
            problems.add(team, field + ".name", name, "required, a DNS-1123 subdomain (lowercase, digits, '-', '.')")
        elif name in upstream.TENANT_CLUSTER_ROLES or name in names:
            problems.add(team, field + ".name", name, "already used by groups.%s or another role binding of this "
                                                      "team; choose another name" % name)
        names.add(name)
        if bool(item.get("cluster_role")) == bool(item.get("role")):
            problems.add(team, field, item, "set exactly one of cluster_role (a ClusterRole) or role (a Role in "
                                            "the team's namespace)")
        subjects = 0
        for key in ("groups", "users", "service_accounts"):
            subjects += len(_str_list(problems, team, "%s.%s" % (field, key), item.get(key)))
        for sa in item.get("service_accounts") or []:
            if isinstance(sa, str) and "/" in sa and not all(is_dns_subdomain(p)
                                                             for p in sa.split("/", 1)):
                problems.add(team, field + ".service_accounts", sa, "use <name> or <namespace>/<name>")
        if not subjects:
            problems.add(team, field, item, "needs at least one of groups, users, service_accounts")


def _check_team(problems, team, entry, settings, cluster):
    _unknown(problems, team, "", entry, TEAM_KEYS)
    if "description" in entry and not isinstance(entry["description"], str):
        problems.add(team, "description", entry["description"], "must be a string")
    quota = _mapping(problems, team, "quota", entry.get("quota"))
    _check_quota(problems, team, quota, cluster, settings)
    _check_limit_range(problems, team, _mapping(problems, team, "limit_range", entry.get("limit_range")))
    level = entry.get("pod_security", settings["default_pod_security"])
    if level == "privileged":
        problems.add(team, "pod_security", level,
                     "a team namespace is never privileged (its pods could take over the node); use baseline or "
                     "restricted. Only the GPU Operator's namespace is privileged")
    elif level not in POD_SECURITY_LEVELS:
        problems.add(team, "pod_security", level, "must be baseline or restricted")
    groups = _mapping(problems, team, "groups", entry.get("groups"))
    _unknown(problems, team, "groups", groups, upstream.TENANT_CLUSTER_ROLES)
    for role in upstream.TENANT_CLUSTER_ROLES:
        _str_list(problems, team, "groups.%s" % role, groups.get(role))
    if entry.get("role_bindings") is not None:
        _check_role_bindings(problems, team, entry["role_bindings"])
    _check_network(problems, team, _mapping(problems, team, "network", entry.get("network")), settings)
    _check_labels(problems, team, "labels", _mapping(problems, team, "labels", entry.get("labels")),
                  reserved=(upstream.LABEL_MANAGED_BY, TEAM_LABEL, upstream.LABEL_NAMESPACE_NAME))
    annotations = _mapping(problems, team, "annotations", entry.get("annotations"))
    for key in sorted(annotations, key=str):
        if not isinstance(annotations[key], str):
            problems.add(team, "annotations.%s" % key, annotations[key], "annotation values are strings: quote it")
        if key in (OWNED_KEYS_ANNOTATION, DESCRIPTION_ANNOTATION, GPU_ALLOCATION_ANNOTATION):
            problems.add(team, "annotations.%s" % key, annotations[key], "set by the role itself")
    tenants_registry.check(problems, team, entry)
    tenants_claims.check(problems, team, entry, settings, cluster)


def gpu_quota(entry):
    quota = entry.get("quota") if isinstance(entry, dict) and isinstance(entry.get("quota"), dict) else {}
    try:
        return int(parse_quantity(quota.get(upstream.QUOTA_ENFORCED_PREFIX + upstream.GPU_RESOURCE, 0)))
    except QuantityError:
        return 0


def validate(teams, settings, cluster=None):
    """Every problem of `teams` (the tenants_list), [] when all can be applied.
    Without `cluster` the checks that need the cluster (GPUs, MIG resources) are skipped."""
    problems = _Problems()
    if not isinstance(teams, list):
        return ["%s = %s: must be a list of teams ({name: team-a, quota: ..., ...})" % (VARIABLE, _show(teams))]
    if settings.get("default_pod_security") not in POD_SECURITY_LEVELS:
        problems.items.append("tenants_default_pod_security = %s: must be baseline or restricted"
                              % _show(settings.get("default_pod_security")))
    if not _PSA_VERSION.match(str(settings.get("pod_security_version"))):
        problems.items.append("tenants_pod_security_version = %s: use latest or v<major>.<minor>, e.g. v1.35"
                              % _show(settings.get("pod_security_version")))
    problems.items.extend(tenants_registry.check_site(settings))
    seen = {}
    for index, entry in enumerate(teams):
        if not isinstance(entry, dict):
            problems.add(index, "", entry, "each team is a mapping with at least name")
            continue
        name = entry.get("name")
        team = name if isinstance(name, str) and name else index
        if not is_dns_label(name):
            problems.add(team, "name", name, "a team name is its namespace: a DNS-1123 label; " + DNS1123_LABEL_FIX)
        else:
            why = reserved_namespace(name, settings)
            if why:
                problems.add(team, "name", name, "%s is %s; choose another team name" % (name, why))
            if name in seen:
                problems.add(team, "name", name, "listed twice (entries %d and %d); merge them" % (seen[name], index))
            seen.setdefault(name, index)
        _check_team(problems, team, entry, settings, cluster)
    if settings.get("allocation_api") not in tenants_claims.ALLOCATION_APIS:
        problems.items.append("%s = %s: use %s" % (
            tenants_claims.VARIABLE, _show(settings.get("allocation_api")), " or ".join(tenants_claims.ALLOCATION_APIS)))
    if tenants_claims.is_dra(settings):
        _check_dra_total(problems, teams, cluster, settings)
        return problems.items
    total = sum(gpu_quota(e) for e in teams)
    available = (cluster or {}).get("gpus")
    if total and available is not None and total > available and not settings.get("allow_overcommit"):
        per_team = ", ".join("%s=%d" % (e.get("name"), gpu_quota(e)) for e in teams
                             if isinstance(e, dict) and gpu_quota(e))
        problems.items.append(
            "%s: the teams' quota.requests.nvidia.com/gpu add up to %d (%s) but the cluster has %d GPUs: lower the "
            "quotas or set tenants_allow_overcommit: true" % (VARIABLE, total, per_team, available))
    return problems.items


def _check_dra_total(problems, teams, cluster, settings):
    quota_key = tenants_claims.class_quota_key(upstream.DEVICE_CLASS_GPU)
    total = sum(tenants_claims.class_quota(e) for e in teams)
    available = (cluster or {}).get("gpus")
    if available is None:
        available = ((cluster or {}).get("dra") or {}).get("gpus")
    if total and available is not None and total > available and not settings.get("allow_overcommit"):
        per_team = ", ".join("%s=%d" % (e.get("name"), tenants_claims.class_quota(e)) for e in teams
                             if isinstance(e, dict) and tenants_claims.class_quota(e))
        problems.items.append(
            "%s: the teams' quota.%s add up to %d (%s) but the cluster's ResourceSlices publish %d GPUs: lower the "
            "quotas or set tenants_allow_overcommit: true" % (VARIABLE, quota_key, total, per_team, available))


# ---------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------

def _meta(name, namespace, team, labels, annotations=None):
    meta = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    annotations = dict(annotations or {})
    annotations[OWNED_KEYS_ANNOTATION] = json.dumps(
        {"labels": sorted(labels), "annotations": sorted(annotations)}, sort_keys=True, separators=(",", ":"))
    meta["annotations"] = annotations
    return meta


def _ports(ports):
    out = []
    for item in ports or []:
        spec = item if isinstance(item, dict) else {"port": item}
        port = spec["port"]
        if isinstance(port, str) and port.isdigit():
            port = int(port)
        rendered = {"protocol": spec.get("protocol", upstream.PROTOCOL_TCP), "port": port}
        if spec.get("end_port") is not None:
            rendered["endPort"] = spec["end_port"]
        out.append(rendered)
    return out


def _rule(peers, ports):
    rule = {"peers": peers}
    if ports:
        rule["ports"] = _ports(ports)
    return rule


def _namespace_rule(spec):
    """One rule per listed namespace: its own pods and ports."""
    spec = spec if isinstance(spec, dict) else {"namespace": spec}
    peer = {"namespaceSelector": {"matchLabels": {upstream.LABEL_NAMESPACE_NAME: spec["namespace"]}}}
    if spec.get("pod_labels"):
        peer["podSelector"] = {"matchLabels": dict((k, str(v)) for k, v in spec["pod_labels"].items())}
    return _rule([peer], spec.get("ports"))


def _policy(name, team, labels, policy_types, ingress=None, egress=None):
    spec = {"podSelector": {}, "policyTypes": list(policy_types)}
    if ingress is not None:
        spec["ingress"] = [dict([("from", r["peers"])] + ([("ports", r["ports"])] if r.get("ports") else []))
                           for r in ingress]
    if egress is not None:
        spec["egress"] = [dict([("to", r["peers"])] + ([("ports", r["ports"])] if r.get("ports") else []))
                          for r in egress]
    return {"apiVersion": upstream.NETWORKING_API_VERSION, "kind": "NetworkPolicy",
            "metadata": _meta(name, team, team, labels), "spec": spec}


def _subjects(groups=(), users=(), service_accounts=(), namespace=None):
    subjects = [{"kind": upstream.SUBJECT_GROUP, "apiGroup": upstream.RBAC_API_GROUP, "name": g} for g in groups]
    subjects += [{"kind": upstream.SUBJECT_USER, "apiGroup": upstream.RBAC_API_GROUP, "name": u} for u in users]
    for sa in service_accounts:
        ns, dummy, name = sa.rpartition("/")
        subjects.append({"kind": upstream.SUBJECT_SERVICE_ACCOUNT, "name": name, "namespace": ns or namespace})
    return subjects


def _role_binding(name, team, labels, role_kind, role, subjects):
    return {"apiVersion": upstream.RBAC_API_VERSION, "kind": "RoleBinding",
            "metadata": _meta(ROLE_BINDING_PREFIX + name, team, team, labels),
            "roleRef": {"apiGroup": upstream.RBAC_API_GROUP, "kind": role_kind, "name": role},
            "subjects": subjects}


def psa_labels(level, version):
    labels = {}
    for mode in upstream.PSA_MODES:
        labels[upstream.PSA_LABEL_PREFIX + mode] = level
        labels[upstream.PSA_LABEL_PREFIX + mode + upstream.PSA_VERSION_SUFFIX] = version
    return labels


def render_team(entry, settings):
    """The objects of one (validated) team, Namespace first."""
    team = entry["name"]
    labels = dict((k, str(v)) for k, v in (settings.get("common_labels") or {}).items())
    labels.update(dict((k, str(v)) for k, v in (entry.get("labels") or {}).items()))
    labels.update({upstream.LABEL_MANAGED_BY: MANAGED_BY, TEAM_LABEL: team})
    ns_labels = dict(labels)
    ns_labels.update(psa_labels(entry.get("pod_security", settings["default_pod_security"]),
                                settings["pod_security_version"]))
    annotations = dict(entry.get("annotations") or {})
    if entry.get("description"):
        annotations[DESCRIPTION_ANNOTATION] = entry["description"]
    if (settings.get("gpu_allocation") or {}).get(team):
        annotations[GPU_ALLOCATION_ANNOTATION] = str(settings["gpu_allocation"][team])
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(team, None, team, ns_labels, annotations)}]
    if entry.get("quota"):
        objects.append({"apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": _meta(QUOTA_NAME, team, team, labels),
                        "spec": {"hard": dict((k, str(v)) for k, v in entry["quota"].items())}})
    limit_range = entry.get("limit_range") or {}
    if any(limit_range.get(k) for k in LIMIT_RANGE_KEYS):
        limit = {"type": upstream.LIMIT_TYPE_CONTAINER}
        for key, api_key in LIMIT_RANGE_KEYS.items():
            if limit_range.get(key):
                limit[api_key] = dict((r, str(q)) for r, q in limit_range[key].items())
        objects.append({"apiVersion": "v1", "kind": "LimitRange", "metadata": _meta(LIMIT_RANGE_NAME, team, team, labels),
                        "spec": {"limits": [limit]}})
    network = entry.get("network") or {}
    objects.append(_policy(NP_DENY, team, labels, BOTH_DIRECTIONS))
    if network.get("allow_same_namespace", True):
        objects.append(_policy(NP_SAME_NAMESPACE, team, labels, BOTH_DIRECTIONS,
                               ingress=[_rule([{"podSelector": {}}], None)],
                               egress=[_rule([{"podSelector": {}}], None)]))
    if network.get("allow_dns", True):
        dns_peer = {"namespaceSelector": {"matchLabels": {upstream.LABEL_NAMESPACE_NAME: settings["dns_namespace"]}},
                    "podSelector": {"matchLabels": dict(settings["dns_pod_labels"])}}
        objects.append(_policy(NP_DNS, team, labels, [upstream.NETPOL_EGRESS], egress=[_rule(
            [dns_peer], [{"port": upstream.DNS_PORT, "protocol": upstream.PROTOCOL_UDP},
                         {"port": upstream.DNS_PORT, "protocol": upstream.PROTOCOL_TCP}])]))
    ingress = [_namespace_rule(spec) for spec in network.get("ingress_from_namespaces") or []]
    if ingress:
        objects.append(_policy(NP_INGRESS, team, labels, [upstream.NETPOL_INGRESS], ingress=ingress))
    egress = []
    for item in network.get("egress_cidrs") or []:
        spec = item if isinstance(item, dict) else {"cidr": item}
        block = {"cidr": spec["cidr"]}
        if spec.get("except"):
            block["except"] = list(spec["except"])
        egress.append(_rule([{"ipBlock": block}], spec.get("ports")))
    egress += [_namespace_rule(spec) for spec in network.get("egress_to_namespaces") or []]
    if egress:
        objects.append(_policy(NP_EGRESS, team, labels, [upstream.NETPOL_EGRESS], egress=egress))
    groups = entry.get("groups") or {}
    for role in upstream.TENANT_CLUSTER_ROLES:
        if groups.get(role):
            objects.append(_role_binding(role, team, labels, upstream.ROLE_REF_CLUSTER_ROLE, role, _subjects(groups[role])))
    for extra in entry.get("role_bindings") or []:
        kind, role = ((upstream.ROLE_REF_CLUSTER_ROLE, extra["cluster_role"]) if extra.get("cluster_role")
                      else (upstream.ROLE_REF_ROLE, extra["role"]))
        objects.append(_role_binding(extra["name"], team, labels, kind, role, _subjects(
            extra.get("groups") or [], extra.get("users") or [], extra.get("service_accounts") or [], team)))
    objects.extend(tenants_registry.render(entry, settings, lambda name: _meta(name, None, team, labels)))
    objects.extend(tenants_gpu_access.render(entry, settings, lambda name: _meta(name, None, team, labels)))
    objects.extend(tenants_claims.render(entry, settings, lambda name: _meta(name, team, team, labels)))
    return objects


def render_all(teams, settings):
    objects = []
    for entry in teams:
        objects.extend(render_team(entry, settings))
    return objects


def mig_resources_of(config):
    """Every nvidia.com/mig-<profile> resource some config of a MigPartedConfig offers."""
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig.profiles import resource_suffix
    offered = set()
    for entries in config.configs.values():
        for entry in entries:
            if isinstance(entry, dict) and entry.get("mig-enabled"):
                for profile in (entry.get("mig-devices") or {}):
                    offered.add(upstream.MIG_RESOURCE_PREFIX + resource_suffix(str(profile)))
    return offered


def needs_mig_check(teams):
    return any(quota_resource(str(k))[1].startswith(upstream.MIG_RESOURCE_PREFIX)
               for e in teams if isinstance(e, dict) and isinstance(e.get("quota"), dict) for k in e["quota"])


def needs_gpu_count(teams):
    return any(gpu_quota(e) for e in teams) if isinstance(teams, list) else False
