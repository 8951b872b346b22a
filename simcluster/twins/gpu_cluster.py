"""GPU Operator twin, DRA stack: what operator v26.7.0 renders for a GPUCluster (nvidia.com/v1alpha1).

The GPUCluster replaces the ClusterPolicy when the chart is installed with
gpuCluster.deployCR=true and clusterPolicy.deployCR=false (the chart refuses both at once, and
the operator refuses both CRs at once: see GpuOperator.reconcile). It manages no driver, toolkit
or device plugin: the driver is on the host (or comes from an NVIDIADriver CR) and GPUs reach
pods through ResourceClaims allocated from the ResourceSlices of NVIDIA's DRA driver.

States, in the operator's order (internal/state/manager.go newGPUClusterStates):
  state-dra-driver      DeviceClasses gpu/mig/vfio.gpu.nvidia.com (+ the two compute-domain ones
                        when computeDomains is enabled), the kubelet-plugin DaemonSet, the
                        compute-domain controller Deployment, the ResourceSlice admission policy;
  state-dcgm            only with spec.dcgm.enabled=true (no server-side default: nil is off);
  state-dcgm-exporter   on unless spec.dcgmExporter.enabled=false, its GPUs by an admin-access claim;
  state-dra-validation  a DaemonSet whose init container holds an admin-access claim on one GPU.
The objects below follow manifests/state-*/ and the operator's golden renderings
(internal/state/testdata/golden/gpucluster-*.yaml); RBAC and ServiceAccounts are not rendered.
"""

from .util import clone

GROUP_VERSION = "nvidia.com/v1alpha1"
KIND = "GPUCluster"
NAME = "gpu-cluster"          # the chart's CR name (the CRD makes it a singleton)
FINALIZER = "gpucluster.nvidia.com/dra-resourceclaim"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
DRIVER = "gpu.nvidia.com"
DRA_API = "resource.k8s.io/v1"

KUBELET_PLUGIN = "nvidia-dra-driver-kubelet-plugin"
CONTROLLER = "nvidia-dra-driver-controller"
VALIDATOR = "nvidia-dra-validator"
EXPORTER = "nvidia-dcgm-exporter-dra"
DCGM = "nvidia-dcgm-dra"
DCGM_PORT = 5555
EXPORTER_PORT = 9400
GPUS_HEALTH_PORT = 51516
CD_HEALTH_PORT = 51515

DEPLOY = "nvidia.com/gpu.deploy."
# controllers/state_manager.go gpuClusterStateLabels: the deploy labels of the DRA stack
STATE_LABELS = [DEPLOY + k for k in ("driver", "dra-driver", "dra-validator", "dcgm-dra",
                                     "dcgm-exporter-dra")]
# clusterPolicyStateLabelKeys() minus the shared ones (and vgpu-manager): swept off a node
# when the GPUCluster takes over, and the DRA-only ones are swept the other way round
DEVICE_PLUGIN_ONLY_LABELS = [DEPLOY + k for k in (
    "gpu-feature-discovery", "container-toolkit", "device-plugin", "dcgm", "dcgm-exporter",
    "node-status-exporter", "operator-validator", "client", "sandbox-device-plugin",
    "sandbox-validator", "vfio-manager", "kata-manager", "cc-manager", "vgpu-device-manager",
    "kata-sandbox-device-plugin", "mig-manager")]
DRA_ONLY_LABELS = STATE_LABELS[1:]
DRA_DRIVER_LABEL = DEPLOY + "dra-driver"

# state name -> the workloads whose readiness the state waits on
STATES = ["state-dra-driver", "state-dcgm", "state-dcgm-exporter", "state-dra-validation"]

_PLUGIN_SCRIPT = """# Export the driver-ready env contract (NVIDIA_DRIVER_ROOT,
# DRIVER_ROOT_CTR_PATH) written by the driver-validation init container.
set -a
source /run/nvidia/validations/driver-ready
set +a
# Conditionally mask the params file to prevent this container from
# recreating any missing GPU device nodes (e.g. under nvkind).
if [ "${MASK_NVIDIA_DRIVER_PARAMS}" = "true" ]; then
  cp /proc/driver/nvidia/params /root/gpu-params
  sed -i 's/^ModifyDeviceFiles: 1$/ModifyDeviceFiles: 0/' /root/gpu-params
  mount --bind /root/gpu-params /proc/driver/nvidia/params
fi
exec %s -v "${LOG_VERBOSITY}\""""


