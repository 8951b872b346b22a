# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DRA mode: a team's ResourceClaimTemplates and its quota on claims (pure, no cluster access).

    check(problems, team, entry, settings, cluster)   # part of tenants.validate
    objects.extend(render(entry, settings, meta))     # part of tenants.render_team

With `tenants_allocation_api: dra` GPUs reach pods only through ResourceClaims (the DRA driver
publishes them in ResourceSlices; no device plugin runs, no node offers nvidia.com/gpu). A quota
on requests.nvidia.com/gpu then limits nothing, so it is refused; what Kubernetes 1.34 counts
for a claim is `count/resourceclaims.resource.k8s.io` (1 per claim) and, per request,
`<deviceclass>.deviceclass.resource.k8s.io/devices`: the request's count, or 32 (the most an
allocation can hold) for allocationMode All, whatever the node really has. A template that its
team's quota can never admit is refused here instead of failing at every pod.

The NVIDIA driver's DeviceClasses: gpu.nvidia.com (whole GPUs), mig.nvidia.com (MIG devices of
every profile: a quota on it cannot tell 1g.10gb from 7g.80gb; the template's CEL selector picks
the profile from the device attribute `profile`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.quantity import QuantityError, parse_quantity
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import (
    DNS1123_SUBDOMAIN_MAX,
    is_dns_subdomain,
)

DEVICE_PLUGIN = "device-plugin"
DRA = "dra"
ALLOCATION_APIS = (DEVICE_PLUGIN, DRA)
SETTING = "allocation_api"
VARIABLE = "tenants_allocation_api"
KIND = (upstream.RESOURCE_CLAIM_TEMPLATE_KIND, upstream.RESOURCE_API_VERSION)
TEMPLATE_KEYS = ("name", "gpus", "mig_profile", "all_gpus", "product")
DEFAULT_TEMPLATES = ({"name": "gpu", "gpus": 1},)
_PROFILE = re.compile(r"^[0-9]+g\.[0-9]+gb(\+[a-z0-9.]+)?$")


def is_dra(settings):
    return (settings or {}).get(SETTING) == DRA


def class_quota_key(device_class):
    """gpu.nvidia.com -> gpu.nvidia.com.deviceclass.resource.k8s.io/devices"""
    return device_class + upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX


def is_claim_quota(resource):
    """A quota key the claim evaluator counts (never an extended resource)."""
    return resource == upstream.QUOTA_CLAIM_COUNT or resource.endswith(upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX)


def claim_class(resource):
    """The DeviceClass of a per-class claim quota key, else None."""
    if resource.endswith(upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX):
        return resource[:-len(upstream.QUOTA_CLAIMS_PER_CLASS_SUFFIX)]
    return None


def _cel_string(value):
    return "'%s'" % value.replace("\\", "\\\\").replace("'", "\\'")


def _attr(name):
    return "device.attributes['%s'].%s" % (upstream.DRA_DRIVER_NAME, name)


def templates_of(entry, settings):
    """The team's claim templates as written, or the default (one whole GPU) in DRA mode; [] otherwise."""
    if not is_dra(settings):
        return []
    if entry.get("claim_templates") is not None:
        return [t for t in entry["claim_templates"] if isinstance(t, dict)]
    quota = entry.get("quota") if isinstance(entry.get("quota"), dict) else {}
    gpus = quota.get(class_quota_key(upstream.DEVICE_CLASS_GPU))
    try:
        if gpus is not None and parse_quantity(gpus) == 0:
            return []           # a MIG-only team: a whole-GPU template it can never use
    except QuantityError:
        pass
    return [dict(t) for t in DEFAULT_TEMPLATES]


def request_of(template):
    """(request name, deviceClassName, allocationMode, count or None, [CEL selectors]) of one template."""
    selectors = []
    if template.get("mig_profile"):
        device_class, name, mode, count = upstream.DEVICE_CLASS_MIG, "mig", upstream.ALLOCATION_MODE_EXACT, 1
        selectors.append("%s == %s" % (_attr(upstream.DRA_ATTR_PROFILE), _cel_string(str(template["mig_profile"]))))
    elif template.get("all_gpus"):
        device_class, name, mode, count = upstream.DEVICE_CLASS_GPU, "gpus", upstream.ALLOCATION_MODE_ALL, None
    else:
        device_class, name, mode = upstream.DEVICE_CLASS_GPU, "gpu", upstream.ALLOCATION_MODE_EXACT
        count = int(template.get("gpus") or 1)
    if template.get("product"):
        selectors.append("%s == %s" % (_attr(upstream.DRA_ATTR_PRODUCT), _cel_string(str(template["product"]))))
    return name, device_class, mode, count, selectors


