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
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import as_bool, to_bool, with_suggestions
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.upstream import (
    CHART_CLUSTER_POLICY_KEY,
    CHART_DEPLOY_CR,
    CHART_GPU_CLUSTER_KEY,
    CHART_NVIDIA_DRIVER_CRD_KEY,
    DEVICE_LIST_ENVVAR,
    DEVICE_LIST_STRATEGY_ENV,
    DEVICE_LIST_VOLUME_MOUNTS,
    MIG_STRATEGIES,
    NFD_SUBCHART,
    TOOLKIT_ACCEPT_ENVVAR_ENV,
    TOOLKIT_ACCEPT_MOUNTS_ENV,
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

# Chart defaults (values.yaml v26.7) of the two toleration lists that decide
# where operands and the NFD worker run. Helm replaces lists, so setting either
# key drops these defaults: they are kept explicitly.
OPERAND_TOLERATIONS_PATH = ("daemonsets", "tolerations")
NFD_WORKER_TOLERATIONS_PATH = (NFD_SUBCHART, "worker", "tolerations")
CHART_DEFAULT_TOLERATIONS = {
    OPERAND_TOLERATIONS_PATH: (
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ),
    NFD_WORKER_TOLERATIONS_PATH: (
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ),
}
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# Chart value keys that are booleans: a quoted "no"/"false" there is a string
# Helm passes on as is (the chart tests truthiness, so "false" is true).
BOOL_KEY_NAMES = ("enabled", "deployCR", "upgradeCRD", "cleanupCRD", "create", "autoUpgrade",
                  "usePrecompiled", "useOpenKernelModules", "renameByDefault",
                  "failRequestsGreaterThanOne", "hostNetwork")

# Chart values that look like credentials (masked in diffs): key names, env
# var names, and user:password in URLs.
SECRET_NAME_RE = re.compile(r"(PASSWORD|PASSWD|TOKEN|SECRET|API_?KEY|CREDENTIAL|PRIVATE_?KEY)", re.I)
URL_USERINFO_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/@:\s]*):(?P<password>[^/@\s]+)@")
MASK = "********"


class OperatorValuesError(DomainError):
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


def _validate_user_values(user_values, field="gpu_operator_values"):
    if not isinstance(user_values, dict):
        raise OperatorValuesError(
            "%s must be a mapping of chart values (YAML in group_vars, or -e '{\"driver\": {...}}' as JSON), "
            "got %s %r" % (field, _kind(user_values), user_values))
    unknown = sorted(k for k in user_values if k not in KNOWN_TOP_LEVEL_KEYS)
    if unknown:
        raise OperatorValuesError(
            "gpu_operator_values has keys the GPU Operator chart does not know: %s; "
            "Helm would ignore them silently" % with_suggestions(unknown, KNOWN_TOP_LEVEL_KEYS))
    secrets = user_values.get("imagePullSecrets")
    if secrets is not None:
        _validate_secret_names(secrets, field + ".imagePullSecrets")
    for component in PULL_SECRET_COMPONENTS:
        section = user_values.get(component)
        if isinstance(section, dict) and section.get("imagePullSecrets") is not None:
            _validate_secret_names(section["imagePullSecrets"], "%s.%s.imagePullSecrets" % (field, component))
    for path, value in leaf_items(user_values):
        if path[-1] in BOOL_KEY_NAMES or path[-1].endswith("Enabled"):
            if isinstance(value, str):
                hint = ("%s (unquoted)" % str(to_bool(value)).lower()
                        if to_bool(value) is not None else "true or false")
                raise OperatorValuesError(
                    "%s.%s is the string %r; the chart wants a boolean there (a quoted string is passed to "
                    "the ClusterPolicy as is). Write %s." % (field, ".".join(path), value, hint))
    for path in (OPERAND_TOLERATIONS_PATH, NFD_WORKER_TOLERATIONS_PATH):
        tolerations = get_path(user_values, path)
        if tolerations is not None and (not isinstance(tolerations, list)
                                        or not all(isinstance(t, dict) for t in tolerations)):
            raise OperatorValuesError(
                "%s.%s must be a list of Kubernetes tolerations ({key, operator, value, effect}), got %r"
                % (field, ".".join(path), tolerations))