class ImageError(Exception):
    """A state's image cannot be resolved: the state fails to render (ReconcileFailed)."""


def image_path(repository, image, version, env_name, env):
    """internal/image.ImagePath: the CR's repository/image:version (@ for sha256), a bare image,
    else the operator pod's env `env_name`."""
    path = None
    if not repository and not version:
        path = image or None
    elif not (repository and image and version):
        raise ImageError("invalid image specification: repository, image and version must all be set "
                         "(repository=%s, image=%s, version=%s)" % (repository or "", image or "", version or ""))
    else:
        sep = "@" if version.startswith("sha256:") else ":"
        path = "%s/%s%s%s" % (repository, image, sep, version)
    path = path or env(env_name)
    if not path:
        raise ImageError("empty image path provided through both CR and ENV %s" % env_name)
    return path


def compute_domains_enabled(spec):
    return ((spec.get("draDriver") or {}).get("computeDomains") or {}).get("enabled") is True


def dcgm_enabled(spec):
    return (spec.get("dcgm") or {}).get("enabled") is True


def exporter_enabled(spec):
    """configurableState.isEnabled: a dcgmExporter section whose enabled is not false."""
    return spec.get("dcgmExporter") is not None and spec["dcgmExporter"].get("enabled") is not False


def health_port(kubelet_plugin, default):
    hc = (kubelet_plugin or {}).get("healthcheck") or {}
    if hc.get("enabled") is False:
        return -1
    return int(hc["port"]) if hc.get("port") is not None else default


def feature_gates(gates):
    """convertStringMapToCommaSeparatedString: key=value, keys sorted, Go bool spelling."""
    return ",".join("%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v)
                    for k, v in sorted((gates or {}).items()))


def _env_entries(entries):
    return [{"name": e["name"], "value": str(e.get("value", ""))} for e in entries or [] if e.get("name")]


def _ds_meta_labels(base, dsets):
    labels = dict(base)
    labels.update({k: str(v) for k, v in (dsets.get("labels") or {}).items()})
    return labels


def _tpl_labels(base, dsets):
    labels = dict(base)
    labels.update({k: str(v) for k, v in (dsets.get("labels") or {}).items()
                   if k not in ("app", "app.kubernetes.io/part-of")})
    return labels


def _annotations(meta, dsets):
    if dsets.get("annotations"):
        meta["annotations"] = {k: str(v) for k, v in dsets["annotations"].items()}
    return meta


def _quantity_max(a, b):
    from .util import parse_quantity
    return a if parse_quantity(a) >= parse_quantity(b) else b


def _max_resources(reqs):
    """maxResourceRequirements: the per-resource maximum of requests and of limits."""
    out = {"requests": {}, "limits": {}}
    for r in reqs:
        for part in ("requests", "limits"):
            for name, q in ((r or {}).get(part) or {}).items():
                cur = out[part].get(name)
                out[part][name] = str(q) if cur is None else _quantity_max(cur, str(q))
    for name, q in out["requests"].items():
        if name in out["limits"] and _quantity_max(q, out["limits"][name]) == q and q != out["limits"][name]:
            out["limits"][name] = q
    out = {k: v for k, v in out.items() if v}
    return out or None


