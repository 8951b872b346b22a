#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: acceptance_checks
short_description: Run the GPU platform's hand-over checks against a cluster
version_added: 0.2.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Runs the hand-over checks by their fixed ids (C(operator-healthy), C(gpus-visible), C(cuda-test),
    C(wrong-node-excluded), C(quota-enforced), C(sharing-verified), C(queues-fair), C(monitoring-alert),
    C(update-rehearsed), C(tenant-isolation), C(registry-policy), C(audit-trail), C(runbooks)) in one run
    and returns PASS, FAIL or SKIP with the evidence of each.
  - A failing check does not fail the module; the protocol is written first (role C(acceptance)).
  - Test pods run in O(test_namespace) (created with Pod Security C(restricted) when missing) and are removed
    afterwards, also when a check fails; the namespace is removed when this module created it.
  - In check mode nothing is created; checks that need a test pod report SKIP.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Nothing is created; the checks that need a test pod report SKIP, the others run (they only read).
  diff_mode:
    support: none
    details: The checks change nothing that a diff could show.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  checks:
    description: Ids of the checks to run (protocol order is kept).
    type: list
    elements: str
    default: [operator-healthy, gpus-visible, cuda-test, wrong-node-excluded, quota-enforced, sharing-verified,
              queues-fair, monitoring-alert, update-rehearsed, tenant-isolation, registry-policy, audit-trail,
              gpu-access-by-request, runbooks]
  operator_namespace:
    description: Namespace of the GPU Operator.
    type: str
    default: gpu-operator
  operator_release:
    description: Helm release name of the GPU Operator (its history proves the upgrade rehearsal).
    type: str
    default: gpu-operator
  cluster_policy:
    description: Name of the ClusterPolicy.
    type: str
    default: cluster-policy
  gpu_nodes:
    description:
      - The GPU nodes of the inventory and their configured sharing mode.
    type: list
    elements: dict
    default: []
    suboptions:
      name: {description: Kubernetes node name., type: str, required: true}
      mode: {description: Sharing mode., type: str, choices: [exclusive, time-slicing, mps, mig], default: exclusive}
      replicas: {description: Time-slicing or MPS replicas per GPU., type: int}
      resource: {description: "The resource an MPS node advertises: C(nvidia.com/gpu), or C(nvidia.com/gpu.shared) when renamed.", type: str}
      mig_config: {description: The MIG config name (nvidia.com/mig.config) the node must have., type: str}
      gpu_count: {description: Physical GPUs the host reported (gpu_node_facts)., type: int}
      pool: {description: "The node's pool (its node_prereqs_pool label values joined, as roles/queues names it).", type: str}
  fraction_probes:
    description:
      - Per pool that takes KAI GPU fractions (C(queues_kai_fraction_pools)), the team whose queue C(sharing-verified)
        submits two pods of C(gpu-fraction 0.5) through; both must share one GPU of one node (one C(runai-gpu-group),
        one reservation pod). Empty - fractions are not in use and not probed. Not probed in check mode.
    type: list
    elements: dict
    default: []
    suboptions:
      team: {description: The team (namespace and KAI queue); none when no team's queue is on the pool., type: str}
      pool: {description: The pool., type: str}
      nodes: {description: The pool's Kubernetes node names., type: list, elements: str, default: []}
      node_selector: {description: The pool's node labels., type: dict, default: {}}
      tolerations: {description: Tolerations of the pool's taints., type: list, elements: dict, default: []}
      problem: {description: Why the team of a fraction pool could not be found (the check fails with it)., type: str}
  test_namespace:
    description: Namespace for the test pods.
    type: str
    default: gpu-acceptance
  cuda_image:
    description: The CUDA vectorAdd sample image (point it at the mirror on air-gapped sites).
    type: str
    default: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
  probe_image:
    description: The agnhost image of the network probes (C(connect), C(netexec)).
    type: str
    default: registry.k8s.io/e2e-test-images/agnhost:2.53
  tolerations:
    description: Tolerations the test pods need to reach the GPU pools (the pools' taints).
    type: list
    elements: dict
    default: []
  pod_timeout:
    description: Seconds a test pod may take.
    type: int
    default: 180
  quota_team:
    description: A team namespace and the quota key to test (C(requests.nvidia.com/gpu)).
    type: dict
    suboptions:
      namespace: {description: The team namespace., type: str, required: true}
      resource: {description: The quota key., type: str, default: requests.nvidia.com/gpu}
  teams:
    description: Names of the teams (namespaces).
    type: list
    elements: str
    default: []
  queue_teams:
    description:
      - The teams that have a queue (a C(queue) block in C(tenants_list)); C(queues-fair) picks two of them, in this
        order. Default - every team of O(teams).
      - Fewer than two - C(queues-fair) reports SKIP.
    type: list
    elements: str
  queue_backend:
    description: The queue backend of the site.
    type: str
    choices: [none, kai, kueue]
    default: none
  prometheus_url:
    description: Prometheus HTTP API base URL for the monitoring check.
    type: str
  failure_alert:
    description: The alert a GPU that fell off the bus (Xid 79) must fire.
    type: str
    default: GpuXidFatal
  alert_timeout:
    description: Seconds the alert may take to fire (scrape interval plus rule evaluation).
    type: int
    default: 180
  upgrade_records:
    description: The records the upgrade and rollback playbooks wrote (action, result, versions, date).
    type: list
    elements: dict
    default: []
  upgrade_record_file:
    description: Where those records come from (named in the evidence).
    type: str
  runbooks_dir:
    description: Directory holding the runbooks (C(docs/runbooks) of the collection).
    type: path
  alert_runbook_links:
    description: Alert name to C(runbook_url); default - read from the installed PrometheusRules of this collection.
    type: dict
  registry_policy:
    description:
      - The team namespaces with a registry policy (role C(tenants)), for C(registry-policy). Empty - SKIP.
    type: list
    elements: dict
    default: []
    suboptions:
      namespace: {description: The team namespace., type: str, required: true}
      registries: {description: Its allowed registry prefixes., type: list, elements: str, default: []}
      require_digest: {description: Only images pinned by digest., type: bool, default: false}
  audit_log:
    description:
      - The API server's audit log for C(audit-trail) - a file on the control node (a copy of kube-apiserver's
        C(--audit-log-path)) or an http(s) URL serving its JSON lines. Unset - SKIP.
    type: str
  audit_log_validate_certs:
    description: Verify the TLS certificate of an https O(audit_log).
    type: bool
    default: true
  allocation_api:
    description:
      - How GPUs reach pods on this site. C(dra) - C(gpus-visible) reads the DRA driver's ResourceSlices per node,
        C(cuda-test) runs vectorAdd with a claim from a ResourceClaimTemplate, C(wrong-node-excluded) pins a claim
        for a MIG profile to a node whose slices lack it, C(quota-enforced) asks a claim over the team's quota on
        its device class (O(quota_team) C(resource) C(<class>.deviceclass.resource.k8s.io/devices)).
    type: str
    choices: [device-plugin, dra]
    default: device-plugin
"""

EXAMPLES = r"""
- name: Run every hand-over check
  skaffon.gpu_platform.acceptance_checks:
    gpu_nodes:
      - {name: gpu-h100-1, mode: mig, mig_config: all-1g.10gb}
      - {name: gpu-l40s-1, mode: time-slicing, replicas: 4}
    quota_team: {namespace: team-a}
    runbooks_dir: "{{ role_path }}/../../docs/runbooks"
  register: acceptance
"""

RETURN = r"""
results:
  description: One entry per check, in protocol order.
  returned: always
  type: list
  elements: dict
  contains:
    id: {description: The check id., type: str, returned: always}
    title: {description: What it checks., type: str, returned: always}
    status: {description: One of PASS FAIL SKIP., type: str, returned: always}
    summary: {description: One line verdict., type: str, returned: always}
    evidence: {description: What was seen., type: list, elements: str, returned: always}
    seconds: {description: Time taken., type: float, returned: always}
kubernetes_version:
  description: The API server's version (for the protocol).
  returned: always
  type: str
failed_checks:
  description: Ids of the checks that failed.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import runner as acceptance
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.checks import CHECKS
# imported for their @check functions (gpu-access-by-request; registry-policy, audit-trail), which fill CHECKS
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import gpu_access as acceptance_gpu_access  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import policies as acceptance_policies  # noqa: F401 pylint: disable=unused-import
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import GpuPlatformModule

NEEDS_POD = ("cuda-test", "wrong-node-excluded", "tenant-isolation", "queues-fair", "monitoring-alert",
             "audit-trail")
NEEDS_POD += ("gpu-access-by-request",)


def argspec():
    node = dict(name=dict(type="str", required=True),
                mode=dict(type="str", choices=["exclusive", "time-slicing", "mps", "mig"], default="exclusive"),
                replicas=dict(type="int"), mig_config=dict(type="str"), gpu_count=dict(type="int"),
                resource=dict(type="str"), pool=dict(type="str"))
    fraction = dict(team=dict(type="str"), pool=dict(type="str"), nodes=dict(type="list", elements="str", default=[]),
                    node_selector=dict(type="dict", default={}),
                    tolerations=dict(type="list", elements="dict", default=[]), problem=dict(type="str"))
    return dict(
        checks=dict(type="list", elements="str", default=list(acceptance.CHECK_IDS)),
        operator_namespace=dict(type="str", default="gpu-operator"),
        cluster_policy=dict(type="str", default="cluster-policy"),
        operator_release=dict(type="str", default="gpu-operator"),
        gpu_nodes=dict(type="list", elements="dict", default=[], options=node),
        fraction_probes=dict(type="list", elements="dict", default=[], options=fraction),
        test_namespace=dict(type="str", default="gpu-acceptance"),
        cuda_image=dict(type="str", default="nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"),
        tolerations=dict(type="list", elements="dict", default=[]),
        probe_image=dict(type="str", default="registry.k8s.io/e2e-test-images/agnhost:2.53"),
        pod_timeout=dict(type="int", default=180),
        quota_team=dict(type="dict", options=dict(namespace=dict(type="str", required=True),
                                                  resource=dict(type="str", default="requests.nvidia.com/gpu"))),
        teams=dict(type="list", elements="str", default=[]),
        queue_teams=dict(type="list", elements="str"),
        queue_backend=dict(type="str", choices=["none", "kai", "kueue"], default="none"),
        prometheus_url=dict(type="str"),
        failure_alert=dict(type="str", default="GpuXidFatal"),
        alert_timeout=dict(type="int", default=180),
        upgrade_records=dict(type="list", elements="dict", default=[]),
        upgrade_record_file=dict(type="str"),
        runbooks_dir=dict(type="path"),
        alert_runbook_links=dict(type="dict"),
        registry_policy=dict(type="list", elements="dict", default=[], options=dict(
            namespace=dict(type="str", required=True), registries=dict(type="list", elements="str", default=[]),
            require_digest=dict(type="bool", default=False))),
        audit_log=dict(type="str"),
        allocation_api=dict(type="str", choices=["device-plugin", "dra"], default="device-plugin"),
        audit_log_validate_certs=dict(type="bool", default=True),
    )


def run(module):
    ids = module.params["checks"]
    acceptance.validate_ids(ids)
    skipped = []
    if module.check_mode:
        skipped = [i for i in ids if i in NEEDS_POD]
        ids = [i for i in ids if i not in NEEDS_POD]
        # sharing-verified still reads the nodes; its fraction probe pods are not created
        module.params["fraction_probes"] = []
    ctx = acceptance.Context(module.kube, module.params)
    results = [r.to_dict() for r in acceptance.run(ctx, ids, CHECKS)]
    for check_id in skipped:
        results.append(acceptance.Result(check_id, acceptance.SKIP, "check mode: no test pod is created").to_dict())
    order = {check_id: n for n, check_id in enumerate(acceptance.CHECK_IDS)}
    results.sort(key=lambda r: order[r["id"]])
    try:
        version = module.kube.dynamic.version["kubernetes"]["gitVersion"]
    except Exception:  # the version is only shown in the protocol
        version = ""
    return dict(changed=False, results=results, kubernetes_version=version,
                failed_checks=[r["id"] for r in results if r["status"] == acceptance.FAIL])


def main():
    GpuPlatformModule(argument_spec=argspec(), supports_check_mode=True).execute(run)


if __name__ == "__main__":
    main()
