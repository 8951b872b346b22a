# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG knowledge without any cluster access (pure, unit-testable).

- GPU_MODELS: the one table of MIG-capable GPU models: PCI device ids, the
  `nvidia.com/gpu.product` names GFD gives them, and their GPU-instance profiles.
- MigPartedConfig: a parsed mig-parted config (`version: v1`, `mig-configs:`)
  with the device-filter semantics of mig-parted.
- expected_offer(): what a node offers after mig-manager reports `success`,
  per MIG strategy, in the shape of the real GFD / device-plugin labels.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML comes with kubernetes.core
    HAS_YAML = False

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError


class MigError(DomainError):
    """Bad request or config: the message names what is wrong and the fix."""


# ---------------------------------------------------------------------------
# GPU models. Sources (see shared/fixtures/nvidia-smi/SOURCES.md):
#  - device ids: the `device-filter` lists and comments of
#    default-mig-parted-config.yaml (the A100/H100 80GB split per model follows
#    mig-profiles-per-gpu__derived.csv);
#  - max instances: mig-profiles-per-gpu__derived.csv;
#  - per-profile (SM, CE, DEC, ENC, JPEG, OFA): real `nvidia-smi mig -lgip`
#    fixtures (A100-PCIE-40GB, H100 SXM5 80GB, H100 NVL); None = not seen in a
#    real output, so never asserted;
#  - product names: GFD labels the nvidia-smi name with spaces -> "-".
#    Confirmed by real outputs: NVIDIA-H100-80GB-HBM3 (0x233010DE),
#    NVIDIA-A100-SXM4-40GB (0x20B010DE), NVIDIA-A100-PCIE-40GB. The others
#    follow the same rule from the marketing names (inferred).
# ---------------------------------------------------------------------------

def _p(max_instances, sm=None, ce=None, dec=None, enc=None, jpeg=None, ofa=None):
    return {"max": max_instances, "multiprocessors": sm, "engines.copy": ce,
            "engines.decoder": dec, "engines.encoder": enc, "engines.jpeg": jpeg,
            "engines.ofa": ofa}