def _plugin_container(name, binary, image, pull, http, kp, port, gates, extra_env, volume_mounts, probe_period):
    env = [{"name": "HTTP_ENDPOINT", "value": http}, {"name": "METRICS_PATH", "value": "/metrics"},
           {"name": "LOG_VERBOSITY", "value": "4"}, {"name": "MASK_NVIDIA_DRIVER_PARAMS", "value": ""},
           {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, {"name": "CDI_ROOT", "value": "/var/run/cdi"}]
    if binary == "gpu-kubelet-plugin":
        env.append({"name": "HOST_ROOT", "value": "/host"})
    env += [{"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
    if binary == "gpu-kubelet-plugin":
        env.append({"name": "IMAGE_NAME", "value": image})
    env += [{"name": "KUBELET_REGISTRAR_DIRECTORY_PATH", "value": volume_mounts[0]["mountPath"]},
            {"name": "KUBELET_PLUGINS_DIRECTORY_PATH", "value": volume_mounts[1]["mountPath"]},
            {"name": "HEALTHCHECK_PORT", "value": str(port)}]
    env += extra_env
    if gates:
        env.append({"name": "FEATURE_GATES", "value": feature_gates(gates)})
    env += _env_entries(kp.get("env"))
    c = {"name": name, "image": image, "securityContext": {"privileged": True},
         "command": ["bash", "-c"], "args": [_PLUGIN_SCRIPT % binary], "env": env}
    if pull:
        c["imagePullPolicy"] = pull
    if port > 0:
        c["startupProbe"] = {"grpc": {"port": port, "service": "liveness"}, "failureThreshold": 600,
                             "periodSeconds": 1, "timeoutSeconds": 10}
        c["livenessProbe"] = {"grpc": {"port": port, "service": "liveness"}, "failureThreshold": 3,
                              "periodSeconds": probe_period, "timeoutSeconds": 10}
    if kp.get("resources"):
        c["resources"] = clone(kp["resources"])
    c["volumeMounts"] = clone(volume_mounts)
    return c


def render_dra_driver(spec, namespace, env):
    """state-dra-driver: [objects] for this GPUCluster spec; env(name) reads the operator pod's env."""
    dra = spec.get("draDriver") or {}
    dsets = spec.get("daemonsets") or {}
    paths = spec.get("hostPaths") or {}
    cd = compute_domains_enabled(spec)
    for what, args in (("", (dra.get("repository"), dra.get("image"), dra.get("version"), "DRA_DRIVER_IMAGE")),
                       ("validator ", (None, None, None, "VALIDATOR_IMAGE"))):
        try:
            path = image_path(*args, env=env)
        except ImageError as err:
            raise ImageError("failed to construct DRA driver spec: failed to construct DRA driver %simage path: %s"
                             % (what, err))
        if what:
            init_image = path
        else:
            image = path
    pull = dra.get("imagePullPolicy")
    gates = dra.get("featureGates") or {}
    kubelet_root = paths.get("kubeletRootDir") or "/var/lib/kubelet"
    driver_dir = paths.get("driverInstallDir") or "/run/nvidia/driver"
    gpus_kp = (dra.get("gpus") or {}).get("kubeletPlugin") or {}
    cd_spec = dra.get("computeDomains") or {}
    cd_kp = cd_spec.get("kubeletPlugin") or {}
    objs = []

    def device_class(name, expression):
        return {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}}

    def typed(driver, kind):
        return "device.driver == '%s' && device.attributes['%s'].type == '%s'" % (driver, driver, kind)

    objs.append(device_class("gpu.nvidia.com", typed(DRIVER, "gpu")))
    objs.append(device_class("mig.nvidia.com", typed(DRIVER, "mig")))
    if cd:
        objs.append(device_class("compute-domain-daemon.nvidia.com", typed("compute-domain.nvidia.com", "daemon")))
        objs.append(device_class("compute-domain-default-channel.nvidia.com",
                                 typed("compute-domain.nvidia.com", "channel")
                                 + " && device.attributes['compute-domain.nvidia.com'].id == 0"))
    objs.append(device_class("vfio.gpu.nvidia.com", typed(DRIVER, "vfio")))

    passthrough = bool(gates.get("PassthroughSupport"))
    mounts = [{"name": "plugins-registry", "mountPath": kubelet_root + "/plugins_registry"},
              {"name": "plugins", "mountPath": kubelet_root + "/plugins", "mountPropagation": "Bidirectional"},
              {"name": "cdi", "mountPath": "/var/run/cdi"},
              {"name": "validations", "mountPath": "/run/nvidia/validations", "readOnly": True},
              {"name": "host-root", "mountPath": "/host", "mountPropagation": "HostToContainer", "readOnly": True},
              {"name": "driver-install-dir", "mountPath": "/driver-root", "mountPropagation": "HostToContainer"}]
    gpu_mounts = clone(mounts)
    if passthrough:
        gpu_mounts += [{"name": "lib-modules", "mountPath": "/lib/modules/", "mountPropagation": "HostToContainer",
                        "readOnly": True},
                       {"name": "sysfs", "mountPath": "/sys/", "mountPropagation": "Bidirectional"},
                       {"name": "procfs", "mountPath": "/proc/", "mountPropagation": "Bidirectional"}]
    containers = [_plugin_container("gpus", "gpu-kubelet-plugin", image, pull, ":8080", gpus_kp,
                                    health_port(gpus_kp, GPUS_HEALTH_PORT), gates, [], gpu_mounts, 30)]
    if cd:
        containers.append(_plugin_container(
            "compute-domains", "compute-domain-kubelet-plugin", image, pull, ":8081", cd_kp,
            health_port(cd_kp, CD_HEALTH_PORT), gates, [{"name": "GPU_CLIQUE_LABEL_ENABLED", "value": "true"}],
            mounts, 10))
    init = {"name": "driver-validation", "image": init_image, "command": ["nvidia-validator"],
            "securityContext": {"privileged": True, "runAsUser": 0},
            "env": [{"name": "COMPONENT", "value": "driver"}, {"name": "WITH_WAIT", "value": "true"},
                    {"name": "DRIVER_VALIDATION_SKIP_GPU_INIT", "value": "true"},
                    {"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION", "value": "true"},
                    {"name": "OPERATOR_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "HOST_ROOT", "value": "/"}, {"name": "DRIVER_INSTALL_DIR", "value": driver_dir},
                    {"name": "DRIVER_INSTALL_DIR_CTR_PATH", "value": "/driver-root"}],
            "volumeMounts": [{"name": "host-root", "mountPath": "/host", "mountPropagation": "HostToContainer",
                              "readOnly": True},
                             {"name": "driver-install-dir", "mountPath": "/driver-root",
                              "mountPropagation": "HostToContainer"},
                             {"name": "validations", "mountPath": "/run/nvidia/validations"}]}
    if pull:
        init["imagePullPolicy"] = pull
    init_res = _max_resources([gpus_kp.get("resources")] + ([cd_kp.get("resources")] if cd else []))
    if init_res:
        init["resources"] = init_res
    volumes = [{"name": "plugins-registry", "hostPath": {"path": kubelet_root + "/plugins_registry"}},
               {"name": "plugins", "hostPath": {"path": kubelet_root + "/plugins"}},
               {"name": "cdi", "hostPath": {"path": "/var/run/cdi"}},
               {"name": "host-root", "hostPath": {"path": "/"}},
               {"name": "driver-install-dir", "hostPath": {"path": driver_dir, "type": "DirectoryOrCreate"}},
               {"name": "validations", "hostPath": {"path": "/run/nvidia/validations", "type": "DirectoryOrCreate"}}]
    if passthrough:
        volumes += [{"name": "lib-modules", "hostPath": {"path": "/lib/modules/", "type": "Directory"}},
                    {"name": "sysfs", "hostPath": {"path": "/sys/", "type": "Directory"}},
                    {"name": "procfs", "hostPath": {"path": "/proc/", "type": "Directory"}}]
    base = {"app.kubernetes.io/name": "nvidia-dra-driver",
            "app.kubernetes.io/component": KUBELET_PLUGIN, "app": KUBELET_PLUGIN}
    pod_spec = {"priorityClassName": dsets.get("priorityClassName") or "system-node-critical",
                "serviceAccountName": "nvidia-dra-driver-kubeletplugin",
                "nodeSelector": {DRA_DRIVER_LABEL: "true"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-10de.present",
                                               "operator": "In", "values": ["true"]}]},
                        {"matchExpressions": [{"key": "feature.node.kubernetes.io/cpu-model.vendor_id",
                                               "operator": "In", "values": ["NVIDIA"]}]},
                        {"matchExpressions": [{"key": "nvidia.com/gpu.present",
                                               "operator": "In", "values": ["true"]}]}]}}},
                "initContainers": [init], "containers": containers, "volumes": volumes}
    if dra.get("imagePullSecrets"):
        pod_spec["imagePullSecrets"] = [{"name": s} for s in dra["imagePullSecrets"]]
    if dsets.get("tolerations"):
        pod_spec["tolerations"] = clone(dsets["tolerations"])
    objs.append({"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": _annotations({"name": KUBELET_PLUGIN, "namespace": namespace,
                                           "labels": _ds_meta_labels(base, dsets)}, dsets),
                 "spec": {"selector": {"matchLabels": {"app": KUBELET_PLUGIN}},
                          "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
                          "template": {"metadata": _annotations({"labels": _tpl_labels(base, dsets)}, dsets),
                                       "spec": pod_spec}}})
    if cd:
        objs.append(_controller(cd_spec.get("controller") or {}, namespace, image, pull, gates, dra, dsets))
    objs += _resourceslice_policy(namespace)
    return objs


