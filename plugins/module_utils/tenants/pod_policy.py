# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shape every per-team pod admission policy of the tenants role shares (GPU access, registries).

A ValidatingAdmissionPolicy on pod create/update (ephemeral containers included) and its binding,
which denies in the team's namespace only (selected by kubernetes.io/metadata.name, which the API
server sets on every namespace and nobody can change).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream

POD_RULES = {
    "matchPolicy": "Equivalent",
    "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                       "resources": ["pods", "pods/ephemeralcontainers"], "scope": "Namespaced"}],
}


def pod_policy_spec(variables, validations):
    """spec of a ValidatingAdmissionPolicy over pods that fails closed."""
    return {"failurePolicy": "Fail", "matchConstraints": copy.deepcopy(POD_RULES), "variables": variables,
            "validations": validations}


def team_policy(name, team, meta, spec):
    """[ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding] named `name`, denying in `team`'s
    namespace; meta(name): the metadata tenants gives every object of the team."""
    policy = {"apiVersion": upstream.VAP_API_VERSION, "kind": "ValidatingAdmissionPolicy",
              "metadata": meta(name), "spec": spec}
    binding = {"apiVersion": upstream.VAP_API_VERSION, "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": meta(name),
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "matchResources": {
                            "matchPolicy": "Equivalent",
                            "namespaceSelector": {"matchLabels": {upstream.LABEL_NAMESPACE_NAME: team}}}}}
    return [policy, binding]
