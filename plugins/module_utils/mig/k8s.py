# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The few Kubernetes calls the MIG workflow needs, on kube.Kube (errors are ApiError).

Kept separate from mig_config.py so that the workflow can be unit-tested with
a fake of this class. Every method returns plain dicts; the watches are
watch.ObjectWatch (resume, 410 re-list, transient errors).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import as_kube
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.watch import ObjectWatch

MIG_MANAGER_APP = upstream.MIG_MANAGER_APP
OPERATOR_SELECTOR = upstream.GPU_OPERATOR_COMPONENT_SELECTOR


def api_status(exc):
    """HTTP status of an ApiError (or a client exception), or None."""
    return getattr(exc, "status", None)


class K8sMigApi(object):
    """The MIG workflow's view of the cluster, on a kube.Kube (module.kube)."""

    def __init__(self, kube):
        self.kube = as_kube(kube)

    # --- reads ------------------------------------------------------------------
    def node(self, name):
        return self.kube.get("v1", "Node", name)

    def node_names(self):
        return [n["metadata"]["name"] for n in self.all_nodes()]

    def all_nodes(self):
        return self.kube.list("v1", "Node")[0]

    def configmaps_in(self, namespace):
        return self.kube.list("v1", "ConfigMap", namespace=namespace)[0]

    def configmap(self, namespace, name):
        return self.kube.get("v1", "ConfigMap", name, namespace)

    def cluster_policies(self):
        return self.kube.list_if_served(upstream.CLUSTER_POLICY_API_VERSION, upstream.CLUSTER_POLICY_KIND)[0]

    def operator_deployment_namespaces(self):
        items = self.kube.list("apps/v1", "Deployment", label_selector=OPERATOR_SELECTOR)[0]
        return sorted(set(d["metadata"]["namespace"] for d in items))

    def pods_on_node(self, node):
        return self.pods_list_version(node)[0]

    def pods_list_version(self, node):
        return self.kube.list("v1", "Pod", field_selector="spec.nodeName=%s" % node)

    def node_events(self, node):
        try:
            items = self.kube.list("v1", "Event",
                                   field_selector="involvedObject.kind=Node,involvedObject.name=%s" % node)[0]
        except ApiError as exc:
            if exc.status != 400:
                raise
            items = self.kube.list("v1", "Event")[0]
        # filter again: field selectors on events are not supported everywhere
        return [e for e in items if (e.get("involvedObject") or {}).get("kind") == "Node"
                and (e.get("involvedObject") or {}).get("name") == node]

    def pod_log(self, namespace, name, container=None, tail_lines=40):
        try:
            return self.kube.log(name, namespace, container, tail_lines=tail_lines)
        except ApiError as exc:
            return "(log not available: %s)" % exc

    # --- writes -----------------------------------------------------------------
    def patch_node(self, name, patch):
        return self.kube.patch("v1", "Node", name, patch)

    def evict(self, namespace, name):
        """policy/v1 Eviction: the API server applies PodDisruptionBudgets (429 when refused)."""
        self.kube.evict(name, namespace)

    # --- watches ------------------------------------------------------------------
    def watch_node(self, name, resource_version, timeout):
        """Yield (event type, node dict) after resource_version, for at most `timeout` s."""
        return self._follow("Node", resource_version, timeout, name=name)

    def watch_pods_on_node(self, node, resource_version, timeout):
        return self._follow("Pod", resource_version, timeout, field_selector="spec.nodeName=%s" % node)

    def _follow(self, kind, resource_version, timeout, **selectors):
        follow = ObjectWatch(self.kube, "v1", kind, **selectors)
        follow.resource_version = resource_version
        return follow.events(follow.clock() + timeout)