def _controller(ctl, namespace, image, pull, gates, dra, dsets):
    base = {"app.kubernetes.io/name": "nvidia-dra-driver",
            "app.kubernetes.io/component": CONTROLLER, "app": CONTROLLER}
    env = [{"name": "HTTP_ENDPOINT", "value": ":8080"}, {"name": "METRICS_PATH", "value": "/metrics"},
           {"name": "PPROF_PATH", "value": ""}, {"name": "LOG_VERBOSITY", "value": "4"},
           {"name": "LOG_VERBOSITY_CD_DAEMON", "value": "4"},
           {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
           {"name": "IMAGE_NAME", "value": image}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
           {"name": "LEADER_ELECTION_ENABLED", "value": "false"},
           {"name": "LEADER_ELECTION_LEASE_LOCK_NAME", "value": CONTROLLER},
           {"name": "LEADER_ELECTION_LEASE_LOCK_NAMESPACE", "value": namespace},
           {"name": "LEADER_ELECTION_LEASE_DURATION", "value": "15s"},
           {"name": "LEADER_ELECTION_RENEW_DEADLINE", "value": "10s"},
           {"name": "LEADER_ELECTION_RETRY_PERIOD", "value": "2s"}]
    if gates:
        env.append({"name": "FEATURE_GATES", "value": feature_gates(gates)})
    env += _env_entries(ctl.get("env"))
    c = {"name": "compute-domain", "image": image,
         "command": ["compute-domain-controller", "-v", "$(LOG_VERBOSITY)"], "env": env}
    if pull:
        c["imagePullPolicy"] = pull
    if ctl.get("resources"):
        c["resources"] = clone(ctl["resources"])
    tolerations = [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
                   {"effect": "NoSchedule", "key": "node-role.kubernetes.io/master", "operator": "Exists"},
                   {"key": "CriticalAddonsOnly", "operator": "Exists"}] + clone(dsets.get("tolerations") or [])
    pod_spec = {"priorityClassName": dsets.get("priorityClassName") or "system-node-critical",
                "serviceAccountName": CONTROLLER,
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"preference": {"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane",
                                                          "operator": "Exists"}]}, "weight": 100}]},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"podAffinityTerm": {"labelSelector": {"matchLabels": {"app": CONTROLLER}},
                                             "topologyKey": "kubernetes.io/hostname"}, "weight": 100}]}},
                "tolerations": tolerations, "containers": [c]}
    if dra.get("imagePullSecrets"):
        pod_spec["imagePullSecrets"] = [{"name": s} for s in dra["imagePullSecrets"]]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": _annotations({"name": CONTROLLER, "namespace": namespace,
                                      "labels": _ds_meta_labels(base, dsets)}, dsets),
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": CONTROLLER}},
                     "template": {"metadata": _annotations({"labels": _tpl_labels(base, dsets)}, dsets),
                                  "spec": pod_spec}}}


