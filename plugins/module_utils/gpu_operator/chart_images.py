# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every image a rendered chart needs, for mirroring an air-gapped site.

Images hide in four places of what `helm template` renders:
- container and init-container `image` fields of any pod template (Deployments,
  DaemonSets, hook Jobs included: helm template renders hooks);
- environment variables that carry an image for a pod the operator starts later
  (the GPU Operator's VALIDATOR_IMAGE, DRIVER_MANAGER_IMAGE);
- custom resources from which an operator deploys its operands: the ClusterPolicy's (and
  the GPUCluster's) components as repository/image/version, the NVIDIADriver's driver (only enabled components; the driver image
  gets the node OS appended, `<version>-ubuntu22.04`, by the operator at run time);
- generic `{repository, image, tag}` blocks of other operators' resources (KAI's Config).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream

PUBLIC_REGISTRIES = ("nvcr.io", "registry.k8s.io", "ghcr.io", "docker.io", "quay.io", "gcr.io", "k8s.gcr.io",
                     "public.ecr.aws", "mcr.microsoft.com")
_IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+)?(@sha256:[a-f0-9]{64})?$")
NVIDIA_DRIVER_KIND = "NVIDIADriver"
# ClusterPolicy components that are off unless `enabled: true` is rendered.
OFF_BY_DEFAULT = ("gds", "gdrcopy")
# Deployed only with spec.sandboxWorkloads.enabled (VMs, vGPU, Kata), whatever their own `enabled` says.
SANDBOX = ("vgpuManager", "vgpuDeviceManager", "vfioManager", "kataManager", "ccManager",
           "sandboxDevicePlugin", "kataSandboxDevicePlugin")


def _ref(repository, image, version):
    base = "%s/%s" % (repository.rstrip("/"), image) if repository else image
    if not version:
        return base
    return "%s@%s" % (base, version) if str(version).startswith("sha256:") else "%s:%s" % (base, version)


def _source(doc):
    meta = doc.get("metadata") or {}
    return "%s/%s" % (doc.get("kind"), meta.get("name"))


def _walk_pod_specs(node, found, source):
    if isinstance(node, dict):
        for key in ("containers", "initContainers", "ephemeralContainers"):
            for container in node.get(key) or []:
                if isinstance(container, dict):
                    if isinstance(container.get("image"), str):
                        found.append((container["image"], "%s container %s" % (source, container.get("name"))))
                    for env in container.get("env") or []:
                        value = env.get("value") if isinstance(env, dict) else None
                        if isinstance(value, str) and env.get("name", "").endswith("IMAGE") and _IMAGE_RE.match(value):
                            found.append((value, "%s env %s" % (source, env["name"])))
        for key, value in node.items():
            if key not in ("containers", "initContainers", "ephemeralContainers"):
                _walk_pod_specs(value, found, source)
    elif isinstance(node, list):
        for item in node:
            _walk_pod_specs(item, found, source)


def _component_images(spec, found, source, driver_os):
    sandbox = ((spec or {}).get("sandboxWorkloads") or {}).get("enabled") is True
    for name, comp in sorted((spec or {}).items()):
        if not isinstance(comp, dict):
            continue
        enabled = comp.get("enabled")
        if enabled is False or (enabled is None and name in OFF_BY_DEFAULT) or (name in SANDBOX and not sandbox):
            continue
        if comp.get("image") and comp.get("repository") is not None:
            ref = _ref(comp.get("repository"), comp["image"], comp.get("version"))
            if name == "driver" and not str(comp.get("version", "")).startswith("sha256:"):
                for os_tag in driver_os:
                    found.append(("%s-%s" % (ref, os_tag), "%s spec.%s (node OS %s)" % (source, name, os_tag)))
            else:
                found.append((ref, "%s spec.%s" % (source, name)))
        for sub, block in sorted(comp.items()):
            if isinstance(block, dict) and block.get("image") and block.get("repository"):
                found.append((_ref(block["repository"], block["image"], block.get("version") or block.get("tag")),
                              "%s spec.%s.%s" % (source, name, sub)))


def images(docs, driver_os=("ubuntu22.04",)):
    """[{image, sources}] sorted by image, from the rendered documents."""
    found = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        source = _source(doc)
        if doc.get("kind") in (upstream.CLUSTER_POLICY_KIND, upstream.GPUCLUSTER_KIND):
            # the GPUCluster names its operands alike: draDriver, dcgm, dcgmExporter
            _component_images(doc.get("spec"), found, source, driver_os)
        elif doc.get("kind") == NVIDIA_DRIVER_KIND:
            # the DRA stack's driver (driver.nvidiaDriverCRD): one flat repository/image/version
            _component_images({"driver": doc.get("spec")}, found, source, driver_os)
        else:
            _walk_pod_specs(doc.get("spec"), found, source)
    merged = {}
    for image, source in found:
        merged.setdefault(image, []).append(source)
    return [{"image": image, "sources": sorted(set(sources))} for image, sources in sorted(merged.items())]


def registry(image):
    first = image.split("/", 1)[0]
    return first if ("." in first or ":" in first or first == "localhost") and "/" in image else "docker.io"


def public(images_list, mirror=None):
    """Images that would be pulled from outside the mirror (all public ones when mirror is None)."""
    out = []
    for item in images_list:
        image = item["image"]
        if mirror and image.startswith(mirror.rstrip("/") + "/"):
            continue
        if mirror or registry(image) in PUBLIC_REGISTRIES:
            out.append(image)
    return out


def mirror_pairs(upstream_images, mirrored_images):
    """[{source, destination}] pairing each upstream image with the image the mirror values render
    in the same place (ready for `skopeo copy` / `crane copy`)."""
    by_source = {}
    for item in mirrored_images:
        for source in item["sources"]:
            by_source[source] = item["image"]
    pairs = {}
    for item in upstream_images:
        dests = sorted(set(by_source[s] for s in item["sources"] if s in by_source))
        for dest in dests or [None]:
            pairs[(item["image"], dest)] = {"source": item["image"], "destination": dest}
    return [pairs[k] for k in sorted(pairs, key=lambda k: (k[0], k[1] or ""))]


def mirror_image(image, mirror=None, layout="path"):
    """The reference of one upstream image under the mirror, rewritten the way the operator values are."""
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.values import mirror_repository

    if not mirror:
        return image
    repository, _sep, name = image.rpartition("/")
    return "%s/%s" % (mirror_repository(repository, mirror, layout), name)