GPU_MODELS = {
    "A30-24GB": {
        "device_ids": ("0x20B710DE",),
        "products": {"NVIDIA-A30": "0x20B710DE"},
        "compute_slices": 4,
        "profiles": {
            "1g.6gb": _p(4), "1g.6gb+me": _p(1), "2g.12gb": _p(2),
            "2g.12gb+me": _p(1), "4g.24gb": _p(1),
        },
    },
    "A100-40GB": {
        "device_ids": ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
        "products": {"NVIDIA-A100-SXM4-40GB": "0x20B010DE", "NVIDIA-A100-PCIE-40GB": "0x20F110DE"},
        "compute_slices": 7,
        "profiles": {
            "1g.5gb": _p(7, 14, 1, 0, 0, 0, 0),
            "1g.5gb+me": _p(1, 14, 1, 1, 0, 1, 1),
            "1g.10gb": _p(4, 14, 1, 1, 0, 0, 0),
            "2g.10gb": _p(3, 28, 2, 1, 0, 0, 0),
            "3g.20gb": _p(2, 42, 3, 2, 0, 0, 0),
            "4g.20gb": _p(1, 56, 4, 2, 0, 0, 0),
            "7g.40gb": _p(1, 98, 7, 5, 0, 1, 1),
        },
    },
    "A100-80GB": {
        "device_ids": ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"),
        "products": {"NVIDIA-A100-SXM4-80GB": "0x20B210DE", "NVIDIA-A100-80GB-PCIe": "0x20B510DE"},
        "compute_slices": 7,
        "profiles": {
            "1g.10gb": _p(7, 14), "1g.10gb+me": _p(1, 14), "1g.20gb": _p(4),
            "2g.20gb": _p(3, 28), "3g.40gb": _p(2), "4g.40gb": _p(1), "7g.80gb": _p(1),
        },
    },
    "H100-80GB": {
        "device_ids": ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"),
        "products": {"NVIDIA-H100-80GB-HBM3": "0x233010DE", "NVIDIA-H100-PCIe": "0x233110DE",
                     "NVIDIA-H800-PCIe": "0x232210DE", "NVIDIA-H800": "0x232410DE"},
        "compute_slices": 7,
        "profiles": {
            "1g.10gb": _p(7, 16, 1, 1, 0, 1, 0),
            "1g.10gb+me": _p(1, 16, 1, 1, 0, 1, 1),
            "1g.20gb": _p(4, 26, 1, 1, 0, 1, 0),
            "2g.20gb": _p(3, 32, 2, 2, 0, 2, 0),
            "3g.40gb": _p(2, 60, 3, 3, 0, 3, 0),
            "4g.40gb": _p(1, 64, 4, 4, 0, 4, 0),
            "7g.80gb": _p(1, 132, 8, 7, 0, 7, 1),
        },
    },
    "H100-94GB": {
        "device_ids": ("0x232110DE", "0x233A10DE"),
        "products": {"NVIDIA-H100-NVL": "0x232110DE", "NVIDIA-H800-NVL": "0x233A10DE"},
        "compute_slices": 7,
        "profiles": {
            "1g.12gb": _p(7, 16, 1, 1, 0, 1, 0),
            "1g.12gb+me": _p(1, 16, 1, 1, 0, 1, 1),
            "1g.24gb": _p(4, 26, 1, 1, 0, 1, 0),
            "2g.24gb": _p(3, 32, 2, 2, 0, 2, 0),
            "3g.47gb": _p(2, 60, 3, 3, 0, 3, 0),
            "4g.47gb": _p(1, 64, 4, 4, 0, 4, 0),
            "7g.94gb": _p(1, 132, 8, 7, 0, 7, 1),
        },
    },
    "H200-141GB": {
        "device_ids": ("0x233510DE", "0x233B10DE"),
        "products": {"NVIDIA-H200": "0x233510DE", "NVIDIA-H200-NVL": "0x233B10DE"},
        "compute_slices": 7,
        "profiles": {
            "1g.18gb": _p(7, 16), "1g.18gb+me": _p(1, 16), "1g.35gb": _p(4, 26),
            "2g.35gb": _p(3, 32), "3g.71gb": _p(2, 60), "4g.71gb": _p(1, 64),
            "7g.141gb": _p(1, 132),
        },
    },
    "B200": {
        "device_ids": ("0x290110DE",),
        "products": {"NVIDIA-B200": "0x290110DE"},
        "compute_slices": 7,
        "profiles": {
            "1g.23gb": _p(7, 18), "1g.23gb+me": _p(1, 18), "1g.45gb": _p(4, 30),
            "2g.45gb": _p(3, 36), "3g.90gb": _p(2), "4g.90gb": _p(1), "7g.180gb": _p(1),
        },
    },
}

_PROFILE_RE = re.compile(r"^(\d+)g\.(\d+)gb([+-].*)?$")


def normalize_device_id(value):
    """'0x233010de' / '233010DE' / 0x233010DE -> '0x233010DE'; a bare 4-digit
    device id ('2330') gets NVIDIA's vendor suffix 10DE."""
    text = ("%x" % value) if isinstance(value, int) else str(value).strip()
    if text.lower().startswith("0x"):
        text = text[2:]
    if len(text) == 4:
        text += "10de"
    return "0x" + text.upper()


def base_product(product):
    """Strip the suffixes GFD appends (`-MIG-<profile>` in single strategy, `-SHARED`)."""
    if not product:
        return product
    product = product.split(upstream.PRODUCT_SUFFIX_MIG, 1)[0]
    if product.endswith(upstream.PRODUCT_SUFFIX_SHARED):
        product = product[: -len(upstream.PRODUCT_SUFFIX_SHARED)]
    return product


def known_products():
    return sorted(p for model in GPU_MODELS.values() for p in model["products"])


def model_for_product(product):
    """(model name, model dict) for a `nvidia.com/gpu.product` value, or (None, None)."""
    product = base_product(product)
    for name, model in GPU_MODELS.items():
        if product in model["products"]:
            return name, model
    return None, None


def model_for_device_id(device_id):
    device_id = normalize_device_id(device_id)
    for name, model in GPU_MODELS.items():
        if device_id in model["device_ids"]:
            return name, model
    return None, None


def compute_slices(profile):
    """'3g.40gb' -> 3 (GPU-instance compute slices); MigError when not a profile name."""
    match = _PROFILE_RE.match(profile)
    if not match:
        raise MigError("'%s' is not a MIG profile name (expected <g>g.<mem>gb, e.g. 1g.10gb)" % profile)
    return int(match.group(1))