def _resourceslice_policy(namespace):
    name = "resourceslices-policy-nvidia-dra-driver"
    pick = '(request.operation == "DELETE" ? oldObject : object)'
    vap = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": name},
           "spec": {"failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": ["resource.k8s.io"], "apiVersions": ["v1", "v1beta1", "v1beta2"],
                        "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["resourceslices"]}]},
                    "matchConditions": [{"name": "isRestrictedUser", "expression":
                                         'request.userInfo.username == "system:serviceaccount:%s:'
                                         'nvidia-dra-driver-kubeletplugin"' % namespace}],
                    "variables": [
                        {"name": "userNodeName", "expression":
                         "request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')"},
                        {"name": "objectNodeName", "expression": pick + '.spec.?nodeName.orValue("")'},
                        {"name": "nodeSelectorValue", "expression": pick + ".spec.?nodeSelector.orValue(null)"},
                        {"name": "allNodesValue", "expression": pick + ".spec.?allNodes.orValue(false)"}],
                    "validations": [
                        {"expression": 'variables.userNodeName != ""',
                         "message": "no node association found for user, this user must run in a pod on a "
                                    "node and ServiceAccountTokenPodNodeInfo must be enabled"},
                        {"expression": "variables.userNodeName == variables.objectNodeName || "
                                       "variables.allNodesValue == true || variables.nodeSelectorValue != null",
                         "messageExpression": "\"this user running on node '\"+variables.userNodeName+\"' "
                                              "may not modify cluster or node resourceslices\""}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return [vap, binding]


def _admin_template(name, namespace, request, mode_all):
    exactly = {"deviceClassName": "gpu.nvidia.com", "adminAccess": True}
    if mode_all:
        exactly["allocationMode"] = "All"
    else:
        exactly.update({"allocationMode": "ExactCount", "count": 1})
    return {"apiVersion": DRA_API, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": request, "exactly": exactly}]}}}}


def _tolerations(pod_spec, dsets):
    if dsets.get("tolerations"):
        pod_spec["tolerations"] = clone(dsets["tolerations"])


def render_dra_validation(spec, namespace, env):
    dsets = spec.get("daemonsets") or {}
    image = _component_image("state-dra-validation", {}, "VALIDATOR_IMAGE", env)
    base = {"app.kubernetes.io/name": VALIDATOR, "app.kubernetes.io/component": VALIDATOR}
    pod_spec = {"priorityClassName": "system-node-critical", "serviceAccountName": VALIDATOR,
                "nodeSelector": {DEPLOY + "dra-validator": "true"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]}}},
                "resourceClaims": [{"name": "validation-gpu", "resourceClaimTemplateName": VALIDATOR + "-gpu"}],
                "initContainers": [{"name": "gpu-validation", "image": image, "imagePullPolicy": "IfNotPresent",
                                    "command": ["sh", "-c", "nvidia-smi -L"],
                                    "resources": {"claims": [{"name": "validation-gpu"}]}}],
                "containers": [{"name": VALIDATOR, "image": image, "imagePullPolicy": "IfNotPresent",
                                "command": ["sh", "-c", "echo all validations are successful; "
                                            "while true; do sleep 86400; done"]}]}
    _tolerations(pod_spec, dsets)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": _annotations({"name": VALIDATOR, "namespace": namespace,
                                    "labels": _ds_meta_labels(dict(base, app=VALIDATOR), dsets)}, dsets),
          "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": VALIDATOR}},
                   "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
                   "template": {"metadata": _annotations(
                       {"labels": _tpl_labels(dict(base, app="nvidia-operator-validator"), dsets)}, dsets),
                       "spec": pod_spec}}}
    return [_admin_template(VALIDATOR + "-gpu", namespace, "validation-gpu", False), ds]


