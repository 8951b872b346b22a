"""Which GPUs a container sees: the NVIDIA container runtime and the device plugin's hand-over.

An independent reading of upstream (the collection's upstream.py is not imported):

- NVIDIA Container Toolkit (api/config/v1/config.go, internal/config/image/cuda_image.go
  VisibleDevices): the devices a container asks for are, in this order, CDI annotations, then
  (with `accept-nvidia-visible-devices-as-volume-mounts`, default false) the mounts under
  /var/run/nvidia-container-devices, then NVIDIA_VISIBLE_DEVICES - honoured for a privileged
  container or with `accept-nvidia-visible-devices-envvar-when-unprivileged` (default TRUE).
  CUDA base images set NVIDIA_VISIBLE_DEVICES=all themselves (the CUDA sample images too).
- The operator's toolkit container takes those keys from ACCEPT_NVIDIA_VISIBLE_DEVICES_* in
  ClusterPolicy spec.toolkit.env. With spec.cdi.enabled (CRD default true) the operator sets
  NVIDIA_RUNTIME_SET_AS_DEFAULT=false: `nvidia` is only a RuntimeClass (nvidia, nvidia-cdi,
  nvidia-legacy) and other pods run on runc, where containerd injects the CDI devices the
  device plugin named (strategy cdi-annotations,cdi-cri); without CDI `nvidia` is the default.
- A host-installed toolkit reads /etc/nvidia-container-runtime/config.toml (cluster file
  `host_toolkit_config`) and is the default runtime when the node's `default_runtime` is nvidia.
- k8s-device-plugin (internal/plugin/server.go getAllocateResponse): strategy envvar sets
  NVIDIA_VISIBLE_DEVICES to the allocated devices; volume-mounts sets it to
  /var/run/nvidia-container-devices and mounts one /dev/null per device there. The pod's own env
  entry comes after the plugin's in the container's environment and wins.
- NVIDIA's DRA driver (k8s-dra-driver-gpu, kubelet plugin): NodePrepareResources writes a CDI spec
  for the devices allocated to a claim; the kubelet hands their CDI ids to containerd for every
  container that names the claim in `resources.claims` (all its requests, or the one request it
  names), whatever the runtime class. The container sees those devices (GPUs or MIG devices).
"""

ACCEPT_ENVVAR = "accept-nvidia-visible-devices-envvar-when-unprivileged"
ACCEPT_MOUNTS = "accept-nvidia-visible-devices-as-volume-mounts"
TOOLKIT_DEFAULTS = {ACCEPT_ENVVAR: True, ACCEPT_MOUNTS: False}
TOOLKIT_ENV = {"ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED": ACCEPT_ENVVAR,
               "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS": ACCEPT_MOUNTS}
NVIDIA_RUNTIME_CLASSES = ("nvidia", "nvidia-cdi", "nvidia-legacy")
VISIBLE = "NVIDIA_VISIBLE_DEVICES"
MOUNT_ROOT = "/var/run/nvidia-container-devices"
GPU_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


def _truthy(value):
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def _env(entries):
    out = {}
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name"):
            out[entry["name"]] = "" if entry.get("value") is None else str(entry["value"])
    return out


def node_runtime(facts, policy):
    """How the node's runtime treats GPU containers, or None when no NVIDIA toolkit is there."""
    spec = (policy or {}).get("spec") or {}
    cdi = ((spec.get("cdi") or {}).get("enabled", True)) is not False if policy else False
    plugin_env = _env((spec.get("devicePlugin") or {}).get("env"))
    if cdi:
        strategy = ["cdi-annotations", "cdi-cri"]  # the operator overrides the plugin's setting
    else:
        strategy = [s.strip() for s in (plugin_env.get("DEVICE_LIST_STRATEGY") or "envvar").split(",")
                    if s.strip()]
    if facts.get("host_toolkit"):
        config = dict(TOOLKIT_DEFAULTS)
        config.update(facts.get("host_toolkit_config") or {})
        return {"source": "host config.toml", "config": config, "cdi": cdi, "strategy": strategy,
                "default_nvidia": facts.get("default_runtime") == "nvidia"}
    if not policy or ((spec.get("toolkit") or {}).get("enabled", True)) is False:
        return None
    config = dict(TOOLKIT_DEFAULTS)
    toolkit_env = _env((spec.get("toolkit") or {}).get("env"))
    for name, key in TOOLKIT_ENV.items():
        if name in toolkit_env:
            config[key] = _truthy(toolkit_env[name])
    default_nvidia = not cdi
    if "NVIDIA_RUNTIME_SET_AS_DEFAULT" in toolkit_env:
        default_nvidia = _truthy(toolkit_env["NVIDIA_RUNTIME_SET_AS_DEFAULT"])
    return {"source": "ClusterPolicy spec.toolkit.env", "config": config, "cdi": cdi, "strategy": strategy,
            "default_nvidia": default_nvidia}


