#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tenants_apply
short_description: Converge the namespaces, quotas, NetworkPolicies and RoleBindings of all teams at once
version_added: 0.1.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Renders every team of O(tenants) into a Namespace (Pod Security labels), a ResourceQuota, a LimitRange,
    NetworkPolicies (default deny in and out, same namespace, cluster DNS, listed namespaces and CIDRs) and
    RoleBindings of identity-provider groups to the C(admin), C(edit) and C(view) ClusterRoles.
  - Validates every team before anything is written; a problem names the team, the field, the value and the fix.
    Refused - names that are not DNS-1123 labels, duplicates, system namespaces (C(kube-*), C(default), the GPU
    Operator's and the queue backends'), extended resources in quota other than C(requests.*), quantities that do
    not parse, MIG resources no mig-parted profile of the cluster offers, C(privileged) Pod Security, GPU quotas
    above the cluster's GPUs (unless O(allow_overcommit)), invalid CIDRs and unknown keys. A team's C(queue) key
    is accepted and ignored (the queues role reads it).
  - Reads each kind once (Namespaces unfiltered, the others by the label
    C(app.kubernetes.io/managed-by=skaffon.gpu_platform)), compares desired and live (quantities as numbers,
    server defaults ignored) and writes only what differs - one request per object - in parallel
    (O(parallel) at a time). Drift (for example a quota edited by hand) is set back and reported.
  - With O(allocation_api=dra) each team also gets the ResourceClaimTemplates (C(resource.k8s.io/v1)) of its
    C(claim_templates) (C(gpus), C(mig_profile) or C(all_gpus), optionally C(product); default one whole GPU), checked
    against the DeviceClasses and ResourceSlices of the cluster and against the team's quota on claims as Kubernetes
    1.34 counts them (an C(All) claim is charged 32 devices). Quota keys on C(nvidia.com/gpu) are refused in that
    mode, claim quota keys and C(claim_templates) in the other.
  - Teams missing from O(tenants) are reported; their namespace is deleted only with O(prune), and a namespace
    that still runs pods only with O(force) as well. Objects without the managed-by label are never changed.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Computes the changes locally; no write request is sent (not even a dry run).
  diff_mode:
    support: full
    details: Before and after of each object that differs.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  tenants:
    description: The teams (the role's C(tenants_list)); see the role documentation for the keys.
    type: list
    elements: raw
    required: true
  prune:
    description: Delete the namespace of a managed team that is no longer listed.
    type: bool
    default: false
  force:
    description: With O(prune), delete such a namespace even when pods still run in it.
    type: bool
    default: false
  allow_overcommit:
    description: Accept GPU quotas whose sum exceeds the GPUs the cluster's nodes offer.
    type: bool
    default: false
  cluster_gpus:
    description: Number of GPUs to check the quotas against; default the sum of the nodes' allocatable C(nvidia.com/gpu).
    type: int
  mig_parted_config:
    description:
      - mig-parted config (text of C(config.yaml), or a ConfigMap) to check MIG quota resources against; default
        the ConfigMap C(default-mig-parted-config) in O(operator_namespace).
    type: raw
  operator_namespace:
    description: The GPU Operator's namespace (never a team's).
    type: str
    default: gpu-operator
  reserved_namespaces:
    description: More namespaces no team may take.
    type: list
    elements: str
    default: []
  default_pod_security:
    description: Pod Security level of teams without C(pod_security).
    type: str
    choices: [baseline, restricted]
    default: restricted
  pod_security_version:
    description: Value of the C(pod-security.kubernetes.io/*-version) labels (C(latest) or C(vX.Y)).
    type: str
    default: latest
  dns_namespace:
    description: Namespace of the cluster DNS pods the teams may reach on port 53.
    type: str
    default: kube-system
  dns_pod_labels:
    description: Labels of the cluster DNS pods (CoreDNS as installed by kubeadm).
    type: dict
    default: {k8s-app: kube-dns}
  common_labels:
    description: Labels put on every object of every team (team C(labels) win).
    type: dict
    default: {}
  allowed_registries:
    description:
      - Registry prefixes (host, optional port and path, e.g. C(registry.example:5000/mirror)) the images of a
        team's pods must start with; a team's C(images.registries) replaces the list for that team. Each team
        with a non-empty list gets a ValidatingAdmissionPolicy and binding C(skaffon-registries-<team>).
      - Empty - no registry policy (teams pull from anywhere).
    type: list
    elements: raw
    default: []
  gpu_access_policy:
    description:
      - Each team gets a ValidatingAdmissionPolicy and binding C(skaffon-gpu-access-<team>) that refuses pods
        setting C(NVIDIA_VISIBLE_DEVICES) (other than C(void)/C(none)), or C(NVIDIA_DRIVER_CAPABILITIES) or a
        hostPath C(/dev)/C(/dev/nvidia*) mount in a container without a GPU request (docs/security.md).
    type: bool
    default: true
  allocation_api:
    description:
      - How GPUs reach pods. C(device-plugin) - extended resources (C(nvidia.com/gpu), C(nvidia.com/mig-*)) counted by
        C(requests.*) quota keys. C(dra) - ResourceClaims (Kubernetes 1.34+, the NVIDIA DRA driver); each team
        gets the ResourceClaimTemplates of its C(claim_templates) (default one whole GPU, C(gpu)), its quota counts
        claims as Kubernetes does (C(<deviceclass>.deviceclass.resource.k8s.io/devices),
        C(count/resourceclaims.resource.k8s.io)) and quota keys on C(nvidia.com/gpu) are refused.
    type: str
    choices: [device-plugin, dra]
    default: device-plugin
  gpu_allocation:
    description:
      - What each team's pods get from the GPUs (team name to text, e.g. C(MIG slice 1g.10gb)), written as the
        annotation C(gpu-platform.skaffon.io/gpu-allocation) on the team's namespace; platform_design's
        C(roles.tenants_gpu_allocation). Teams not listed get no such annotation.
    type: dict
    default: {}
  parallel:
    description: Write requests in flight at once.
    type: int
    default: 8
requirements:
  - kubernetes >= 24.2.0
  - PyYAML
"""

EXAMPLES = r"""
- name: Onboard the teams
  skaffon.gpu_platform.tenants_apply:
    tenants:
      - name: team-a
        quota: {requests.nvidia.com/gpu: 8, requests.cpu: "64", requests.memory: 512Gi}
        limit_range:
          default: {cpu: "2", memory: 8Gi}
          default_request: {cpu: 500m, memory: 2Gi}
        pod_security: restricted
        groups: {admin: [idp-team-a-leads], edit: [idp-team-a], view: [idp-auditors]}
        network:
          egress_cidrs: [10.20.0.0/16]
          ingress_from_namespaces: [monitoring]
    prune: true

- name: Show what would change (nothing is written)
  skaffon.gpu_platform.tenants_apply:
    tenants: "{{ tenants_list }}"
  check_mode: true
  diff: true
"""

RETURN = r"""
summary:
  description: Per kind, how many objects were created, updated, unchanged, deleted (and namespaces pruned).
  returned: always
  type: dict
  sample: {Namespace: {created: 3, updated: 0, unchanged: 0, deleted: 0, pruned: 0}}
changes:
  description: Every object created, updated or deleted (in check mode - that would be).
  returned: always
  type: list
  elements: dict
  sample: [{action: created, object: Namespace team-a}]
drift:
  description: Existing objects that differed from the inventory, with the fields set back.
  returned: always
  type: list
  elements: dict
  sample: [{object: ResourceQuota team-a/tenant-quota, fields: [spec]}]
orphans:
  description: Managed teams missing from O(tenants) and what happened to them (kept, deleted, would_delete).
  returned: always
  type: list
  elements: dict
  sample: [{team: team-old, namespace: team-old, action: kept, reason: "2 pod(s) still run in it"}]
teams:
  description: Names of the teams converged.
  returned: always
  type: list
  elements: str
objects:
  description:
    - Every object and what happened to it - C(created), C(updated), C(unchanged) or C(deleted) (in check
      mode what would happen); the shape every converging module of the collection returns.
  returned: always
  type: list
  elements: dict
  sample: [{kind: Namespace, name: team-a, action: created}, {kind: ResourceQuota, name: tenant-quota, namespace: team-a, action: unchanged}]
requests:
  description: API requests sent, by verb (C(LIST), C(GET), C(CREATE), C(PATCH), C(APPLY), C(DELETE)).
  returned: always
  type: dict
  sample: {LIST: 7, CREATE: 21}
overrides:
  description: Quota values a quota change raised above the inventory, kept on the cluster (one note each).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import GpuPlatformModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.apply import TenantsApply


def argspec():
    return dict(
        tenants=dict(type="list", elements="raw", required=True),
        prune=dict(type="bool", default=False),
        force=dict(type="bool", default=False),
        allow_overcommit=dict(type="bool", default=False),
        cluster_gpus=dict(type="int"),
        mig_parted_config=dict(type="raw"),
        operator_namespace=dict(type="str", default="gpu-operator"),
        reserved_namespaces=dict(type="list", elements="str", default=[]),
        default_pod_security=dict(type="str", choices=["baseline", "restricted"], default="restricted"),
        pod_security_version=dict(type="str", default="latest"),
        dns_namespace=dict(type="str", default="kube-system"),
        dns_pod_labels=dict(type="dict", default={"k8s-app": "kube-dns"}),
        common_labels=dict(type="dict", default={}),
        allowed_registries=dict(type="list", elements="raw", default=[]),
        gpu_access_policy=dict(type="bool", default=True),
        allocation_api=dict(type="str", choices=["device-plugin", "dra"], default="device-plugin"),
        gpu_allocation=dict(type="dict", default={}),
        parallel=dict(type="int", default=8),
    )


def run(module):
    return TenantsApply(module.kube, module.params, check_mode=module.check_mode, diff=module._diff,
                        log=module.debug).run()


def main():
    GpuPlatformModule(argument_spec=argspec()).execute(run)


if __name__ == "__main__":
    main()