def _kind(value):
    if isinstance(value, str):
        return "the string"
    if isinstance(value, bool):
        return "the boolean"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "a %s" % type(value).__name__


def _validate_secret_names(secrets, field):
    if not isinstance(secrets, list) or not all(isinstance(s, str) and s for s in secrets):
        objects = isinstance(secrets, list) and all(isinstance(s, dict) and "name" in s for s in secrets)
        fix = ("write the names only: [%s]" % ", ".join(str(s["name"]) for s in secrets)
               if objects else "e.g. [regcred]")
        raise OperatorValuesError(
            "%s must be a list of Secret NAMES (strings): the GPU Operator chart renders each item as a "
            "name, so %r would reach the pods as %r. Fix: %s (or set gpu_operator_image_pull_secrets)."
            % (field, secrets, "map[...]" if objects else secrets, fix))


def _check_plan_overrides(plan, values):
    """driver/toolkit.enabled=false in user values while the plan needs the operator to install them."""
    nodes = plan.get("nodes") or {}
    for key, plan_key, what in (("driver", "operator_installs_driver", "driver"),
                                ("toolkit", "operator_installs_toolkit", "container toolkit")):
        if get_path(values, (key, "enabled"), True) is False and plan["%s_enabled" % key]:
            needing = sorted(n for n, v in nodes.items() if v.get(plan_key))
            raise OperatorValuesError(
                "gpu_operator_values.%s.enabled=false, but the driver plan has the GPU Operator install the %s "
                "on %s (no host %s there): those nodes would get no GPU. Remove the override, install the "
                "%s on those hosts, or decide it in the plan (node_prereqs_%s_enabled / driver_plan %s_enabled)."
                % (key, what, ", ".join(needing) or "the GPU nodes", what, what, key, key))


def tolerates(tolerations, taint):
    """Kubernetes toleration matching (k8s.io/api core/v1 toleration.go ToleratesTaint)."""
    for tol in tolerations or ():
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        operator = tol.get("operator") or "Equal"
        key = tol.get("key") or ""
        if not key and operator == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def pool_tolerations(base, taints):
    """`base` plus one Equal toleration for every pool taint base does not tolerate yet."""
    result = [dict(t) for t in base]
    for taint in taints or ():
        if not tolerates(result, taint):
            tol = {"key": taint["key"], "operator": "Equal", "value": taint.get("value") or "",
                   "effect": taint["effect"]}
            result.append(tol)
    return result


def _validate_taints(taints):
    if not isinstance(taints, (list, tuple)):
        raise OperatorValuesError("pool taints must be a list of {key, value, effect}, got %r" % (taints,))
    for taint in taints:
        if not isinstance(taint, dict) or not taint.get("key") or taint.get("effect") not in TAINT_EFFECTS:
            raise OperatorValuesError(
                "pool taint %r needs a key and an effect among %s" % (taint, ", ".join(TAINT_EFFECTS)))


def check_driver_crd(values):
    """NVIDIADriver CRs install drivers even with driver.enabled=false (an upstream
    operator behaviour), so host drivers would be replaced: refuse the combination, name the fix."""
    driver_enabled = get_path(values, ("driver", "enabled"), True)
    crd_enabled = get_path(values, ("driver", "nvidiaDriverCRD", "enabled"), False)
    if driver_enabled is False and crd_enabled is True:
        raise OperatorValuesError(
            "driver.enabled=false with driver.nvidiaDriverCRD.enabled=true: NVIDIADriver "
            "custom resources would still install drivers on nodes that already have one "
            "(gpu-operator#1795). Set driver.nvidiaDriverCRD.enabled=false (host drivers) "
            "or let the operator manage drivers (driver.enabled=true).")


# ClusterPolicy spec.devicePlugin.mps.root: CRD default and values.yaml default
# (api/nvidia/v1/clusterpolicy_types.go MPSConfig, +kubebuilder:default=/run/nvidia/mps).
MPS_ROOT_DEFAULT = "/run/nvidia/mps"