def charge(template):
    """(quota key, devices) one claim from this template is charged, as the 1.34 evaluator counts."""
    dummy, device_class, mode, count, dummy2 = request_of(template)
    return class_quota_key(device_class), (upstream.ALLOCATION_RESULTS_MAX_SIZE
                                           if mode == upstream.ALLOCATION_MODE_ALL else count)


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------

def check_quota_key(problems, team, field, value, resource, settings):
    """True when the key is handled here (refused or fine); False: the generic quota checks apply."""
    dra = is_dra(settings)
    prefix, dummy, bare = resource.partition(".") if resource.startswith(("requests.", "limits.")) else ("", "", resource)
    if is_claim_quota(bare) and prefix:
        problems.add(team, field, value, "Kubernetes counts claims as %s (no %s. prefix; the requests.deviceclass."
                     "resource.kubernetes.io form needs the alpha DRAExtendedResource gate): rename the key to %s"
                     % (bare, prefix, bare))
        return True
    if is_claim_quota(resource) and not dra:
        problems.add(team, field, value, "a quota on ResourceClaims limits nothing while GPUs come from the device "
                     "plugin (%s: %s); use requests.%s, or switch the cluster to DRA (the design's allocation_api: "
                     "dra sets %s)" % (VARIABLE, settings.get(SETTING) or DEVICE_PLUGIN, upstream.GPU_RESOURCE,
                                       VARIABLE))
        return True
    if dra and (bare == upstream.GPU_RESOURCE or bare == upstream.GPU_SHARED_RESOURCE
                or bare.startswith(upstream.MIG_RESOURCE_PREFIX)):
        problems.add(team, field, value, "in DRA mode (%s: dra) no device plugin runs and no pod requests %s: the "
                     "quota would limit nothing. Kubernetes 1.34 counts claims: use %s (whole GPUs), %s (MIG "
                     "devices of any profile) and %s (claims)" % (
                         VARIABLE, bare, class_quota_key(upstream.DEVICE_CLASS_GPU),
                         class_quota_key(upstream.DEVICE_CLASS_MIG), upstream.QUOTA_CLAIM_COUNT))
        return True
    if is_claim_quota(resource):
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            problems.add(team, field, value, "%s" % exc)
            return True
        if amount < 0 or amount != int(amount):
            problems.add(team, field, value, "claims and devices are counted in whole units: use an integer >= 0")
        return True
    return False


def _hard(quota, key):
    if key not in quota:
        return None
    try:
        return int(parse_quantity(quota[key]))
    except (QuantityError, ValueError, TypeError):
        return None


def check(problems, team, entry, settings, cluster):
    """The team's claim_templates: shape, usable under its quota, and (with `cluster`) offered by the
    DeviceClasses and ResourceSlices of the cluster."""
    raw = entry.get("claim_templates")
    if raw is not None and not is_dra(settings):
        problems.add(team, "claim_templates", raw, "ResourceClaimTemplates are for DRA mode only (%s: %s): drop "
                     "the key, or switch the cluster to DRA (the design's allocation_api: dra)"
                     % (VARIABLE, settings.get(SETTING) or DEVICE_PLUGIN))
        return
    if raw is not None and not isinstance(raw, list):
        problems.add(team, "claim_templates", raw, "must be a list of {name, gpus | mig_profile | all_gpus, product}")
        return
    if not is_dra(settings):
        return
    quota = entry.get("quota") if isinstance(entry.get("quota"), dict) else {}
    names = set()
    for index, template in enumerate(raw if raw is not None else templates_of(entry, settings)):
        field = "claim_templates[%d]" % index
        if not isinstance(template, dict):
            problems.add(team, field, template, "each template is a mapping {name, gpus | mig_profile | all_gpus}")
            continue
        for key in sorted(set(template) - set(TEMPLATE_KEYS), key=str):
            problems.add(team, "%s.%s" % (field, key), template[key],
                         "unknown key; allowed here: %s" % ", ".join(TEMPLATE_KEYS))
        name = template.get("name")
        if not is_dns_subdomain(name, DNS1123_SUBDOMAIN_MAX):
            problems.add(team, field + ".name", name, "required, a DNS-1123 subdomain (lowercase, digits, '-', '.'): "
                         "the ResourceClaimTemplate's name pods name in spec.resourceClaims")
        elif name in names:
            problems.add(team, field + ".name", name, "used twice; every template needs its own name")
        names.add(name)
        kinds = [k for k in ("gpus", "mig_profile", "all_gpus") if template.get(k) not in (None, False)]
        if len(kinds) != 1:
            problems.add(team, field, template, "set exactly one of gpus (whole GPUs), mig_profile (one MIG device, "
                         "e.g. 1g.10gb) or all_gpus: true (every GPU of one node)")
            continue
        if "gpus" in kinds and (isinstance(template["gpus"], bool) or not isinstance(template["gpus"], int)
                                or template["gpus"] < 1):
            problems.add(team, field + ".gpus", template["gpus"], "a whole number of GPUs >= 1")
            continue
        if "all_gpus" in kinds and template["all_gpus"] is not True:
            problems.add(team, field + ".all_gpus", template["all_gpus"], "write all_gpus: true")
            continue
        if "mig_profile" in kinds and not (isinstance(template["mig_profile"], str)
                                           and _PROFILE.match(template["mig_profile"])):
            problems.add(team, field + ".mig_profile", template["mig_profile"],
                         "a MIG profile as the driver publishes it in the device attribute profile, e.g. 1g.10gb "
                         "or 3g.40gb")
            continue
        if template.get("product") is not None and not (isinstance(template["product"], str)
                                                        and template["product"].strip()):
            problems.add(team, field + ".product", template["product"],
                         "the GPU's productName as the driver publishes it, e.g. NVIDIA H100 80GB HBM3")
            continue
        key, devices = charge(template)
        hard = _hard(quota, key)
        if hard is not None and devices > hard:
            if template.get("all_gpus"):
                why = ("a claim with allocationMode All is charged %d devices (AllocationResultsMaxSize, the worst "
                       "case) whatever the node has" % upstream.ALLOCATION_RESULTS_MAX_SIZE)
            else:
                why = "one claim from it is charged %d device(s)" % devices
            problems.add(team, field, template, "%s, above the team's quota %s: %d, so every such claim is refused "
                         "(403 exceeded quota): raise quota['%s'] to at least %d or drop the template"
                         % (why, key, hard, key, devices))
        _check_cluster(problems, team, field, template, cluster)


