#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: helm_release_info
short_description: Read a Helm release's state and user values in two helm runs
version_added: 0.3.0
author: skaffon.gpu_platform contributors (@skaffon)
requirements:
  - "helm (https://github.com/helm/helm/releases), 3.x or 4.x"
description:
  - Finds a Helm release in the states asked for (C(helm list)) and reads the values it was installed
    with (C(helm get values)), with Helm access given exactly as to the C(kubernetes.core) Helm modules.
  - Returns what M(kubernetes.core.helm_info) returns without the release's manifest, notes and hooks,
    and so runs helm twice instead of five times (each run reads the release from the cluster).
  - The values may hold credentials (image pull secrets, environment of the operands) - give the task
    C(no_log) where its result could be shown.
  - Changes nothing.
extends_documentation_fragment:
  - kubernetes.core.helm_common_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Reads only; runs in check mode as in a normal run.
  diff_mode:
    support: none
  platform:
    platforms: posix
  action_group:
    support: full
    membership:
      - skaffon.gpu_platform.helm
options:
  release_name:
    description:
      - The release's name.
    required: true
    type: str
    aliases: [name]
  release_namespace:
    description:
      - The release's namespace.
    required: true
    type: str
    aliases: [namespace]
  release_state:
    description:
      - The states the release is looked for in, as C(helm list) filters them (C(all), C(deployed), C(failed),
        C(pending), C(superseded), C(uninstalled), C(uninstalling)); empty, Helm's default (deployed and failed).
      - C(helm list) keeps each release's latest revision, then filters by state.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Read the GPU Operator release, pending or not
  skaffon.gpu_platform.helm_release_info:
    name: gpu-operator
    release_namespace: gpu-operator
    release_state: [deployed, failed, pending]
    kubeconfig: /etc/gpu-platform/kubeconfig
  register: release
  no_log: true   # the values may hold credentials

- name: Refuse a release an interrupted helm run left pending
  ansible.builtin.assert:
    that: release.status is not defined or release.status.status is not match('pending-')
"""

RETURN = r"""
status:
  description: The release as C(helm list) shows it, with its user values; absent when no release of that
    name is in the states asked for.
  returned: when the release is found
  type: dict
  contains:
    name: {description: The release name., type: str, sample: gpu-operator}
    namespace: {description: Its namespace., type: str, sample: gpu-operator}
    revision: {description: Its latest revision., type: str, sample: "3"}
    updated: {description: When that revision was written., type: str}
    status: {description: That revision's state., type: str, sample: deployed}
    chart: {description: Chart name and version., type: str, sample: gpu-operator-v26.7.0}
    app_version: {description: The chart's appVersion., type: str, sample: v26.7.0}
    values: {description: The values the release was installed with (C(helm get values))., type: dict}
"""

import json

from ansible_collections.kubernetes.core.plugins.module_utils.helm import AnsibleHelmModule
from ansible_collections.kubernetes.core.plugins.module_utils.helm_args_common import (
    HELM_AUTH_ARG_SPEC, HELM_AUTH_MUTUALLY_EXCLUSIVE)

STATES = ("all", "deployed", "failed", "pending", "superseded", "uninstalled", "uninstalling")


def helm_json(module, command, what):
    """A helm command's JSON output; helm prints `null` for a release without user values."""
    rc, out, err = module.run_helm_command(command)
    try:
        return json.loads(out) if out.strip() else None
    except ValueError:
        module.fail_json(msg="%s printed no JSON (is binary_path Helm 3 or 4?): %s" % (what, out.strip()[:200]),
                         stdout=out, stderr=err, command=command)


def find_release(module):
    params = module.params
    name = params["release_name"]
    unknown = [s for s in params["release_state"] if s not in STATES]
    if unknown:
        module.fail_json(msg="release_state %s: use %s" % (", ".join(unknown), ", ".join(STATES)))
    helm = module.get_helm_binary()
    # release_namespace reaches helm as HELM_NAMESPACE (kubernetes.core's environment for the Helm modules);
    # --filter is a regular expression: the exact name is picked from what it matches
    command = [helm, "list", "--output=json", "--filter", name] + ["--%s" % s for s in params["release_state"]]
    found = [r for r in helm_json(module, command, "helm list") or [] if r.get("name") == name]
    if not found:
        return None
    release = found[0]
    release["values"] = helm_json(module, [helm, "get", "values", "--output=json", name], "helm get values") or {}
    return release


def main():
    spec = dict(HELM_AUTH_ARG_SPEC)
    spec.update(release_name=dict(type="str", required=True, aliases=["name"]),
                release_namespace=dict(type="str", required=True, aliases=["namespace"]),
                release_state=dict(type="list", default=[], elements="str"))
    module = AnsibleHelmModule(argument_spec=spec, mutually_exclusive=HELM_AUTH_MUTUALLY_EXCLUSIVE,
                               supports_check_mode=True)
    release = find_release(module)
    if release is None:
        module.exit_json(changed=False)
    module.exit_json(changed=False, status=release)


if __name__ == "__main__":
    main()
