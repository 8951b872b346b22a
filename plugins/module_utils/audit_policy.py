# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit.k8s.io/v1 Policy the platform ships for self-managed control planes (pure).

    policy = render(team_names)     # a dict; playbooks/audit_policy.yml writes it as YAML

kube-apiserver applies the first rule that matches a request, so the order is the policy:
1. secrets, configmaps and service-account tokens: Metadata only, everywhere. Who read or
   changed which secret stays on record; its content never reaches the log (a later rule
   at Request level would otherwise copy a created secret into it).
2. job submission in the team namespaces: create/update/patch/delete of pods and of the
   workload kinds that make pods (Jobs, CronJobs, Deployments, ... and the training-job
   CRDs of Kubeflow, JobSet, LeaderWorkerSet, Ray, KAI PodGroups) at Request level: the pod
   spec is in the log, so the image of every started container is on record.
   exec/attach/port-forward into team pods: Metadata.
3. admin actions on the platform's objects: writes of namespaces, quotas, LimitRanges,
   NetworkPolicies, RBAC, admission policies, queues and the GPU Operator's resources at
   RequestResponse (before and after are both on record).
4. noise: health and discovery URLs, events, leases, endpoints: None.
5. everything else: Metadata.
RequestReceived is omitted (ResponseComplete carries the same and the outcome).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

WRITE_VERBS = ["create", "update", "patch", "delete", "deletecollection"]

SECRET_RESOURCES = [{"group": "", "resources": ["secrets", "configmaps", "serviceaccounts/token"]},
                    {"group": "authentication.k8s.io", "resources": ["tokenreviews"]}]
WORKLOAD_RESOURCES = [
    {"group": "", "resources": ["pods", "pods/ephemeralcontainers", "replicationcontrollers"]},
    {"group": "batch", "resources": ["jobs", "cronjobs"]},
    {"group": "apps", "resources": ["deployments", "statefulsets", "replicasets", "daemonsets"]},
    {"group": "kubeflow.org"},
    {"group": "jobset.x-k8s.io"},
    {"group": "leaderworkerset.x-k8s.io"},
    {"group": "ray.io"},
    {"group": "scheduling.run.ai", "resources": ["podgroups"]},
]
POD_ACCESS = [{"group": "", "resources": ["pods/exec", "pods/attach", "pods/portforward", "pods/proxy"]}]
PLATFORM_RESOURCES = [
    {"group": "", "resources": ["namespaces", "resourcequotas", "limitranges", "serviceaccounts"]},
    {"group": "networking.k8s.io", "resources": ["networkpolicies"]},
    {"group": "rbac.authorization.k8s.io"},
    {"group": "admissionregistration.k8s.io"},
    {"group": "scheduling.run.ai", "resources": ["queues"]},
    {"group": "kueue.x-k8s.io"},
    {"group": "nvidia.com"},
    {"group": "monitoring.coreos.com"},
    {"group": "storage.k8s.io", "resources": ["storageclasses"]},
    {"group": "scheduling.k8s.io", "resources": ["priorityclasses"]},
]
NOISE_URLS = ["/healthz*", "/livez*", "/readyz*", "/version", "/openapi*", "/api", "/api/*", "/apis", "/apis/*"]
NOISE_RESOURCES = [{"group": "", "resources": ["events", "endpoints"]},
                   {"group": "events.k8s.io", "resources": ["events"]},
                   {"group": "coordination.k8s.io", "resources": ["leases"]},
                   {"group": "discovery.k8s.io", "resources": ["endpointslices"]}]


def render(team_names):
    """The Policy for these team namespaces (sorted, so the file only changes with the teams)."""
    teams = sorted(set(str(t) for t in team_names or []))
    rules = [{"level": "Metadata", "resources": SECRET_RESOURCES}]
    if teams:
        rules.append({"level": "Request", "verbs": list(WRITE_VERBS), "namespaces": teams,
                      "resources": WORKLOAD_RESOURCES})
        rules.append({"level": "Metadata", "namespaces": teams, "resources": POD_ACCESS})
    rules += [
        {"level": "RequestResponse", "verbs": list(WRITE_VERBS), "resources": PLATFORM_RESOURCES},
        {"level": "None", "nonResourceURLs": NOISE_URLS},
        {"level": "None", "resources": NOISE_RESOURCES},
        {"level": "Metadata"},
    ]
    # no shared sub-lists: YAML writers would turn them into anchors kube-apiserver's reader
    # accepts but people do not expect in a policy file
    return json.loads(json.dumps({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                  "omitStages": ["RequestReceived"], "rules": rules}))


def team_names(tenants):
    return [t["name"] for t in tenants or [] if isinstance(t, dict) and t.get("name")]