def _check_cluster(problems, team, field, template, cluster):
    dra = (cluster or {}).get("dra")
    if not dra:
        return
    dummy, device_class, dummy2, dummy3, dummy4 = request_of(template)
    if dra.get("classes") is not None and device_class not in dra["classes"]:
        problems.add(team, field, template, "the cluster has no DeviceClass %s (has: %s): install the GPU Operator "
                     "with the DRA driver first (playbooks/gpu_operator.yml with allocation_api: dra)"
                     % (device_class, ", ".join(sorted(dra["classes"])) or "none"))
        return
    profile = template.get("mig_profile")
    if profile and profile not in dra.get("mig_profiles", ()):
        problems.add(team, field + ".mig_profile", profile, "no ResourceSlice of the cluster publishes a MIG device "
                     "with profile %s (published: %s): pods with this claim would stay Pending; configure the MIG "
                     "layout first or use a published profile"
                     % (profile, ", ".join(sorted(dra.get("mig_profiles", ()))) or "none"))
    product = template.get("product")
    if product and product not in dra.get("products", ()):
        problems.add(team, field + ".product", product, "no device of the cluster's ResourceSlices has productName "
                     "%s (published: %s)" % (json.dumps(product), ", ".join(sorted(dra.get("products", ()))) or "none"))


def class_quota(entry, device_class=upstream.DEVICE_CLASS_GPU):
    quota = entry.get("quota") if isinstance(entry, dict) and isinstance(entry.get("quota"), dict) else {}
    return _hard(quota, class_quota_key(device_class)) or 0


def slice_facts(device_classes, slices):
    """What the cluster's DRA objects offer: {classes, gpus, mig_profiles, products} (driver gpu.nvidia.com)."""
    facts = {"classes": set(c["metadata"]["name"] for c in device_classes or []), "gpus": 0,
             "mig_profiles": set(), "products": set()}
    for item in slices or []:
        spec = item.get("spec") or {}
        if spec.get("driver") != upstream.DRA_DRIVER_NAME:
            continue
        for device in spec.get("devices") or []:
            attrs = device.get("attributes") or {}
            kind = (attrs.get(upstream.DRA_ATTR_TYPE) or {}).get("string")
            product = (attrs.get(upstream.DRA_ATTR_PRODUCT) or {}).get("string")
            if product:
                facts["products"].add(product)
            if kind == upstream.DRA_TYPE_GPU:
                facts["gpus"] += 1
            elif kind == upstream.DRA_TYPE_MIG:
                profile = (attrs.get(upstream.DRA_ATTR_PROFILE) or {}).get("string")
                if profile:
                    facts["mig_profiles"].add(profile)
    return facts


# ---------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------

def template_object(team, template, meta):
    name, device_class, mode, count, selectors = request_of(template)
    exactly = {"deviceClassName": device_class, "allocationMode": mode}
    if count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"apiVersion": upstream.RESOURCE_API_VERSION, "kind": upstream.RESOURCE_CLAIM_TEMPLATE_KIND,
            "metadata": meta(template["name"]),
            "spec": {"spec": {"devices": {"requests": [{"name": name, "exactly": exactly}]}}}}


def render(entry, settings, meta):
    """The team's ResourceClaimTemplates (DRA mode), [] otherwise; meta(name) -> namespaced metadata."""
    return [template_object(entry["name"], t, meta) for t in templates_of(entry, settings)]
