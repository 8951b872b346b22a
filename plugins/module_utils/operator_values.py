# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helm values of the NVIDIA GPU Operator chart, computed from the driver plan.

Pure functions (no Ansible, no third-party imports) so the filter, the role and
the unit tests share them. Key names follow the upstream chart values.yaml
(v26.7); tests/unit checks every path set here against the real file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import difflib

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.upstream import (
    MIG_STRATEGIES,
    NFD_SUBCHART,
)

# Every image repository of the chart: values path -> upstream default (v26.7).
# Nested paths (driver.manager, *.driverManager) are images too: the mirror must
# rewrite them or an air-gapped node pulls from nvcr.io. The NFD subchart keeps
# the image name inside `image.repository`.
REPOSITORY_PATHS = (
    (("operator",), "nvcr.io/nvidia"),
    (("validator",), "nvcr.io/nvidia"),
    (("driver",), "nvcr.io/nvidia"),
    (("driver", "manager"), "nvcr.io/nvidia/cloud-native"),
    (("toolkit",), "nvcr.io/nvidia/k8s"),
    (("devicePlugin",), "nvcr.io/nvidia"),
    (("dcgm",), "nvcr.io/nvidia/cloud-native"),
    (("dcgmExporter",), "nvcr.io/nvidia/k8s"),
    (("gfd",), "nvcr.io/nvidia"),
    (("migManager",), "nvcr.io/nvidia/cloud-native"),
    (("nodeStatusExporter",), "nvcr.io/nvidia"),
    (("gds",), "nvcr.io/nvidia/cloud-native"),
    (("gdrcopy",), "nvcr.io/nvidia/cloud-native"),
    (("vgpuManager",), ""),
    (("vgpuManager", "driverManager"), "nvcr.io/nvidia/cloud-native"),
    (("vgpuDeviceManager",), "nvcr.io/nvidia/cloud-native"),
    (("vfioManager",), "nvcr.io/nvidia/cloud-native"),
    (("vfioManager", "driverManager"), "nvcr.io/nvidia/cloud-native"),
    (("sandboxDevicePlugin",), "nvcr.io/nvidia"),
    (("kataSandboxDevicePlugin",), "nvcr.io/nvidia/cloud-native"),
    (("ccManager",), "nvcr.io/nvidia/cloud-native"),
    (("draDriver",), "nvcr.io/nvidia"),
    ((NFD_SUBCHART, "image"), "registry.k8s.io/nfd/node-feature-discovery"),
)

# Components whose `imagePullSecrets` is a list of secret NAMES (strings).
# dcgm and dcgmExporter carry no default in values.yaml but the chart's
# clusterpolicy template and the CRD read the key.
PULL_SECRET_COMPONENTS = (
    "operator", "validator", "driver", "toolkit", "devicePlugin", "dcgm",
    "dcgmExporter", "gfd", "migManager", "nodeStatusExporter", "gds", "gdrcopy",
    "vgpuManager", "vgpuDeviceManager", "vfioManager", "sandboxDevicePlugin",
    "kataSandboxDevicePlugin", "ccManager", "draDriver",
)
# Keys we may set that the chart reads although values.yaml has no default.
TEMPLATE_ONLY_KEYS = (
    "dcgm.imagePullSecrets",
    "dcgmExporter.imagePullSecrets",
    NFD_SUBCHART + ".image.repository",
    NFD_SUBCHART + ".imagePullSecrets",
)

# Top-level keys of the chart values (v26.7): a misspelt section in user
# values would otherwise be ignored by Helm without a word.
KNOWN_TOP_LEVEL_KEYS = (
    "platform", "nfd", "psa", "cdi", "sandboxWorkloads", "hostPaths", "daemonsets",
    "validator", "operator", "mig", "driver", "toolkit", "devicePlugin", "dcgm",
    "dcgmExporter", "gfd", "migManager", "nodeStatusExporter", "gds", "gdrcopy",
    "vgpuManager", "vgpuDeviceManager", "vfioManager", "kataManager",
    "sandboxDevicePlugin", "kataSandboxDevicePlugin", "ccManager", "clusterPolicy",
    "gpuCluster", "draDriver", "extraObjects", NFD_SUBCHART,
    # accepted by the chart templates / older charts, absent from the defaults
    "imagePullSecrets", "nameOverride", "fullnameOverride",
)

