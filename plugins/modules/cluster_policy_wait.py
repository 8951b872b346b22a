#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_policy_wait
short_description: Wait until the NVIDIA GPU Operator ClusterPolicy really serves GPUs
version_added: 0.1.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Watches the ClusterPolicy (resourceVersion-resumed watch, no polling) until C(status.state) is
    C(ready) B(and) the C(Ready) condition is C(True) with an accepted reason.
  - C(state=ready) with reason C(NoGPUNodes) or C(NFDLabelsMissing) serves no GPU at all; those reasons
    are accepted only when listed in O(accept_reasons).
  - Handles a ClusterPolicy that does not exist yet (waits for its creation).
  - On timeout fails with diagnostics - the Ready condition message (C(states not ready)), operand
    DaemonSets with unavailable counts, operand pods with their waiting reasons (for example the
    validator in C(Init:CrashLoopBackOff)) and hints for known causes.
  - Read-only. In check mode it reports the current state once and does not wait.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  name:
    description: Name of the ClusterPolicy.
    type: str
    default: cluster-policy
  timeout:
    description: Seconds to wait before failing with diagnostics.
    type: int
    default: 600
  stable_for:
    description:
      - Seconds the accepted state must hold before the wait succeeds (it fails again if the state
        drops within them).
      - Use it right after a Helm change - the status shows the previous reconcile until the operator
        has seen the new spec (the ClusterPolicy status has no C(observedGeneration)).
    type: int
    default: 0
  operator_namespace:
    description:
      - Namespace of the operator Deployment (label C(app=gpu-operator)); default - where the
        ClusterPolicy status says, or every namespace.
    type: str
  wait_operator:
    description:
      - First wait until the operator Deployment is rolled out. A new operator pod that cannot start
        (for example an image the mirror lacks) leaves the previous status in place, which would
        look ready.
    type: bool
    default: true
  accept_reasons:
    description:
      - Reasons of the C(Ready=True) condition that count as ready.
      - Add C(NoGPUNodes) or C(NFDLabelsMissing) only for clusters that may legitimately have no GPU yet.
    type: list
    elements: str
    default: [Reconciled]
    choices: [Reconciled, NoGPUNodes, NFDLabelsMissing]
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Wait for the GPU Operator to serve GPUs
  skaffon.gpu_platform.cluster_policy_wait:
    timeout: 900

- name: Wait after an upgrade; the ready state must hold 10 seconds
  skaffon.gpu_platform.cluster_policy_wait:
    stable_for: 10

- name: Accept a cluster without GPU nodes yet (CI, staging)
  skaffon.gpu_platform.cluster_policy_wait:
    accept_reasons: [Reconciled, NoGPUNodes]
    timeout: 120
"""

RETURN = r"""
ready:
  description: Whether the ClusterPolicy reached an accepted ready state.
  returned: always
  type: bool
state:
  description: C(status.state) last seen (C(null) when the object does not exist).
  returned: always
  type: str
  sample: ready
reason:
  description: Reason of the Ready condition last seen.
  returned: always
  type: str
  sample: Reconciled
status:
  description: The ClusterPolicy C(status) last seen.
  returned: always
  type: dict
waited:
  description: Seconds spent waiting.
  returned: always
  type: float
  sample: 3.2
diagnostics:
  description: Human-readable findings (set when not ready).
  returned: when not ready
  type: list
  elements: str
operands:
  description: Operand DaemonSets and pods in the operator namespace (set when not ready).
  returned: when not ready
  type: dict
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.cluster_policy import (
    READY_REASONS,
    ClusterPolicyWaiter,
    evaluate,
)

try:
    from kubernetes.dynamic.exceptions import ResourceNotFoundError
except ImportError:
    class ResourceNotFoundError(Exception):
        """Placeholder; AnsibleK8SModule reports the missing kubernetes library."""


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        name=dict(type="str", default="cluster-policy"),
        timeout=dict(type="int", default=600),
        stable_for=dict(type="int", default=0),
        operator_namespace=dict(type="str"),
        wait_operator=dict(type="bool", default=True),
        accept_reasons=dict(type="list", elements="str", default=["Reconciled"], choices=list(READY_REASONS)),
    )
    return spec


def run(module, client):
    params = module.params
    try:
        waiter = ClusterPolicyWaiter(client.client, params["name"], params["accept_reasons"],
                                     operator_namespace=params["operator_namespace"],
                                     check_operator=params["wait_operator"])
    except ResourceNotFoundError:
        if module.check_mode:
            # A check-mode install has not created the CRD: nothing to wait for yet.
            module.exit_json(changed=False, ready=False, state=None, reason=None, status={}, waited=0.0,
                             msg="ClusterPolicy CRD not installed yet (check mode)")
        module.fail_json(msg="The ClusterPolicy CRD (clusterpolicies.nvidia.com) is not installed: "
                             "install the GPU Operator chart before waiting on it", ready=False)
    if module.check_mode:
        obj = waiter.current()
        done, summary = evaluate(obj, params["accept_reasons"])
        module.exit_json(changed=False, ready=done, state=summary["state"], reason=summary["reason"],
                         status=(obj or {}).get("status") or {}, waited=0.0)
    done, obj, summary, waited = waiter.wait(params["timeout"], params["stable_for"])
    result = dict(changed=False, ready=done, state=summary["state"], reason=summary["reason"],
                  status=(obj or {}).get("status") or {}, waited=waited)
    if done:
        module.exit_json(**result)
    lines, operands = waiter.diagnostics(obj, summary)
    result.update(diagnostics=lines, operands=operands)
    msg = "ClusterPolicy %s not ready after %ss: %s" % (params["name"], params["timeout"], " | ".join(lines))
    module.fail_json(msg=msg, **result)


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    for name in ("timeout", "stable_for"):
        if module.params[name] < 0:
            module.fail_json(msg="%s must be >= 0 seconds, got %s" % (name, module.params[name]))
    try:
        client = get_api_client(module)
        run(module, client)
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
