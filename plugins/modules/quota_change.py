#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: quota_change
short_description: Change one quota of one team, with its queue, on record
version_added: 0.2.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - The body of the AWX quota job template (playbook C(skaffon.gpu_platform.quota_increase)).
  - Validates before any write - the team is one of ours (namespace labelled C(app.kubernetes.io/managed-by)),
    the key is a quota key that is enforced (C(requests.*) for extended resources), the value is an integer
    (as AWX's integer question sends it), the cluster has the capacity (unless O(allow_overcommit)), the
    queue backend's limits allow it, and a decrease below what the team uses now only with O(force).
  - Applies the ResourceQuota and the team's queue together - a parent queue is raised before its child and
    lowered after it; when a write fails the writes already done are undone and the message says so.
  - Records who, when, which ticket, old and new value as annotations on the ResourceQuota; the same value
    again writes nothing.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Validates the change and reports it; nothing is written.
  diff_mode:
    support: full
    details: The quota value before and after.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  team: {description: The team (its namespace)., type: str, required: true}
  resource:
    description: The quota key, for example C(requests.nvidia.com/gpu), C(requests.cpu) or C(requests.memory).
    type: str
    required: true
  value:
    description: The new value, an integer (GPUs or MIG slices; CPU cores; memory in GiB).
    type: raw
    required: true
  ticket: {description: The change ticket., type: str, required: true}
  force: {description: Allow a value below the current use (C(true)/C(false) or the strings)., type: raw, default: false}
  user: {description: Who asked (AWX's C(awx_user_name))., type: str}
  job_id: {description: The AWX job id., type: str}
  now: {description: The time recorded (ISO 8601)., type: str, required: true}
  allow_overcommit: {description: Allow GPU quotas that add up to more than the cluster offers., type: bool, default: false}
  cluster_gpus:
    description: GPUs to check C(requests.nvidia.com/gpu) quotas against (C(tenants_cluster_gpus)); default the nodes' allocatable.
    type: int
  queue_backend:
    description: The queue backend whose queue changes with the quota.
    type: str
    choices: [none, kai, kueue]
    default: none
  flavor:
    description: Kueue - the flavor (node pool) whose nominal quota changes, when the team's ClusterQueue has several for the resource.
    type: str
"""

EXAMPLES = r"""
- name: Raise team-a to 12 GPUs
  skaffon.gpu_platform.quota_change:
    team: team-a
    resource: requests.nvidia.com/gpu
    value: 12
    ticket: CHG-1234
    user: "{{ awx_user_name | default(omit) }}"
    now: "{{ now(utc=true).isoformat() }}"
"""

RETURN = r"""
before: {description: Quota value and use before., returned: always, type: dict}
after: {description: Quota value and use after., returned: always, type: dict}
plan: {description: The writes in the order they were (or would be) made., returned: changed, type: list, elements: str}
record: {description: The annotations written on the ResourceQuota., returned: changed, type: dict}
objects:
  description:
    - Every object and what happened to it - C(created), C(updated), C(unchanged) or C(deleted) (in check
      mode what would happen); the shape every converging module of the collection returns.
  returned: always
  type: list
  elements: dict
  sample: [{kind: Queue, name: team-a, action: updated}, {kind: ResourceQuota, name: tenant-quota, namespace: team-a, action: updated}]
requests:
  description: API requests sent, by verb (C(LIST), C(GET), C(CREATE), C(PATCH), C(APPLY), C(DELETE)).
  returned: always
  type: dict
  sample: {GET: 2, LIST: 1, PATCH: 2}
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import GpuPlatformModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.quota.change import QuotaChange
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.quota.queues import adapter


def argspec():
    return dict(
        team=dict(type="str", required=True), resource=dict(type="str", required=True),
        value=dict(type="raw", required=True), ticket=dict(type="str", required=True),
        force=dict(type="raw", default=False), user=dict(type="str"), job_id=dict(type="str"),
        now=dict(type="str", required=True), allow_overcommit=dict(type="bool", default=False),
        cluster_gpus=dict(type="int"),
        queue_backend=dict(type="str", choices=["none", "kai", "kueue"], default="none"),
        flavor=dict(type="str"),
    )


def run(module):
    p = module.params
    params = dict(team=p["team"], resource=p["resource"], value=p["value"], ticket=p["ticket"], force=p["force"],
                  user=p["user"], job_id=p["job_id"] or None, allow_overcommit=p["allow_overcommit"],
                  cluster_gpus=p["cluster_gpus"])
    change = QuotaChange(module.kube, params, check_mode=module.check_mode, now=p["now"],
                         queue=adapter(p["queue_backend"], module.kube, p["ticket"], p["now"], p["flavor"]))
    result = change.run()
    if module._diff and result.get("changed"):
        result["diff"] = {"before": {p["resource"]: result["before"]["value"]},
                          "after": {p["resource"]: result["after"]["value"]}}
    return result


def main():
    GpuPlatformModule(argument_spec=argspec(), supports_check_mode=True).execute(run)


if __name__ == "__main__":
    main()
