# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Registry policy of a team: a ValidatingAdmissionPolicy and its binding per team namespace.

    problems.extend(check(team, entry, settings))    # validation, part of tenants.validate
    objects.extend(render(entry, settings, meta))     # part of tenants.render_team; meta(name) -> metadata

The policy admits a pod in the team's namespace only when every image of its containers,
init containers and ephemeral containers starts with an allowed prefix followed by '/'
(`registry.example:5000/mirror` admits `registry.example:5000/mirror/nvidia/cuda:12`, not
`registry.example:5000/mirror-old/...` nor `registry.example:5000.evil/...`). Images must
name their registry: a short name (`busybox`) means docker.io to containerd and a search
list to CRI-O, so the policy cannot tell where it comes from and refuses it. With
`require_digest` every image must be pinned by `@sha256:<64 hex>`.

The prefixes are the site's list (`tenants_allowed_registries`), or the team's own
`images.registries`. An empty list renders no policy: that team may pull from anywhere.
The expressions use standard CEL only (no Kubernetes string library) and are written into
the policy, not read from params, so a policy and its binding are all a cluster needs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.pod_policy import pod_policy_spec, team_policy

POLICY_PREFIX = "skaffon-registries-"
KINDS = (
    ("ValidatingAdmissionPolicy", upstream.VAP_API_VERSION),
    ("ValidatingAdmissionPolicyBinding", upstream.VAP_API_VERSION),
)
IMAGES_KEYS = ("registries", "require_digest")
SITE_VARIABLE = "tenants_allowed_registries"

# host[:port] with at least one '.' or ':' or 'localhost' (else it would be a docker.io path), then /path
_PREFIX = re.compile(r"^(localhost|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+|"
                     r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?:[0-9]+|"
                     r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+:[0-9]+)"
                     r"(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def policy_name(team):
    return POLICY_PREFIX + team


def prefix_problem(value):
    """Why `value` is not a registry prefix, or None."""
    if not isinstance(value, str) or not value:
        return "must be a registry host with an optional path, e.g. registry.example:5000/mirror"
    if "://" in value:
        return "no scheme: write %s" % value.split("://", 1)[1].rstrip("/")
    if value.endswith("/"):
        return "no trailing '/': write %s (the policy adds it)" % value.rstrip("/")
    if "@" in value or re.search(r"/[^/]*:[^/]*$", value):
        return "a registry prefix has no tag or digest; write the registry and path only"
    if not _PREFIX.match(value):
        return ("not a registry prefix: the first part must be a host with a '.' or a ':port' (or localhost), "
                "e.g. nvcr.io, registry.example:5000/mirror; docker.io images are docker.io/library/...")
    return None


def effective(entry, settings):
    """(prefixes, require_digest) of one team: its own images block, else the site's list."""
    images = entry.get("images") if isinstance(entry.get("images"), dict) else {}
    prefixes = images.get("registries")
    if prefixes is None:
        prefixes = settings.get("allowed_registries") or []
    return list(prefixes), bool(images.get("require_digest"))


def check_site(settings):
    """Problems of the site-wide list."""
    value = settings.get("allowed_registries")
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list):
        return ["%s = %s: must be a list of registry prefixes, e.g. [registry.example:5000/mirror]"
                % (SITE_VARIABLE, json.dumps(value, default=str))]
    out = []
    for index, item in enumerate(value):
        why = prefix_problem(item)
        if why:
            out.append("%s[%d] = %s: %s" % (SITE_VARIABLE, index, json.dumps(item, default=str), why))
    return out


def check(problems, team, entry):
    """Add the problems of a team's `images` block to tenants' _Problems."""
    images = entry.get("images")
    if images is None:
        return
    if not isinstance(images, dict):
        problems.add(team, "images", images, "must be a mapping with registries and/or require_digest")
        return
    for key in sorted(set(images) - set(IMAGES_KEYS), key=str):
        problems.add(team, "images.%s" % key, images[key], "unknown key; allowed here: %s" % ", ".join(IMAGES_KEYS))
    if "require_digest" in images and not isinstance(images["require_digest"], bool):
        problems.add(team, "images.require_digest", images["require_digest"], "must be true or false")
    registries = images.get("registries")
    if registries is None:
        return
    if isinstance(registries, str) or not isinstance(registries, list):
        problems.add(team, "images.registries", registries,
                     "must be a list of registry prefixes ([] allows every registry)")
        return
    for index, item in enumerate(registries):
        why = prefix_problem(item)
        if why:
            problems.add(team, "images.registries[%d]" % index, item, why)


def _cel_string(text):
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'")


def policy_spec(prefixes, require_digest):
    """The policy's spec; every field the API server would default is spelled, so a re-run compares equal."""
    allowed = "[%s]" % ", ".join(_cel_string(p + "/") for p in prefixes)
    shown = ", ".join(prefixes)
    variables = [
        {"name": "containers", "expression": (
            "(has(object.spec.initContainers) ? object.spec.initContainers : []) + "
            "(has(object.spec.containers) ? object.spec.containers : []) + "
            "(has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])")},
        {"name": "foreign", "expression": (
            "variables.containers.map(c, has(c.image) ? c.image : '')"
            ".filter(i, !%s.exists(p, i.startsWith(p)))" % allowed)},
    ]
    validations = [{
        "expression": "size(variables.foreign) == 0",
        "messageExpression": ("'image ' + variables.foreign[0] + ' is not from a registry allowed in namespace ' + "
                              "request.namespace + ' (allowed: %s); use an image from there, named with its "
                              "registry'" % shown.replace("'", "")),
        "reason": "Forbidden",
    }]
    if require_digest:
        variables.append({"name": "unpinned", "expression": (
            "variables.containers.map(c, has(c.image) ? c.image : '')"
            ".filter(i, !i.matches('@sha256:[0-9a-f]{64}$'))")})
        validations.append({
            "expression": "size(variables.unpinned) == 0",
            "messageExpression": ("'image ' + variables.unpinned[0] + ' is not pinned by digest: namespace ' + "
                                  "request.namespace + ' admits only images named <image>@sha256:<digest>'"),
            "reason": "Forbidden",
        })
    return pod_policy_spec(variables, validations)


def render(entry, settings, meta):
    """[ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding] of a validated team, or [].
    meta(name): the metadata tenants gives every object of the team (labels, owned keys)."""
    prefixes, require_digest = effective(entry, settings)
    if not prefixes:
        return []
    team = entry["name"]
    name = policy_name(team)
    return team_policy(name, team, meta, policy_spec(prefixes, require_digest))