def _mps_root(root):
    """devicePlugin.mps.root, the host directory of the MPS pipes and shm. The chart's
    templates/clusterpolicy.yaml (v26.7.0 and gpu-operator main a22dbf6) does not copy
    devicePlugin.mps into the ClusterPolicy, so the operator always uses the CRD default: another
    root would be a value that changes nothing. Refused until the chart passes it on."""
    if root != MPS_ROOT_DEFAULT:
        raise OperatorValuesError(
            "gpu_operator_mps_root is %r: the chart does not pass devicePlugin.mps.root to the ClusterPolicy "
            "(templates/clusterpolicy.yaml), so the operator keeps the CRD default %s. Leave it at %s, or set "
            "spec.devicePlugin.mps.root on the ClusterPolicy yourself" % (root, MPS_ROOT_DEFAULT, MPS_ROOT_DEFAULT))
    return root


def operator_values(plan, user_values=None, mig_strategy=None, service_monitor=None,
                    image_mirror=None, image_mirror_layout="path", image_pull_secrets=None,
                    device_plugin_config=None, values_overlay=None, pool_taints=None, dcgm_hostengine=None,
                    gpu_access_by_request=None, allocation_api=None):
    """Compute the chart values. Precedence: plan < computed settings < user values
    (an explicit user value is an override); the result is then checked.

    dcgm_hostengine: dcgm.enabled, the standalone nv-hostengine DaemonSet (nvidia-dcgm) the
    exporter then connects to; with the chart default (false) the exporter embeds its own host
    engine, which no other client (dcgmi, the hand-over check's failure injection) can reach.

    pool_taints: taints the collection puts on GPU pools (node_prereqs_pool_taints);
    operands and the NFD worker must tolerate them or they never run there, while
    the ClusterPolicy still says ready. They are added to the chart's (or the
    user's) toleration lists, never replace them.

    allocation_api: device-plugin (the ClusterPolicy stack, default) or dra (the GPUCluster stack
    with NVIDIA's DRA driver, see allocation_values)."""
    _validate_plan(plan)
    allocation_api = check_allocation_api(allocation_api)
    user_values = {} if user_values is None else user_values
    _validate_user_values(user_values)
    if values_overlay:
        _validate_user_values(values_overlay, "gpu_operator_values_overlay")
        user_values = deep_merge(user_values, values_overlay)

    values = {
        "driver": {"enabled": plan["driver_enabled"]},
        "toolkit": {"enabled": plan["toolkit_enabled"]},
    }
    if not plan["driver_enabled"]:
        # Keep the CRD mode off with host drivers: NVIDIADriver resources would install drivers anyway.
        values["driver"]["nvidiaDriverCRD"] = {"enabled": False}

    if mig_strategy is not None:
        if mig_strategy not in MIG_STRATEGIES:
            raise OperatorValuesError(
                "gpu_operator_mig_strategy must be one of %s, got %r"
                % (", ".join(MIG_STRATEGIES), mig_strategy))
        values["mig"] = {"strategy": mig_strategy}
    if service_monitor is not None:
        service_monitor = as_bool(service_monitor, "gpu_operator_service_monitor", error=OperatorValuesError)
        values["dcgmExporter"] = {"serviceMonitor": {"enabled": service_monitor}}
    if dcgm_hostengine is not None:
        values["dcgm"] = {"enabled": as_bool(dcgm_hostengine, "gpu_operator_dcgm_hostengine", error=OperatorValuesError)}
    if device_plugin_config:
        name = device_plugin_config.get("name")
        if not name:
            raise OperatorValuesError("device plugin config needs a ConfigMap name")
        values["devicePlugin"] = {"config": {
            "create": False, "name": name,
            "default": device_plugin_config.get("default") or ""}}
        if device_plugin_config.get("mps_root") is not None:
            values["devicePlugin"]["mps"] = {"root": _mps_root(device_plugin_config["mps_root"])}

    if allocation_api == ALLOCATION_DRA:
        check_dra_inputs(mig_strategy, device_plugin_config, gpu_access_by_request)
    values = deep_merge(allocation_values(allocation_api, plan), values)
    values = deep_merge(values, user_values)
    check_allocation_values(values, allocation_api)
    if gpu_access_by_request is not None and as_bool(gpu_access_by_request, "gpu_operator_gpu_access_by_request", error=OperatorValuesError):
        apply_gpu_access_by_request(values)
    check_driver_crd(values)
    _check_plan_overrides(plan, values)
    if pool_taints:
        _validate_taints(pool_taints)
        for path, default in CHART_DEFAULT_TOLERATIONS.items():
            base = get_path(user_values, path)
            set_path(values, path, pool_tolerations(default if base is None else base, pool_taints))

    if image_mirror:
        apply_mirror(values, image_mirror, image_mirror_layout)
    if image_pull_secrets:
        apply_pull_secrets(values, image_pull_secrets)
    return values


