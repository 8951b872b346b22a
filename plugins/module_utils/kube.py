# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes access for the collection's modules, on kubernetes.core's client.

Every call returns plain dicts and raises only ApiError (errors.py), whatever the
client raised: dynamic-client exceptions, ApiException, urllib3 connection and
timeout errors, discovery misses. Reads are retried for a bounded time on 429
(honouring Retry-After), 5xx and lost connections; writes only when the server
cannot have acted (429, connection refused), never blindly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.errors import STATUS_HINTS, ApiError

try:
    from kubernetes.dynamic.exceptions import ResourceNotFoundError
except ImportError:  # pragma: no cover - AnsibleK8SModule reports the missing library
    class ResourceNotFoundError(Exception):
        pass

DRY_RUN_ALL = "All"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
READ_VERBS = ("GET", "LIST", "WATCH")


def as_dict(obj):
    if obj is None or isinstance(obj, dict):
        return obj
    return obj.to_dict()


def _server_message(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if body:
        try:
            return json.loads(body).get("message") or body
        except (ValueError, AttributeError):
            return str(body)
    return str(getattr(exc, "summary", lambda: "")() or exc)


def _retry_after(exc):
    headers = getattr(exc, "headers", None) or {}
    try:
        value = headers.get("Retry-After") if hasattr(headers, "get") else None
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _connection_refused(exc):
    text = "%s %r" % (type(exc).__name__, exc)
    return "NewConnectionError" in text or "Connection refused" in text


def _transport(exc, verb):
    """(message, hint) for a failure below HTTP: refused, timed out, dropped."""
    cause = getattr(exc, "reason", None)   # urllib3 MaxRetryError wraps the real one
    inner = cause if isinstance(cause, Exception) else exc
    text = "%s %s" % (type(inner).__name__, inner)
    if _connection_refused(exc):
        return ("connection refused",
                "is the API server running, and does the kubeconfig (server, context) point at it?")
    if "Timeout" in text or "timed out" in text:
        message, hint = "no answer in time (%s)" % _short(text), "the API server is overloaded or unreachable"
    elif "Name or service not known" in text or "nodename nor servname" in text or "resolve" in text:
        return "%s" % _short(text), "the API server's host name does not resolve: check the kubeconfig"
    else:
        message, hint = "connection lost (%s)" % _short(text), "the API server closed the connection (restarting?)"
    if verb not in READ_VERBS:
        hint += "; the change may have been applied before the connection was lost: re-run the task, it reads first"
    return message, hint


def _short(text):
    text = " ".join(str(text).split())
    # drop urllib3's object reprs: "<urllib3.connection.HTTPConnection object at 0x..>: "
    while "<" in text and ">: " in text:
        start = text.index("<")
        end = text.index(">: ", start) + 3
        text = text[:start] + text[end:]
    return text[:300]


def plural(kind):
    low = kind.lower()
    if low.endswith("y"):
        return low[:-1] + "ies"
    if low.endswith(("s", "x")):
        return low + "es"
    return low + "s"


def rbac_resource(kind):
    """"Pod log" -> pods/log, "Node" -> nodes (the resource an RBAC rule names)."""
    base, _sep, sub = kind.partition(" ")
    return plural(base) + ("/" + sub.lower() if sub else "")


def forbidden_hint(verb, kind, namespace):
    rbac_verb = {"GET": "get", "LIST": "list", "WATCH": "watch", "CREATE": "create", "PATCH": "patch",
                 "APPLY": "patch", "REPLACE": "update", "DELETE": "delete"}.get(verb, verb.lower())
    scope = ("in namespace %s (a Role)" % namespace) if namespace else "cluster-wide (a ClusterRole)"
    return "the credentials lack RBAC verb '%s' on %s %s" % (rbac_verb, rbac_resource(kind), scope)


class Kube(object):
    """Wraps kubernetes.core's K8SClient (`get_api_client(module)`)."""

    def __init__(self, k8s_client, retry_seconds=30.0, sleep=time.sleep, clock=time.monotonic):
        self.k8s = k8s_client
        self.dynamic = k8s_client.client
        self.retry_seconds = retry_seconds
        self._sleep = sleep
        self._clock = clock
        self._resources = {}
        configuration = getattr(k8s_client, "configuration", None)
        self.url = getattr(configuration, "host", None)

    # -- errors and retries ------------------------------------------------------
    def error(self, exc, verb, kind, name=None, namespace=None):
        if isinstance(exc, ApiError):
            return exc
        if isinstance(exc, ResourceNotFoundError):
            return ApiError(verb, kind, name, namespace, status=404, reason="Not Found",
                            message="the API server does not serve this kind",
                            hint="its CRD is not installed (or the apiVersion is wrong)", url=self.url)
        status = getattr(exc, "status", None)
        if isinstance(status, int) and status > 0:
            hint = forbidden_hint(verb, kind, namespace) if status == 403 else STATUS_HINTS.get(status)
            if status >= 500 and status not in STATUS_HINTS:
                hint = STATUS_HINTS[500]
            return ApiError(verb, kind, name, namespace, status=status, reason=getattr(exc, "reason", None),
                            message=_server_message(exc), hint=hint, url=self.url)
        message, hint = _transport(exc, verb)
        return ApiError(verb, kind, name, namespace, status=None, message=message, hint=hint, url=self.url)

    def call(self, verb, kind, name, namespace, fn, retry=True):
        """Run fn(); translate every failure, retrying where that is safe (never when retry=False)."""
        deadline = self._clock() + self.retry_seconds
        delay = 0.5
        while True:
            try:
                return fn()
            except Exception as exc:  # every client failure becomes an ApiError
                err = self.error(exc, verb, kind, name, namespace)
                retriable = err.status == 429 or (
                    verb in READ_VERBS and (err.status is None or err.status >= 500)) or (
                    err.status is None and _connection_refused(exc))
                wait = _retry_after(exc) if err.status == 429 else None
                wait = delay if wait is None else wait
                if not retry or not retriable or self._clock() + wait > deadline:
                    raise err
                self._sleep(wait)
                delay = min(delay * 2, 4.0)

    def resource(self, api_version, kind):
        key = (api_version, kind)
        if key not in self._resources:
            self._resources[key] = self.call(
                "GET", kind, None, None, lambda: self.dynamic.resources.get(api_version=api_version, kind=kind))
        return self._resources[key]

    def served(self, api_version, kind):
        """True when the API server serves the kind (its CRD is installed)."""
        try:
            self.resource(api_version, kind)
            return True
        except ApiError as err:
            if err.status == 404:
                return False
            raise

    # -- reads -------------------------------------------------------------------
    def get(self, api_version, kind, name, namespace=None):
        """The object as a dict, or None when it does not exist."""
        res = self.resource(api_version, kind)
        try:
            return as_dict(self.call("GET", kind, name, namespace,
                                     lambda: res.get(name=name, namespace=namespace)))
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        """(items, resourceVersion) of one LIST call."""
        res = self.resource(api_version, kind)
        params = dict(namespace=namespace)
        if label_selector:
            params["label_selector"] = label_selector
        if field_selector:
            params["field_selector"] = field_selector
        result = as_dict(self.call("LIST", kind, None, namespace, lambda: res.get(**params)))
        return result.get("items") or [], (result.get("metadata") or {}).get("resourceVersion")

    def log(self, name, namespace, container=None, tail_lines=None):
        """Text of a pod's container log (GET pods/log)."""
        core = self._core()
        kwargs = dict((k, v) for k, v in (("container", container), ("tail_lines", tail_lines)) if v)
        return self.call("GET", "Pod log", name, namespace,
                         lambda: core.read_namespaced_pod_log(name, namespace, **kwargs))

    def _core(self):
        from kubernetes.client import CoreV1Api  # the module base guards the import
        return CoreV1Api(self.dynamic.client)

    # -- writes ------------------------------------------------------------------
    def evict(self, name, namespace, dry_run=False):
        """policy/v1 Eviction. Not retried here: 429 means a PodDisruptionBudget refuses it now,
        which the caller decides about (kubectl drain retries it)."""
        core = self._core()
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        if dry_run:
            body["deleteOptions"] = {"dryRun": [DRY_RUN_ALL]}
        return self.call("CREATE", "Pod eviction", name, namespace,
                         lambda: core.create_namespaced_pod_eviction(name, namespace, body), retry=False)

    @staticmethod
    def _dry(params, dry_run):
        if dry_run:
            params["dry_run"] = DRY_RUN_ALL
        return params

    def create(self, body, dry_run=False):
        meta = body.get("metadata") or {}
        res = self.resource(body["apiVersion"], body["kind"])
        return as_dict(self.call("CREATE", body["kind"], meta.get("name"), meta.get("namespace"),
                                 lambda: res.create(body=body, **self._dry(
                                     dict(namespace=meta.get("namespace")), dry_run))))

    def replace(self, body, dry_run=False):
        meta = body.get("metadata") or {}
        res = self.resource(body["apiVersion"], body["kind"])
        return as_dict(self.call("REPLACE", body["kind"], meta.get("name"), meta.get("namespace"),
                                 lambda: res.replace(body=body, **self._dry(
                                     dict(namespace=meta.get("namespace")), dry_run))))

    def patch(self, api_version, kind, name, patch, namespace=None, content_type=MERGE_PATCH, dry_run=False):
        res = self.resource(api_version, kind)
        return as_dict(self.call("PATCH", kind, name, namespace,
                                 lambda: res.patch(body=patch, name=name, content_type=content_type,
                                                   **self._dry(dict(namespace=namespace), dry_run))))

    def apply(self, body, field_manager, force=True, dry_run=False):
        """Server-side apply of one object."""
        meta = body.get("metadata") or {}
        res = self.resource(body["apiVersion"], body["kind"])
        return as_dict(self.call("APPLY", body["kind"], meta.get("name"), meta.get("namespace"),
                                 lambda: res.server_side_apply(body=body, name=meta.get("name"),
                                                               namespace=meta.get("namespace"),
                                                               field_manager=field_manager, force_conflicts=force,
                                                               **self._dry({}, dry_run))))

    def delete(self, api_version, kind, name, namespace=None, propagation="Background", dry_run=False):
        """Delete; None when it was already gone."""
        res = self.resource(api_version, kind)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        try:
            return as_dict(self.call("DELETE", kind, name, namespace,
                                     lambda: res.delete(name=name, namespace=namespace, body=body,
                                                        **self._dry({}, dry_run))))
        except ApiError as err:
            if err.status == 404:
                return None
            raise