def _component_image(state, comp, env_name, env):
    try:
        return image_path(comp.get("repository"), comp.get("image"), comp.get("version"), env_name, env)
    except ImageError as err:
        raise ImageError("failed to construct %s image path: %s" % (state, err))


def render_dcgm(spec, namespace, env):
    comp = spec.get("dcgm") or {}
    dsets = spec.get("daemonsets") or {}
    image = _component_image("state-dcgm", comp, "DCGM_IMAGE", env)
    probe = {"tcpSocket": {"port": DCGM_PORT}, "initialDelaySeconds": 15}
    c = {"name": "nvidia-dcgm-ctr", "image": image, "securityContext": {"privileged": True},
         "ports": [{"name": "dcgm", "containerPort": DCGM_PORT}], "livenessProbe": clone(probe),
         "readinessProbe": clone(probe), "resources": {"claims": [{"name": "admin-gpus"}]}}
    if comp.get("imagePullPolicy"):
        c["imagePullPolicy"] = comp["imagePullPolicy"]
    pod_spec = {"priorityClassName": dsets.get("priorityClassName") or "system-node-critical",
                "serviceAccountName": DCGM, "nodeSelector": {DEPLOY + "dcgm-dra": "true"},
                "resourceClaims": [{"name": "admin-gpus", "resourceClaimTemplateName": "nvidia-dcgm-admin"}],
                "containers": [c]}
    _tolerations(pod_spec, dsets)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": {"name": DCGM, "namespace": namespace, "labels": {"app": DCGM}},
          "spec": {"selector": {"matchLabels": {"app": DCGM}}, "updateStrategy": {"type": "RollingUpdate"},
                   "template": {"metadata": {"labels": {"app": DCGM}}, "spec": pod_spec}}}
    svc = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": DCGM, "namespace": namespace, "labels": {"app": DCGM}},
           "spec": {"type": "ClusterIP", "internalTrafficPolicy": "Local", "selector": {"app": DCGM},
                    "ports": [{"name": "dcgm", "port": DCGM_PORT, "protocol": "TCP", "targetPort": DCGM_PORT}]}}
    return [_admin_template("nvidia-dcgm-admin", namespace, "admin-gpus", True), ds, svc]