ALLOCATION_DEVICE_PLUGIN = "device-plugin"
ALLOCATION_DRA = "dra"
ALLOCATION_APIS = (ALLOCATION_DEVICE_PLUGIN, ALLOCATION_DRA)


def check_allocation_api(allocation_api, field="gpu_operator_allocation_api"):
    if allocation_api is None:
        return ALLOCATION_DEVICE_PLUGIN
    if allocation_api not in ALLOCATION_APIS:
        raise OperatorValuesError("%s must be one of %s, got %r" % (field, ", ".join(ALLOCATION_APIS), allocation_api))
    return allocation_api


def allocation_values(allocation_api, plan):
    """The chart's switches of the two stacks (values.yaml v26.7.0: clusterPolicy.deployCR,
    gpuCluster.deployCR; templates/validations.yaml fails when both are true). Written only for
    dra: with the device plugin the chart defaults are that stack, and existing releases keep
    their values unchanged. A GPUCluster does not install drivers
    itself: with the operator's driver the chart requires driver.nvidiaDriverCRD.enabled=true
    (validations.yaml) and then deploys the default NVIDIADriver CR (deployDefaultCR)."""
    if allocation_api != ALLOCATION_DRA:
        return {}
    values = {CHART_CLUSTER_POLICY_KEY: {CHART_DEPLOY_CR: False}, CHART_GPU_CLUSTER_KEY: {CHART_DEPLOY_CR: True}}
    if plan["driver_enabled"]:
        values["driver"] = {CHART_NVIDIA_DRIVER_CRD_KEY: {"enabled": True}}
    return values


def check_dra_inputs(mig_strategy, device_plugin_config, gpu_access_by_request):
    """Settings of the device-plugin stack that mean nothing with a GPUCluster (it runs no device
    plugin, no MIG manager, no toolkit): refused rather than silently ignored."""
    if device_plugin_config:
        raise OperatorValuesError(
            "gpu_operator_time_slicing is set, but gpu_operator_allocation_api is dra: time-slicing and MPS are "
            "device plugin configs and the GPUCluster stack runs no device plugin. Remove gpu_operator_time_slicing, "
            "or use gpu_operator_allocation_api: device-plugin")
    if mig_strategy not in (None, "none"):
        raise OperatorValuesError(
            "gpu_operator_mig_strategy is %r, but gpu_operator_allocation_api is dra: the MIG strategy is a "
            "ClusterPolicy setting (how the device plugin names MIG devices); the DRA driver publishes each MIG "
            "device with its profile attribute instead. Leave gpu_operator_mig_strategy unset (null)" % mig_strategy)
    if gpu_access_by_request is not None and as_bool(gpu_access_by_request, "gpu_operator_gpu_access_by_request",
                                                     error=OperatorValuesError):
        raise OperatorValuesError(
            "gpu_operator_gpu_access_by_request is true, but gpu_operator_allocation_api is dra: it configures the "
            "container toolkit and the device plugin of the ClusterPolicy stack, which a GPUCluster does not run "
            "(the DRA driver hands devices to containers through CDI). Set gpu_operator_gpu_access_by_request: false")