MIRROR_LAYOUTS = ("path", "flat")


class OperatorValuesError(ValueError):
    """Bad input; the message names the field and the fix."""


def deep_merge(base, override):
    """Return base updated recursively with override (dicts merge, the rest replaces)."""
    result = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def get_path(values, path, default=None):
    node = values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def set_path(values, path, value):
    node = values
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def leaf_items(values, prefix=()):
    """(path tuple, value) for every non-dict leaf (empty dicts count as leaves)."""
    items = []
    for key, value in values.items():
        path = prefix + (key,)
        if isinstance(value, dict) and value:
            items.extend(leaf_items(value, path))
        else:
            items.append((path, value))
    return items


def leaf_paths(values):
    """Every dotted key path to a leaf."""
    return [".".join(path) for path, _value in leaf_items(values)]


def _split_registry(repository):
    """('nvcr.io', 'nvidia/k8s') for 'nvcr.io/nvidia/k8s'; host '' when none."""
    first, _sep, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "", repository


def mirror_repository(repository, mirror, layout="path"):
    """Rewrite one repository to the mirror.

    layout 'path' keeps the upstream path (nvcr.io/nvidia/k8s ->
    <mirror>/nvidia/k8s, what `skopeo sync`/`crane` mirroring produces);
    'flat' puts every image directly under the mirror (the NFD repository keeps
    its last element, the image name).
    """
    mirror = mirror.rstrip("/")
    if not repository or repository == mirror or repository.startswith(mirror + "/"):
        return repository
    _host, path = _split_registry(repository)
    if layout == "flat":
        return mirror
    return "%s/%s" % (mirror, path)


def _validate_plan(plan):
    if not isinstance(plan, dict):
        raise OperatorValuesError(
            "driver plan must be the dict returned by skaffon.gpu_platform.driver_plan, got %s"
            % type(plan).__name__)
    errors = plan.get("errors") or []
    if errors:
        raise OperatorValuesError(
            "driver plan has errors, fix them before installing the GPU Operator: %s"
            % "; ".join(str(e) for e in errors))
    for key in ("driver_enabled", "toolkit_enabled"):
        if not isinstance(plan.get(key), bool):
            raise OperatorValuesError(
                "driver plan key %r must be true or false (got %r); pass the output of "
                "skaffon.gpu_platform.driver_plan" % (key, plan.get(key)))


def _validate_user_values(user_values):
    if not isinstance(user_values, dict):
        raise OperatorValuesError("gpu_operator_values must be a dict of chart values")
    unknown = sorted(k for k in user_values if k not in KNOWN_TOP_LEVEL_KEYS)
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, KNOWN_TOP_LEVEL_KEYS, n=1)
            hints.append("%s (did you mean %s?)" % (key, close[0]) if close else key)
        raise OperatorValuesError(
            "gpu_operator_values has keys the GPU Operator chart does not know: %s; "
            "Helm would ignore them silently" % ", ".join(hints))
    secrets = user_values.get("imagePullSecrets")
    if secrets is not None:
        _validate_secret_names(secrets, "gpu_operator_values.imagePullSecrets")


def _validate_secret_names(secrets, field):
    if not isinstance(secrets, list) or not all(isinstance(s, str) and s for s in secrets):
        raise OperatorValuesError(
            "%s must be a list of Secret NAMES (strings) as the GPU Operator chart expects, "
            "e.g. [regcred], not %r" % (field, secrets))


def check_driver_crd(values):
    """FACTS.md trap (gpu-operator#1795): NVIDIADriver CRs install drivers even
    with driver.enabled=false. Refuse the combination, name the fix."""
    driver_enabled = get_path(values, ("driver", "enabled"), True)
    crd_enabled = get_path(values, ("driver", "nvidiaDriverCRD", "enabled"), False)
    if driver_enabled is False and crd_enabled is True:
        raise OperatorValuesError(
            "driver.enabled=false with driver.nvidiaDriverCRD.enabled=true: NVIDIADriver "
            "custom resources would still install drivers on nodes that already have one "
            "(gpu-operator#1795). Set driver.nvidiaDriverCRD.enabled=false (host drivers) "
            "or let the operator manage drivers (driver.enabled=true).")