def resource_suffix(profile):
    """Device-plugin / GFD spelling: '+' is not valid in a resource name ('1g.10gb+me' -> '1g.10gb.me')."""
    return profile.replace("+", ".")


# ---------------------------------------------------------------------------
# mig-parted config
# ---------------------------------------------------------------------------

def _config_text_from(doc):
    """The mig-parted text inside a ConfigMap, a helm values file or the config itself."""
    if not isinstance(doc, dict):
        raise MigError("mig-parted config must be a mapping, got %s" % type(doc).__name__)
    if "mig-configs" in doc:
        return doc
    data = doc.get("data")
    if data is None and isinstance(doc.get("migManager"), dict):
        data = ((doc["migManager"].get("config") or {}).get("data"))
    if isinstance(data, dict) and upstream.MIG_CONFIGMAP_KEY in data:
        return data[upstream.MIG_CONFIGMAP_KEY]
    raise MigError("no mig-parted config found: expected `mig-configs:`, a ConfigMap with data.%s "
                   "or helm values migManager.config.data.%s"
                   % (upstream.MIG_CONFIGMAP_KEY, upstream.MIG_CONFIGMAP_KEY))


def load_yaml(text):
    if not HAS_YAML:  # pragma: no cover
        raise MigError("PyYAML is required to read a mig-parted config")
    return yaml.safe_load(text)


class MigPartedConfig(object):
    """A mig-parted config. `source` names it in messages (e.g. gpu-operator/default-mig-parted-config)."""

    def __init__(self, doc, source="mig-parted config"):
        self.source = source
        if isinstance(doc, str):
            doc = load_yaml(doc)
        inner = _config_text_from(doc)
        if isinstance(inner, str):
            inner = load_yaml(inner)
        if not isinstance(inner, dict) or not isinstance(inner.get("mig-configs"), dict):
            raise MigError("%s: `mig-configs` must be a mapping of config name -> list of entries" % source)
        self.version = inner.get("version")
        self.configs = inner["mig-configs"]
        for name, entries in self.configs.items():
            if not isinstance(entries, list) or not entries:
                raise MigError("%s: mig-configs.%s must be a non-empty list" % (source, name))

    @classmethod
    def from_configmap(cls, configmap):
        meta = configmap.get("metadata") or {}
        source = "ConfigMap %s/%s" % (meta.get("namespace"), meta.get("name"))
        return cls(configmap, source=source)

    def names(self):
        return list(self.configs)

    # mig-parted: an entry applies to a GPU when its device-filter (if any)
    # lists the GPU's PCI id and `devices` is `all` or lists the GPU's index.
    @staticmethod
    def _entry_matches(entry, device_id, index):
        filt = entry.get("device-filter")
        if filt is not None:
            filters = [filt] if isinstance(filt, str) else list(filt)
            if device_id is None or normalize_device_id(device_id) not in [normalize_device_id(f) for f in filters]:
                return False
        devices = entry.get("devices", "all")
        if devices == "all":
            return True
        return index in [int(d) for d in (devices if isinstance(devices, list) else [devices])]

    def layout(self, name, device_id, gpu_count):
        """Per-GPU result of config `name`: a list (one item per GPU index) of
        None (no entry applies: GPU untouched) or {"mig_enabled": bool, "devices": {profile: n}}.
        When several entries match one GPU the last one wins (approximation)."""
        if name not in self.configs:
            raise MigError("unknown config %s" % name)
        result = []
        for index in range(gpu_count):
            chosen = None
            for entry in self.configs[name]:
                if self._entry_matches(entry, device_id, index):
                    chosen = {"mig_enabled": bool(entry.get("mig-enabled", False)),
                              "devices": dict(entry.get("mig-devices") or {})}
            if chosen and not chosen["mig_enabled"]:
                chosen["devices"] = {}
            result.append(chosen)
        return result

    def problems(self, name, model, device_id, gpu_count):
        """Why config `name` cannot be applied to these GPUs ([] = it can).
        `model` is a GPU_MODELS item or None (unknown: profiles not checked)."""
        layout = self.layout(name, device_id, gpu_count)
        if all(item is None for item in layout):
            return ["no entry of %s matches device id %s" % (name, device_id)]
        found = []
        for index, item in enumerate(layout):
            if not item or not item["mig_enabled"] or model is None:
                continue
            slices = 0
            for profile, count in item["devices"].items():
                info = model["profiles"].get(profile)
                if info is None:
                    found.append("profile %s does not exist on this GPU model (it has %s)"
                                 % (profile, ", ".join(model["profiles"])))
                    continue
                if int(count) > info["max"]:
                    found.append("%d x %s requested, at most %d fit on one GPU" % (int(count), profile, info["max"]))
                slices += compute_slices(profile) * int(count)
            if slices > model["compute_slices"]:
                found.append("%d compute slices requested per GPU, the GPU has %d"
                             % (slices, model["compute_slices"]))
        # one line per distinct problem, not one per GPU index
        return sorted(set(found), key=found.index)

    def valid_names(self, model, device_id, gpu_count):
        return [n for n in self.configs if not self.problems(n, model, device_id, gpu_count)]