def check_allocation_values(values, allocation_api):
    """User values that contradict the chosen stack (the chart would render both CRs, or the wrong one)."""
    want_dra = allocation_api == ALLOCATION_DRA
    cp = get_path(values, (CHART_CLUSTER_POLICY_KEY, CHART_DEPLOY_CR), True)    # chart defaults
    gc = get_path(values, (CHART_GPU_CLUSTER_KEY, CHART_DEPLOY_CR), False)
    if cp is not (not want_dra) or gc is not want_dra:
        raise OperatorValuesError(
            "gpu_operator_values sets %s.%s=%s and %s.%s=%s, but gpu_operator_allocation_api is %s: the role "
            "sets these switches from the allocation mode (the chart refuses both CRs at once). Remove them from "
            "gpu_operator_values and set gpu_operator_allocation_api: %s"
            % (CHART_CLUSTER_POLICY_KEY, CHART_DEPLOY_CR, cp, CHART_GPU_CLUSTER_KEY, CHART_DEPLOY_CR, gc,
               allocation_api, ALLOCATION_DRA if gc is True else ALLOCATION_DEVICE_PLUGIN))
    if want_dra and get_path(values, ("driver", "enabled"), True) is not False \
            and get_path(values, ("driver", CHART_NVIDIA_DRIVER_CRD_KEY, "enabled"), False) is not True:
        raise OperatorValuesError(
            "gpu_operator_values sets driver.%s.enabled=false while the GPU Operator installs the driver "
            "(driver.enabled=true) and gpu_operator_allocation_api is dra: a GPUCluster installs no driver itself, "
            "the chart refuses it (\"the NVIDIADriver CRD must be enabled when deploying a GPUCluster CR\"). "
            "Remove the override, or use host drivers (driver.enabled=false)" % CHART_NVIDIA_DRIVER_CRD_KEY)


def _set_env(values, component, name, value):
    """Add name=value to <component>.env (Helm replaces lists: the user's entries stay); a user
    entry with another value is a contradiction, refused with the fix."""
    env = get_path(values, (component, "env")) or []
    for entry in env:
        if isinstance(entry, dict) and entry.get("name") == name:
            if str(entry.get("value")).lower() != value:
                raise OperatorValuesError(
                    "gpu_operator_values.%s.env sets %s=%s, but gpu_operator_gpu_access_by_request is true and "
                    "needs %s=%s (else a pod that sets NVIDIA_VISIBLE_DEVICES and requests no GPU gets the "
                    "node's GPUs). Remove the entry, or set gpu_operator_gpu_access_by_request: false."
                    % (component, name, entry.get("value"), name, value))
            return
    set_path(values, (component, "env"), list(env) + [{"name": name, "value": value}])


def apply_gpu_access_by_request(values):
    """GPUs only through the device plugin (docs/security.md): the operator's toolkit ignores
    NVIDIA_VISIBLE_DEVICES in unprivileged containers and takes the device list from the plugin's
    volume mounts; without CDI (cdi.enabled=false) the plugin passes devices as volume mounts
    instead of that variable. With CDI the operator sets the plugin's strategy itself
    (cdi-annotations,cdi-cri), which does not use the variable."""
    if get_path(values, ("toolkit", "enabled"), True) is not False:
        _set_env(values, "toolkit", TOOLKIT_ACCEPT_ENVVAR_ENV, "false")
        _set_env(values, "toolkit", TOOLKIT_ACCEPT_MOUNTS_ENV, "true")
    if get_path(values, ("cdi", "enabled"), True) is False:
        for entry in get_path(values, ("devicePlugin", "env")) or []:
            if (isinstance(entry, dict) and entry.get("name") == DEVICE_LIST_STRATEGY_ENV
                    and DEVICE_LIST_ENVVAR in str(entry.get("value")).split(",")):
                raise OperatorValuesError(
                    "gpu_operator_values.devicePlugin.env sets %s=%s: with the toolkit ignoring "
                    "NVIDIA_VISIBLE_DEVICES (gpu_operator_gpu_access_by_request: true) pods would get no GPU "
                    "through it. Use %s, or set gpu_operator_gpu_access_by_request: false."
                    % (DEVICE_LIST_STRATEGY_ENV, entry.get("value"), DEVICE_LIST_VOLUME_MOUNTS))
        _set_env(values, "devicePlugin", DEVICE_LIST_STRATEGY_ENV, DEVICE_LIST_VOLUME_MOUNTS)
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


def _mask_url(text):
    return URL_USERINFO_RE.sub(lambda m: "%s%s:%s@" % (m.group("scheme"), m.group("user"), MASK), text)