def operator_values(plan, user_values=None, mig_strategy=None, service_monitor=None,
                    image_mirror=None, image_mirror_layout="path", image_pull_secrets=None,
                    device_plugin_config=None):
    """Compute the chart values. Precedence: plan < computed settings < user values
    (an explicit user value is an override); the result is then checked."""
    _validate_plan(plan)
    user_values = user_values or {}
    _validate_user_values(user_values)

    values = {
        "driver": {"enabled": plan["driver_enabled"]},
        "toolkit": {"enabled": plan["toolkit_enabled"]},
    }
    if not plan["driver_enabled"]:
        # Keep the CRD mode off with host drivers (gpu-operator#1795).
        values["driver"]["nvidiaDriverCRD"] = {"enabled": False}

    if mig_strategy is not None:
        if mig_strategy not in MIG_STRATEGIES:
            raise OperatorValuesError(
                "gpu_operator_mig_strategy must be one of %s, got %r"
                % (", ".join(MIG_STRATEGIES), mig_strategy))
        values["mig"] = {"strategy": mig_strategy}
    if service_monitor is not None:
        if not isinstance(service_monitor, bool):
            raise OperatorValuesError(
                "gpu_operator_service_monitor must be true or false, got %r" % (service_monitor,))
        values["dcgmExporter"] = {"serviceMonitor": {"enabled": service_monitor}}
    if device_plugin_config:
        name = device_plugin_config.get("name")
        if not name:
            raise OperatorValuesError("device plugin config needs a ConfigMap name")
        values["devicePlugin"] = {"config": {
            "create": False, "name": name,
            "default": device_plugin_config.get("default") or ""}}

    values = deep_merge(values, user_values)
    check_driver_crd(values)

    if image_mirror:
        apply_mirror(values, image_mirror, image_mirror_layout)
    if image_pull_secrets:
        apply_pull_secrets(values, image_pull_secrets)
    return values


def apply_mirror(values, mirror, layout="path"):
    """Point every component repository (defaults and user-set) at the mirror."""
    if layout not in MIRROR_LAYOUTS:
        raise OperatorValuesError(
            "gpu_operator_image_mirror_layout must be one of %s, got %r"
            % (", ".join(MIRROR_LAYOUTS), layout))
    if not isinstance(mirror, str) or "://" in mirror or " " in mirror:
        raise OperatorValuesError(
            "gpu_operator_image_mirror must be a registry prefix like "
            "mirror.example:5000/nvidia (no scheme), got %r" % (mirror,))
    for path, default in REPOSITORY_PATHS:
        current = get_path(values, path + ("repository",), default)
        if not current:
            continue  # e.g. vgpuManager: private image, the user names it
        if layout == "flat" and path == (NFD_SUBCHART, "image"):
            target = "%s/%s" % (mirror.rstrip("/"), current.rstrip("/").rsplit("/", 1)[-1])
            if current.startswith(mirror.rstrip("/") + "/"):
                target = current
        else:
            target = mirror_repository(current, mirror, layout)
        set_path(values, path + ("repository",), target)
    return values


def apply_pull_secrets(values, secrets):
    """Set imagePullSecrets names on every component and the NFD subchart."""
    _validate_secret_names(secrets, "gpu_operator_image_pull_secrets")
    for component in PULL_SECRET_COMPONENTS:
        set_path(values, (component, "imagePullSecrets"), list(secrets))
    # The NFD subchart takes Kubernetes LocalObjectReferences, not names.
    set_path(values, (NFD_SUBCHART, "imagePullSecrets"), [{"name": s} for s in secrets])
    return values


def values_diff(current, desired):
    """Changed leaves between two values dicts: {dotted path: {before, after}}."""
    before = dict(leaf_items(current or {}))
    after = dict(leaf_items(desired or {}))
    changes = {}
    for path in sorted(set(before) | set(after)):
        if before.get(path) != after.get(path):
            changes[".".join(path)] = {"before": before.get(path), "after": after.get(path)}
    return changes