def render_dcgm_exporter(spec, namespace, env):
    comp = spec.get("dcgmExporter") or {}
    dsets = spec.get("daemonsets") or {}
    image = _component_image("state-dcgm-exporter", comp, "DCGM_EXPORTER_IMAGE", env)
    env_list = [{"name": "DCGM_EXPORTER_LISTEN", "value": ":%d" % EXPORTER_PORT},
                {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                {"name": "DCGM_EXPORTER_COLLECTORS", "value": "/etc/dcgm-exporter/dcp-metrics-included.csv"},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    if dcgm_enabled(spec):
        env_list.append({"name": "DCGM_REMOTE_HOSTENGINE_INFO", "value": "%s:%d" % (DCGM, DCGM_PORT)})
    env_list.append({"name": "KUBERNETES_ENABLE_DRA", "value": "true"})
    env_list += _env_entries(comp.get("env"))
    health = {"httpGet": {"path": "/health", "port": EXPORTER_PORT}, "initialDelaySeconds": 45}
    c = {"name": EXPORTER, "image": image, "env": env_list, "securityContext": {"privileged": True},
         "ports": [{"name": "metrics", "containerPort": EXPORTER_PORT}],
         "livenessProbe": dict(clone(health), periodSeconds=5), "readinessProbe": clone(health),
         "resources": {"claims": [{"name": "admin-gpus"}]},
         "volumeMounts": [{"name": "pod-gpu-resources", "mountPath": "/var/lib/kubelet/pod-resources",
                           "readOnly": True}]}
    if comp.get("imagePullPolicy"):
        c["imagePullPolicy"] = comp["imagePullPolicy"]
    pod_spec = {"priorityClassName": dsets.get("priorityClassName") or "system-node-critical",
                "serviceAccountName": EXPORTER, "automountServiceAccountToken": True,
                "nodeSelector": {DEPLOY + "dcgm-exporter-dra": "true"},
                "resourceClaims": [{"name": "admin-gpus", "resourceClaimTemplateName": "nvidia-dcgm-exporter-admin"}],
                "containers": [c],
                "volumes": [{"name": "pod-gpu-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}}]}
    _tolerations(pod_spec, dsets)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": {"name": EXPORTER, "namespace": namespace, "labels": {"app": EXPORTER}},
          "spec": {"selector": {"matchLabels": {"app": EXPORTER}}, "updateStrategy": {"type": "RollingUpdate"},
                   "template": {"metadata": {"labels": {"app": EXPORTER}}, "spec": pod_spec}}}
    svc = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": EXPORTER, "namespace": namespace, "labels": {"app": EXPORTER},
                        "annotations": {"prometheus.io/scrape": "true"}},
           "spec": {"type": "ClusterIP", "selector": {"app": EXPORTER},
                    "ports": [{"name": "gpu-metrics", "port": EXPORTER_PORT, "protocol": "TCP",
                               "targetPort": EXPORTER_PORT}]}}
    return [_admin_template("nvidia-dcgm-exporter-admin", namespace, "admin-gpus", True), svc, ds]


def render_states(spec, namespace, env):
    """[(state name, [objects] ([] when the state is off), error or None)] in the operator's order."""
    plan = [("state-dra-driver", True, render_dra_driver), ("state-dcgm", dcgm_enabled(spec), render_dcgm),
            ("state-dcgm-exporter", exporter_enabled(spec), render_dcgm_exporter),
            ("state-dra-validation", True, render_dra_validation)]
    out = []
    for name, enabled, render in plan:
        if not enabled:
            out.append((name, [], None))
            continue
        try:
            out.append((name, render(spec, namespace, env), None))
        except ImageError as err:
            out.append((name, None, "failed to create k8s objects from manifests: %s" % err))
    return out
