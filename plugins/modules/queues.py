#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: queues
short_description: Converge the teams' KAI Scheduler or Kueue queue objects
version_added: 0.2.0
author: skaffon.gpu_platform contributors (@skaffon)
description:
  - Applies the objects rendered by the P(skaffon.gpu_platform.queue_objects#filter) filter (KAI C(Queue)s, or
    Kueue C(ResourceFlavor)s, C(ClusterQueue)s and C(LocalQueue)s, plus the queue-owner
    C(ValidatingAdmissionPolicy) and its binding).
  - Refuses before any write when the cluster does not serve a kind (the chosen backend is not installed).
  - One LIST per kind; an object whose rendered fields are all present is left alone (second run
    C(changed=false)); a changed one is written with server-side apply (field manager
    C(skaffon.gpu_platform.queues)), so a field no longer rendered is removed.
  - Objects of teams no longer listed are not deleted (a Kueue ClusterQueue or KAI Queue may still hold
    running work).
  - In check mode the writes are server-side dry runs; C(--diff) shows each changed object.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: The queue objects and the admission policy are written as server-side dry runs.
  diff_mode:
    support: full
    details: Before and after of each queue object that changes.
  platform:
    platforms: posix
  action_group:
    membership: [skaffon.gpu_platform.k8s]
options:
  backend:
    description: The queue backend the objects belong to (named in messages).
    type: str
    required: true
    choices: [kai, kueue]
  objects:
    description: Objects in apply order, as the P(skaffon.gpu_platform.queue_objects#filter) filter returns them.
    type: list
    elements: dict
    required: true
  allow_quota_decrease:
    description:
      - Lower a KAI gpu quota or limit, or a Kueue nominal quota, below what the queue uses now
        (KAI C(status.allocated), Kueue C(status.flavorsUsage)).
      - Without it such a change is refused before any write - neither backend evicts running work, so the
        queue would stay over its quota until the work ends.
    type: bool
    default: false
  allow_missing_kinds:
    description:
      - Report objects of kinds the cluster does not serve yet as to be created instead of failing.
      - For check mode before the backend's chart is installed; never writes them.
    type: bool
    default: false
requirements:
  - kubernetes >= 24.2.0
"""

EXAMPLES = r"""
- name: Apply the queues of every team
  skaffon.gpu_platform.queues:
    backend: kai
    objects: "{{ tenants_list | skaffon.gpu_platform.queue_objects(backend='kai', departments=queues_departments) }}"
"""

RETURN = r"""
objects:
  description:
    - Every object and what happened to it - C(created), C(updated), C(unchanged) or C(deleted) (in check
      mode what would happen); the shape every converging module of the collection returns.
  returned: always
  type: list
  elements: dict
  sample: [{kind: Queue, name: team-a, action: created}]
requests:
  description: API requests sent, by verb (C(LIST), C(GET), C(CREATE), C(PATCH), C(APPLY), C(DELETE)).
  returned: always
  type: dict
  sample: {LIST: 1, APPLY: 1}
overrides:
  description: Queue values a quota change raised above the inventory, kept on the cluster (one note each).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.module_base import GpuPlatformModule
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues.apply import converge


def argspec():
    return dict(
        backend=dict(type="str", required=True, choices=["kai", "kueue"]),
        objects=dict(type="list", elements="dict", required=True),
        allow_quota_decrease=dict(type="bool", default=False),
        allow_missing_kinds=dict(type="bool", default=False),
    )


def run(module):
    params = module.params
    return converge(module.kube, params["backend"], params["objects"], module.check_mode,
                    params["allow_missing_kinds"] and module.check_mode, params["allow_quota_decrease"],
                    diff=module._diff)


def main():
    module = GpuPlatformModule(argument_spec=argspec())
    module.execute(run)


if __name__ == "__main__":
    main()