def resolve_gpu(product, device_id=None):
    """(model name, model, device id) from the node's product label, or from an
    explicit PCI device id. MigError when neither identifies a known model."""
    if device_id:
        device_id = normalize_device_id(device_id)
        name, model = model_for_device_id(device_id)
        return name, model, device_id
    name, model = model_for_product(product)
    if model is None:
        raise MigError("GPU product %r is not in the MIG model table; known products: %s. "
                       "Set device_id to the GPU's PCI device id (nvidia-smi -q: Device Id, e.g. 0x233010DE)"
                       % (product, ", ".join(known_products())))
    return name, model, model["products"][base_product(product)]


def check_profile(config, profile, product, gpu_count, device_id=None, node=None):
    """Validate `profile` for these GPUs and return its per-GPU layout.

    Raises MigError naming the valid configs FOR THIS GPU when the profile is
    unknown or does not fit."""
    model_name, model, device_id = resolve_gpu(product, device_id)
    where = "%s (%s, %s)" % (base_product(product) or model_name, device_id, "node %s" % node if node else "")
    where = where.replace(", )", ")")
    valid = config.valid_names(model, device_id, gpu_count)
    if profile not in config.configs:
        raise MigError("MIG profile %r is not in %s. Valid profiles for %s: %s"
                       % (profile, config.source, where, ", ".join(valid) or "none"))
    problems = config.problems(profile, model, device_id, gpu_count)
    if problems:
        raise MigError("MIG profile %r of %s does not apply to %s: %s. Valid profiles for this GPU: %s"
                       % (profile, config.source, where, "; ".join(problems), ", ".join(valid) or "none"))
    return config.layout(profile, device_id, gpu_count)


# ---------------------------------------------------------------------------
# What a node offers after success
# ---------------------------------------------------------------------------

def _mig_device_labels(prefix, model, profile, product):
    """Labels GFD writes for one MIG device type under `prefix` (e.g. 'nvidia.com/mig-1g.10gb.')."""
    g = compute_slices(profile)
    labels = {
        prefix + "product": "%s%s%s" % (product, upstream.PRODUCT_SUFFIX_MIG, resource_suffix(profile)),
        prefix + "replicas": "1",
        prefix + "sharing-strategy": "none",
        prefix + "slices.gi": str(g),
        prefix + "slices.ci": str(g),
    }
    info = (model or {}).get("profiles", {}).get(profile) or {}
    for key in ("multiprocessors", "engines.copy", "engines.decoder", "engines.encoder",
                "engines.jpeg", "engines.ofa"):
        if info.get(key) is not None:
            labels[prefix + key] = str(info[key])
    return labels


