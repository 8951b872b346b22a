# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The few Kubernetes calls the MIG workflow needs, on the kubernetes.core client.

Kept separate from mig_config.py so that the workflow can be unit-tested with
a fake of this class. Every method returns plain dicts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from kubernetes.client import CoreV1Api
    from kubernetes.client.rest import ApiException

    HAS_KUBERNETES = True
except ImportError:  # pragma: no cover - checked by AnsibleK8SModule
    HAS_KUBERNETES = False

from ansible_collections.skaffon.gpu_platform.plugins.module_utils import upstream

MERGE_PATCH = "application/merge-patch+json"
MIG_MANAGER_APP = upstream.MIG_MANAGER_APP
OPERATOR_SELECTOR = upstream.GPU_OPERATOR_COMPONENT_SELECTOR


def api_status(exc):
    """HTTP status of a kubernetes client exception (dynamic or typed), or None."""
    return getattr(exc, "status", None)


def _as_dict(obj):
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj
    return obj.to_dict()


class K8sMigApi(object):
    """Wraps kubernetes.core's K8SClient (`get_api_client(module)`)."""

    def __init__(self, k8s_client):
        # check mode never reaches the write methods: no server-side dry run needed
        self.dynamic = k8s_client.client
        self.core = CoreV1Api(self.dynamic.client)
        self._res = {}

    def _resource(self, api_version, kind):
        key = (api_version, kind)
        if key not in self._res:
            self._res[key] = self.dynamic.resources.get(api_version=api_version, kind=kind)
        return self._res[key]

    def _get(self, api_version, kind, name, namespace=None):
        try:
            return _as_dict(self._resource(api_version, kind).get(name=name, namespace=namespace))
        except Exception as exc:  # dynamic NotFoundError and friends
            if api_status(exc) == 404:
                return None
            raise

    def _list(self, api_version, kind, **params):
        result = _as_dict(self._resource(api_version, kind).get(**params))
        return result.get("items") or []

    # --- reads ------------------------------------------------------------------
    def node(self, name):
        return self._get("v1", "Node", name)

    def configmap(self, namespace, name):
        return self._get("v1", "ConfigMap", name, namespace)

    def cluster_policies(self):
        try:
            return self._list(upstream.CLUSTER_POLICY_API_VERSION, upstream.CLUSTER_POLICY_KIND)
        except Exception as exc:
            if api_status(exc) == 404 or type(exc).__name__ == "ResourceNotFoundError":
                return []
            raise

    def operator_deployment_namespaces(self):
        items = self._list("apps/v1", "Deployment", label_selector=OPERATOR_SELECTOR)
        return sorted(set(d["metadata"]["namespace"] for d in items))

    def pods_on_node(self, node):
        return self._list("v1", "Pod", field_selector="spec.nodeName=%s" % node)

    def node_events(self, node):
        try:
            items = self._list("v1", "Event", field_selector="involvedObject.kind=Node,involvedObject.name=%s" % node)
        except Exception as exc:
            if api_status(exc) != 400:
                raise
            items = self._list("v1", "Event")
        # filter again: field selectors on events are not supported everywhere
        return [e for e in items if (e.get("involvedObject") or {}).get("kind") == "Node"
                and (e.get("involvedObject") or {}).get("name") == node]

    def pod_log(self, namespace, name, container=None, tail_lines=40):
        try:
            return self.core.read_namespaced_pod_log(name, namespace, container=container, tail_lines=tail_lines)
        except ApiException as exc:
            return "(log not available: %s %s)" % (exc.status, exc.reason)

    # --- writes -----------------------------------------------------------------
    def patch_node(self, name, patch):
        return _as_dict(self._resource("v1", "Node").patch(body=patch, name=name, content_type=MERGE_PATCH))

    def evict(self, namespace, name):
        """policy/v1 Eviction: the API server applies PodDisruptionBudgets (429 when refused)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        self.core.create_namespaced_pod_eviction(name, namespace, body)

    # --- watches ------------------------------------------------------------------
    def watch_node(self, name, resource_version, timeout):
        """Yield (event type, node dict) after resource_version, for at most `timeout` s.
        Raises an exception with status 410 when the version expired."""
        for event in self._resource("v1", "Node").watch(name=name, resource_version=resource_version,
                                                        timeout=max(1, int(timeout))):
            yield event["type"], event["raw_object"]

    def watch_pods_on_node(self, node, resource_version, timeout):
        for event in self._resource("v1", "Pod").watch(field_selector="spec.nodeName=%s" % node,
                                                       resource_version=resource_version,
                                                       timeout=max(1, int(timeout))):
            yield event["type"], event["raw_object"]

    def pods_list_version(self, node):
        result = _as_dict(self._resource("v1", "Pod").get(field_selector="spec.nodeName=%s" % node))
        return result.get("items") or [], (result.get("metadata") or {}).get("resourceVersion")