def allocated(container):
    """GPUs the device plugin hands this container (its limits on nvidia.com/gpu, nvidia.com/mig-*)."""
    total = 0
    res = container.get("resources") or {}
    for table in (res.get("limits") or {}, ):
        for name, qty in table.items():
            if name.startswith(GPU_PREFIXES):
                try:
                    total += int(str(qty))
                except ValueError:
                    pass
    return total


def _count(value, node_gpus):
    words = [w.strip() for w in (value or "").split(",") if w.strip()]
    if not words or "void" in words or words == ["none"]:
        return 0
    if "all" in words:
        return node_gpus
    if any(w.startswith("/") for w in words):
        return 0  # the volume-mounts marker: not a device
    return min(len(words), node_gpus)


def visible(facts, policy, pod, container, image_env=None):
    """(number of GPUs the container sees, the number the device plugin allocated, why)."""
    node_gpus = ((facts.get("gpus") or {}).get("count")) or 0
    want = allocated(container)
    rt = node_runtime(facts, policy)
    if rt is None or not node_gpus:
        return min(want, node_gpus), want, "no NVIDIA container toolkit on the node"
    klass = (pod.get("spec") or {}).get("runtimeClassName")
    nvidia = klass in NVIDIA_RUNTIME_CLASSES or (not klass and rt["default_nvidia"])
    cdi_cri = "cdi-cri" in rt["strategy"]
    if not nvidia:
        if cdi_cri or "cdi-annotations" in rt["strategy"]:
            return min(want, node_gpus), want, "runc: containerd injects the CDI devices the plugin allocated"
        return 0, want, "runc: no NVIDIA runtime hook, NVIDIA_VISIBLE_DEVICES is not read"
    config = rt["config"]
    injected = min(want, node_gpus) if (cdi_cri or "cdi-annotations" in rt["strategy"]) else 0
    if want and "volume-mounts" in rt["strategy"] and config[ACCEPT_MOUNTS]:
        return max(injected, min(want, node_gpus)), want, "device list from the plugin's volume mounts"
    env = dict(image_env or {})
    if want and "envvar" in rt["strategy"]:
        env[VISIBLE] = "GPU-%d" % want if want == 1 else ",".join("GPU-%d" % i for i in range(want))
    elif want and "volume-mounts" in rt["strategy"]:
        env[VISIBLE] = MOUNT_ROOT
    env.update(_env(container.get("env")))  # the pod's own entry comes last and wins
    privileged = bool((container.get("securityContext") or {}).get("privileged"))
    if privileged or config[ACCEPT_ENVVAR]:
        seen = _count(env.get(VISIBLE), node_gpus)
        why = ("%s=%s honoured (%s)" % (VISIBLE, env.get(VISIBLE), "privileged container" if privileged
                                         else "%s = true in the %s" % (ACCEPT_ENVVAR, rt["source"])))
        return max(injected, seen), want, why
    return injected, want, "%s ignored: %s = false in the %s" % (VISIBLE, ACCEPT_ENVVAR, rt["source"])


def cuda_image_env(image):
    """The environment NVIDIA's CUDA images carry (nvidia/cuda base: NVIDIA_VISIBLE_DEVICES=all)."""
    low = (image or "").lower()
    if "cuda" in low:
        return {VISIBLE: "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
    return {}


def policy_of(ctx):
    """The ClusterPolicy the operator reconciles (the first one; extra ones are ignored upstream)."""
    try:
        items = ctx.list("clusterpolicies.nvidia.com")
    except Exception:  # CRD not installed
        return None
    return items[0] if items else None


DRA_DRIVER = "gpu.nvidia.com"
CLAIMS = "resourceclaims.resource.k8s.io"


def claimed(ctx, pod, container):
    """Devices of NVIDIA's DRA driver allocated to the claims this container uses (CDI-injected)."""
    refs = (container.get("resources") or {}).get("claims") or []
    if not refs:
        return 0
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    names = {}
    for entry in spec.get("resourceClaims") or ():
        name = entry.get("resourceClaimName")
        if not name:
            name = next((s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or ()
                         if s.get("name") == entry.get("name")), None)
        names[entry.get("name")] = name
    seen = set()
    for ref in refs:
        name = names.get(ref.get("name"))
        claim = ctx.get_cached(CLAIMS, name, pod["metadata"]["namespace"]) if name else None
        results = ((((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
        for r in results or ():
            want = ref.get("request")
            if want and r.get("request") != want and r.get("request", "").split("/", 1)[0] != want:
                continue
            if r.get("driver") == DRA_DRIVER:
                seen.add((r.get("pool"), r.get("device")))
    return len(seen)


def pod_sees(ctx, pod, container):
    """visible() for a pod the kubelet twin runs; devices of a claim come through CDI."""
    facts = ctx.facts.get((pod.get("spec") or {}).get("nodeName")) or {}
    dra_devices = claimed(ctx, pod, container)
    if dra_devices:
        return dra_devices, dra_devices, "CDI devices the DRA driver prepared for the container's claims"
    return visible(facts, policy_of(ctx), pod, container, cuda_image_env(container.get("image")))