def expected_offer(layout, product, strategy, model=None):
    """What the node offers once mig.config.state is `success`.

    Returns {"allocatable": {resource: int}, "labels": {label: value}} holding only
    values that are deterministic (memory MiB differs between drivers: never
    predicted). `product` is the base product name. Raises MigError when the
    layout cannot work with the strategy (single needs one MIG type per node)."""
    product = base_product(product)
    gpus = len(layout)
    full = sum(1 for item in layout if not item or not item["mig_enabled"])
    mig_counts = {}
    for item in layout:
        if item and item["mig_enabled"]:
            for profile, count in item["devices"].items():
                mig_counts[profile] = mig_counts.get(profile, 0) + int(count)
    labels = {upstream.LABEL_MIG_STRATEGY: strategy}
    if strategy == "single":
        if full == gpus:
            labels.update({upstream.LABEL_GPU_PRODUCT: product, upstream.LABEL_GPU_COUNT: str(gpus)})
            return {"allocatable": {upstream.GPU_RESOURCE: gpus}, "labels": labels}
        if full or len(mig_counts) > 1:
            raise MigError("MIG strategy 'single' needs every GPU of a node split into one MIG profile, "
                           "this config gives %s%s. Use a single-profile config (e.g. all-1g.10gb) "
                           "or set the ClusterPolicy spec.mig.strategy to mixed"
                           % (", ".join("%d x %s" % (n, p) for p, n in sorted(mig_counts.items())),
                              " and %d full GPU(s)" % full if full else ""))
        if not mig_counts:
            return {"allocatable": {upstream.GPU_RESOURCE: 0}, "labels": labels}
        profile, total = list(mig_counts.items())[0]
        labels.update(_mig_device_labels(upstream.GPU_LABEL_PREFIX, model, profile, product))
        labels[upstream.LABEL_GPU_COUNT] = str(total)
        return {"allocatable": {upstream.GPU_RESOURCE: total}, "labels": labels}
    if strategy == "mixed":
        labels.update({upstream.LABEL_GPU_PRODUCT: product, upstream.LABEL_GPU_COUNT: str(gpus)})
        allocatable = {upstream.GPU_RESOURCE: full}
        for profile, total in mig_counts.items():
            name = upstream.MIG_RESOURCE_PREFIX + resource_suffix(profile)
            allocatable[name] = total
            labels[name + ".count"] = str(total)
            labels.update(_mig_device_labels(name + ".", model, profile, product))
        return {"allocatable": allocatable, "labels": labels}
    raise MigError("MIG strategy %r: the ClusterPolicy spec.mig.strategy must be single or mixed "
                   "to use MIG (none exposes no MIG devices)" % strategy)


def physical_gpu_count(labels, config=None):
    """Physical GPUs of a node from its labels. In strategy single with MIG on,
    GFD's nvidia.com/gpu.count counts MIG devices: divide by the current profile."""
    count = int(labels.get(upstream.LABEL_GPU_COUNT) or 0)
    product = labels.get(upstream.LABEL_GPU_PRODUCT) or ""
    current = labels.get(upstream.LABEL_MIG_CONFIG)
    if upstream.PRODUCT_SUFFIX_MIG not in product or config is None or current not in (config.configs if config else {}):
        return count
    try:
        device_id = resolve_gpu(product)[2]
    except MigError:
        return count
    per_gpu = sum(int(n) for item in config.layout(current, device_id, 1) if item
                  for n in item["devices"].values())
    return count // per_gpu if per_gpu else count


def offer_differences(expected, node):
    """Human-readable differences between expected_offer() and a Node object ([] = matches)."""
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    diffs = []
    for resource, want in sorted(expected["allocatable"].items()):
        have = int(allocatable.get(resource, 0) or 0)
        if have != want:
            diffs.append("allocatable %s is %d, expected %d" % (resource, have, want))
    for resource in sorted(allocatable):
        if resource.startswith(upstream.MIG_RESOURCE_PREFIX) and resource not in expected["allocatable"] \
                and int(allocatable[resource] or 0):
            diffs.append("allocatable %s is %s, expected none" % (resource, allocatable[resource]))
    for key in (upstream.LABEL_GPU_PRODUCT, upstream.LABEL_GPU_COUNT):
        if key in expected["labels"] and labels.get(key) != expected["labels"][key]:
            diffs.append("label %s is %r, expected %r" % (key, labels.get(key), expected["labels"][key]))
    for key, want in sorted(expected["labels"].items()):
        if key.startswith(upstream.MIG_RESOURCE_PREFIX) and key.endswith((".count", ".product")) \
                and labels.get(key) != want:
            diffs.append("label %s is %r, expected %r" % (key, labels.get(key), want))
    return diffs


def node_offer(node):
    """What a node offers now: GPU/MIG allocatable and the product label."""
    status = node.get("status") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    offer = {}
    for resource, value in sorted((status.get("allocatable") or {}).items()):
        if resource == upstream.GPU_RESOURCE or resource.startswith(upstream.MIG_RESOURCE_PREFIX):
            offer[resource] = int(value or 0)
    return {"allocatable": offer, "product": labels.get(upstream.LABEL_GPU_PRODUCT),
            "mig_config": labels.get(upstream.LABEL_MIG_CONFIG),
            "mig_config_state": labels.get(upstream.LABEL_MIG_CONFIG_STATE),
            "mig_strategy": labels.get(upstream.LABEL_MIG_STRATEGY)}