def mask_secrets(value, secret_paths=(), path=()):
    """`value` with credential-looking parts replaced by MASK: keys and env var
    names like *PASSWORD*/*TOKEN*/*SECRET*, user:password in URLs, and the
    dotted paths listed in secret_paths (gpu_operator_secret_values)."""
    if ".".join(path) in secret_paths and value is not None:
        return MASK
    if (path and SECRET_NAME_RE.search(path[-1]) and not isinstance(value, (dict, list, tuple))
            and value not in (None, "")):
        return MASK
    if isinstance(value, dict):
        named = value.get("name")
        out = {}
        for key, item in value.items():
            if isinstance(key, str) and SECRET_NAME_RE.search(key) and not isinstance(item, (dict, list)):
                out[key] = MASK if item not in (None, "") else item
            elif key == "value" and isinstance(named, str) and SECRET_NAME_RE.search(named):
                out[key] = MASK if item not in (None, "") else item  # env: [{name: X_PASSWORD, value: ...}]
            else:
                out[key] = mask_secrets(item, secret_paths, path + (str(key),))
        return out
    if isinstance(value, (list, tuple)):
        return [mask_secrets(item, secret_paths, path) for item in value]
    if isinstance(value, str):
        return _mask_url(value)
    return value


def secret_strings(value, secret_paths=()):
    """The clear-text strings mask_secrets hides (to scrub them from error text)."""
    found = []

    def walk(clear, masked):
        if isinstance(clear, dict) and isinstance(masked, dict):
            for key in clear:
                walk(clear[key], masked.get(key))
        elif isinstance(clear, (list, tuple)) and isinstance(masked, list):
            for a, b in zip(clear, masked):
                walk(a, b)
        elif clear != masked and clear not in (None, ""):
            if isinstance(clear, str) and masked != MASK:
                found.extend(m.group("password") for m in URL_USERINFO_RE.finditer(clear))
            else:
                found.append(str(clear))
    walk(value, mask_secrets(value, secret_paths))
    return sorted(set(s for s in found if len(s) >= 3), key=len, reverse=True)


def scrub(text, secrets):
    """text with every secret string replaced by MASK."""
    text = _mask_url(str(text))
    for secret in secrets or ():
        text = text.replace(secret, MASK)
    return text


def values_diff(current, desired, secret_paths=()):
    """Changed leaves between two values dicts: {dotted path: {before, after}},
    credentials masked (a masked value that changed reads "******** (changed)")."""
    before = dict(leaf_items(current or {}))
    after = dict(leaf_items(desired or {}))
    changes = {}
    for path in sorted(set(before) | set(after)):
        if before.get(path) != after.get(path):
            old = mask_secrets(before.get(path), secret_paths, path)
            new = mask_secrets(after.get(path), secret_paths, path)
            if old == new:
                new = "%s (changed)" % MASK
            changes[".".join(path)] = {"before": old, "after": new}
    return changes


# Tolerations the DaemonSet controller adds to every DaemonSet pod
# (pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations).
DAEMONSET_AUTO_TOLERATIONS = tuple(
    {"key": "node.kubernetes.io/" + key, "operator": "Exists", "effect": effect}
    for key, effect in (("not-ready", "NoExecute"), ("unreachable", "NoExecute"),
                        ("disk-pressure", "NoSchedule"), ("memory-pressure", "NoSchedule"),
                        ("pid-pressure", "NoSchedule"), ("unschedulable", "NoSchedule"),
                        ("network-unavailable", "NoSchedule")))


def untolerated_nodes(nodes, tolerations, expect):
    """'node (taint key=value:Effect)' for every expected node with a NoSchedule/NoExecute
    taint the operand DaemonSets do not tolerate: no operand pod would run there."""
    allowed = list(tolerations or ()) + list(DAEMONSET_AUTO_TOLERATIONS)
    wanted = set(expect or ())
    lines = []
    for node in nodes or ():
        name = (node.get("metadata") or {}).get("name")
        if name not in wanted:
            continue
        for taint in (node.get("spec") or {}).get("taints") or ():
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(allowed, taint):
                lines.append("%s (taint %s=%s:%s)" % (name, taint.get("key"), taint.get("value") or "",
                                                      taint.get("effect")))
    return lines
