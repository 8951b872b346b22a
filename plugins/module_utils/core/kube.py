# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes access for the collection's modules, on kubernetes.core's client.

Every call returns plain dicts and raises only ApiError (errors.py), whatever the
client raised: dynamic-client exceptions, ApiException, urllib3 connection and
timeout errors, discovery misses. Reads are retried for a bounded time on 429
(honouring Retry-After), 5xx and lost connections; writes only when the server
cannot have acted (429, connection refused), never blindly. connect() makes the Kube of a
module; a client that cannot be made is a ClientError (an ApiError) naming server, context,
kubeconfig, the cause and the option to set.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import ssl
import time

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import STATUS_HINTS, ApiError, ClientError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kubeconfig import (
    PATH_SEPARATOR,
    SET_CONTEXT,
    SET_CREDENTIALS,
    SET_KUBECONFIG,
    short,
)

try:
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ResourceNotFoundError
except ImportError:  # pragma: no cover - AnsibleK8SModule reports the missing library
    DynamicClient = None

    class ResourceNotFoundError(Exception):
        pass

DRY_RUN_ALL = "All"
MERGE_PATCH = "application/merge-patch+json"
READ_VERBS = ("GET", "LIST", "WATCH")
WRITE_5XX_HINT = ("the API server failed; a write is not retried blindly (it may have been applied): "
                  "re-run the task, it reads the current state first")


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


def retry_after(exc):
    """Seconds of a 429's Retry-After header, or None."""
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
        message, hint = "no answer in time (%s)" % short(text), "the API server is overloaded or unreachable"
    elif "Name or service not known" in text or "nodename nor servname" in text or "resolve" in text:
        return "%s" % short(text), "the API server's host name does not resolve: check the kubeconfig"
    else:
        message, hint = "connection lost (%s)" % short(text), "the API server closed the connection (restarting?)"
    if verb not in READ_VERBS:
        hint += "; the change may have been applied before the connection was lost: re-run the task, it reads first"
    return message, hint


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


def forbidden_hint(verb, kind, namespace, message=""):
    """A 403 is the authorizer's (RBAC) unless the message is the ResourceQuota or Pod Security
    admission plugin's: they answer 403 too, and the fix is then not a Role."""
    if "exceeded quota" in message or "failed quota" in message:
        return ("the namespace's ResourceQuota refused it: raise the quota, lower the request, or give the "
                "pod the requests the quota counts (a LimitRange default supplies missing ones)")
    if "violates PodSecurity" in message:
        return "the namespace's Pod Security level refuses this pod spec (see the message for the fields)"
    rbac_verb = {"GET": "get", "LIST": "list", "WATCH": "watch", "CREATE": "create", "PATCH": "patch",
                 "APPLY": "patch", "DELETE": "delete"}.get(verb, verb.lower())
    scope = ("in namespace %s (a Role)" % namespace) if namespace else "cluster-wide (a ClusterRole)"
    return "the credentials lack RBAC verb '%s' on %s %s" % (rbac_verb, rbac_resource(kind), scope)


def as_kube(client):
    """A Kube for a DynamicClient or kubernetes.core's K8SClient; a Kube (or a test fake) as it is."""
    if DynamicClient is not None and (isinstance(client, DynamicClient)
                                      or isinstance(getattr(client, "client", None), DynamicClient)):
        return Kube(client)
    return client


class Kube(object):
    """Wraps kubernetes.core's K8SClient (`get_api_client(module)`)."""

    def __init__(self, k8s_client, retry_seconds=30.0, sleep=time.sleep, clock=time.monotonic,
                 request_timeout=(10, 60)):
        self.k8s = k8s_client
        # kubernetes.core's K8SClient, or a plain DynamicClient (tests, scripts)
        is_dynamic = DynamicClient is not None and isinstance(k8s_client, DynamicClient)
        self.dynamic = k8s_client if is_dynamic else k8s_client.client
        self.retry_seconds = retry_seconds
        self.request_timeout = request_timeout   # (connect, read) seconds: a hung server is an error too
        self._sleep = sleep
        self._clock = clock
        self._resources = {}
        self._confirmed = set()
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
            message = _server_message(exc)
            hint = forbidden_hint(verb, kind, namespace, message) if status == 403 else STATUS_HINTS.get(status)
            if status >= 500 and status not in STATUS_HINTS:
                hint = STATUS_HINTS[500]
            if status >= 500 and verb not in READ_VERBS:
                hint = WRITE_5XX_HINT
            return ApiError(verb, kind, name, namespace, status=status, reason=getattr(exc, "reason", None),
                            message=message, hint=hint, url=self.url)
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
                wait = retry_after(exc) if err.status == 429 else None
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
        """True when the API server serves the kind now (its CRD is installed).

        The resolution may come from kubernetes.core's discovery cache file (one per server URL and
        user, in the temp directory), which outlives the cluster: one rebuilt at the same address
        (kind, a lab reinstall) still "has" the old CRDs there. So a hit is confirmed once per
        client against the group-version's discovery document (one GET)."""
        try:
            self.resource(api_version, kind)
        except ApiError as err:
            if err.status == 404:
                return False
            raise
        if (api_version, kind) in self._confirmed:
            return True
        if kind in self._served_kinds(api_version, kind):
            self._confirmed.add((api_version, kind))
            return True
        self._forget(api_version, kind)
        return False

    def _served_kinds(self, api_version, kind):
        path = "/api/%s" % api_version if "/" not in api_version else "/apis/%s" % api_version
        try:
            doc = as_dict(self.call("GET", kind, None, None, lambda: self.dynamic.request(
                "GET", path, _request_timeout=self.request_timeout)))
        except ApiError as err:
            if err.status == 404:
                return set()
            raise
        return set(r.get("kind") for r in doc.get("resources") or [] if "/" not in (r.get("name") or ""))

    def _forget(self, api_version, kind):
        """Drop a stale resolution: the next one asks the server (and rewrites the cache file)."""
        self._resources.pop((api_version, kind), None)
        self._confirmed.discard((api_version, kind))
        invalidate = getattr(self.dynamic.resources, "invalidate_cache", None)
        if invalidate is not None:
            self.call("GET", kind, None, None, invalidate)

    # -- reads -------------------------------------------------------------------
    def get(self, api_version, kind, name, namespace=None):
        """The object as a dict, or None when it does not exist."""
        res = self.resource(api_version, kind)
        try:
            return as_dict(self.call("GET", kind, name, namespace,
                                     lambda: res.get(name=name, namespace=namespace,
                                                     _request_timeout=self.request_timeout)))
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def list(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        """(items, resourceVersion) of one LIST call."""
        res = self.resource(api_version, kind)
        params = dict(namespace=namespace, _request_timeout=self.request_timeout)
        if label_selector:
            params["label_selector"] = label_selector
        if field_selector:
            params["field_selector"] = field_selector
        selected = ",".join(s for s in (label_selector, field_selector) if s)
        try:
            result = as_dict(self.call("LIST", kind, ("[%s]" % selected) if selected else None, namespace,
                                       lambda: res.get(**params)))
        except ApiError as err:
            # a collection that 404s is not served (a stale discovery cache said it was)
            if err.status == 404:
                self._forget(api_version, kind)
                self.resource(api_version, kind)   # raises "does not serve this kind" when it is gone
                result = as_dict(self.call("LIST", kind, None, namespace,
                                           lambda: self.resource(api_version, kind).get(**params)))
            else:
                raise
        return result.get("items") or [], (result.get("metadata") or {}).get("resourceVersion")

    def list_if_served(self, api_version, kind, namespace=None, label_selector=None, field_selector=None):
        """list(), or ([], None) when the server does not serve the kind. The LIST itself confirms a
        kind the discovery cache lists, so this costs no GET more than list()."""
        try:
            return self.list(api_version, kind, namespace, label_selector, field_selector)
        except ApiError as err:
            if err.status == 404:
                return [], None
            raise

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

    def _dry(self, params, dry_run):
        params["_request_timeout"] = self.request_timeout
        if dry_run:
            params["dry_run"] = DRY_RUN_ALL
        return params

    def create(self, body, dry_run=False):
        meta = body.get("metadata") or {}
        res = self.resource(body["apiVersion"], body["kind"])
        return as_dict(self.call("CREATE", body["kind"], meta.get("name"), meta.get("namespace"),
                                 lambda: res.create(body=body, **self._dry(
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


# -- client creation ---------------------------------------------------------------
# kubernetes.core's get_api_client loads the kubeconfig and then asks GET /version
# (discovery); either step raises whatever the library raised (a urllib3 repr, a YAML
# mark object). connect() turns them into one ClientError naming what was tried.


class Credentials(object):
    """Which kubeconfig, context and server a client is made from (read as kubernetes' loader does:
    several paths merge, the first file naming a context or cluster wins). Never holds a secret."""

    def __init__(self, params, environ=None):
        environ = os.environ if environ is None else environ
        params = params or {}

        def given(option):
            value = params.get(option)
            if value is None:
                value = environ.get("K8S_AUTH_%s" % option.upper())
            return value

        kubeconfig = given("kubeconfig")
        self.inline = isinstance(kubeconfig, dict)
        self.host = given("host")
        self.context = given("context")
        self.default = False
        if self.inline:
            self.kubeconfig, self.paths = "(the kubeconfig option's inline mapping)", []
        elif kubeconfig:
            self.kubeconfig = str(kubeconfig)
            self.paths = [p for p in self.kubeconfig.split(PATH_SEPARATOR) if p]
        elif self.host and (given("api_key") or given("username") or given("cert_file")):
            self.kubeconfig, self.paths = None, []   # host and credentials as options: no kubeconfig read
        else:
            self.default = True
            self.kubeconfig = environ.get("KUBECONFIG") or "~/.kube/config"
            self.paths = [p for p in self.kubeconfig.split(PATH_SEPARATOR) if p]
        self.missing, self.unreadable, self.not_yaml = [], [], []
        self.contexts, self.clusters, self.users = {}, {}, {}
        self.current = None
        for path in self.paths:
            self._read(path)
        if self.inline:
            self._merge(kubeconfig)

    def _read(self, path):
        full = os.path.expanduser(path)
        if not os.path.exists(full):
            self.missing.append(path)
            return
        try:
            with open(full) as handle:
                text = handle.read()
        except (IOError, OSError) as exc:
            self.unreadable.append((path, getattr(exc, "strerror", None) or str(exc)))
            return
        try:
            import yaml
            data = yaml.safe_load(text)
        except Exception as exc:  # yaml.YAMLError; its repr has mark objects, so only the problem and where
            mark = getattr(exc, "problem_mark", None)
            where = (" at line %d, column %d" % (mark.line + 1, mark.column + 1)) if mark is not None else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            self.not_yaml.append((path, "%s%s" % (problem, where)))
            return
        if data is not None and not isinstance(data, dict):
            self.not_yaml.append((path, "a YAML %s, not a mapping with clusters, users and contexts"
                                  % type(data).__name__))
            return
        self._merge(data or {})

    def _merge(self, data):
        for key, into in (("contexts", self.contexts), ("clusters", self.clusters), ("users", self.users)):
            for item in data.get(key) or []:
                if isinstance(item, dict) and item.get("name") is not None and item["name"] not in into:
                    into[str(item["name"])] = item.get(key[:-1]) or {}
        if self.current is None and data.get("current-context"):
            self.current = str(data["current-context"])

    @property
    def context_name(self):
        return self.context or self.current

    @property
    def cluster_name(self):
        return (self.contexts.get(self.context_name) or {}).get("cluster")

    @property
    def user_name(self):
        return (self.contexts.get(self.context_name) or {}).get("user")

    @property
    def server(self):
        url = self.host or (self.clusters.get(self.cluster_name) or {}).get("server")
        return _without_userinfo(url) if url else None

    def describe_kubeconfig(self):
        if self.kubeconfig is None:
            return None
        if self.default:
            return "%s (the default: no kubeconfig option or K8S_AUTH_KUBECONFIG)" % self.kubeconfig
        return self.kubeconfig

    def error(self, message, hint, stage, url=None, status=None, reason=None):
        return ClientError(message, hint, status=status, reason=reason, url=url or self.server,
                           context=self.context_name, kubeconfig=self.describe_kubeconfig(), stage=stage)


def _without_userinfo(url):
    """https://user:secret@host:6443 -> https://host:6443 (a message never shows a password)."""
    scheme, sep, rest = str(url).partition("://")
    if not sep:
        return str(url)
    netloc, slash, path = rest.partition("/")
    return "%s://%s%s%s" % (scheme, netloc.rpartition("@")[2], slash, path)


def _causes(exc):
    """exc and what it wraps: urllib3's reason, exception args, __cause__ / __context__."""
    seen, todo = [], [exc]
    while todo:
        cur = todo.pop(0)
        if not isinstance(cur, BaseException) or any(cur is s for s in seen):
            continue
        seen.append(cur)
        todo.extend([getattr(cur, "reason", None), cur.__cause__, cur.__context__]
                    + [a for a in getattr(cur, "args", ()) if isinstance(a, BaseException)])
    return seen


def _pool_url(exc):
    for cur in _causes(exc):
        pool = getattr(cur, "pool", None)
        if pool is not None and getattr(pool, "host", None):
            return "%s://%s%s" % (pool.scheme, pool.host, (":%s" % pool.port) if pool.port else "")
    return None


def load_failure(creds, exc):
    """ClientError for a kubeconfig kubernetes' loader refused: the file, then the context."""
    files = creds.kubeconfig
    if creds.paths and len(creds.missing) == len(creds.paths):
        if creds.default:
            return creds.error("no kubeconfig was given and the default %s does not exist" % files,
                               "fix: set %s, to the cluster's kubeconfig file" % SET_KUBECONFIG, "load")
        return creds.error("the kubeconfig file does not exist" if len(creds.paths) == 1 else
                           "none of the kubeconfig files exists",
                           "fix: set %s, to the cluster's kubeconfig file" % SET_KUBECONFIG, "load")
    if creds.unreadable:
        path, why = creds.unreadable[0]
        return creds.error("the kubeconfig file%s cannot be read: %s"
                           % ((" %s" % path) if len(creds.paths) > 1 else "", why),
                           "fix: give the user running the module read access, or set %s" % SET_KUBECONFIG, "load")
    if creds.not_yaml:
        path, why = creds.not_yaml[0]
        return creds.error("the kubeconfig file%s is not YAML: %s"
                           % ((" %s" % path) if len(creds.paths) > 1 else "", why),
                           "is it the right file? fix: set %s, to the cluster's kubeconfig" % SET_KUBECONFIG, "load")
    names = ", ".join(sorted(creds.contexts)) or "none"
    if creds.context_name and creds.context_name not in creds.contexts:
        return creds.error("context %s is not in the kubeconfig; it has: %s" % (creds.context_name, names),
                           "fix: set %s, to one of them; or set %s, to the file that has it"
                           % (SET_CONTEXT, SET_KUBECONFIG), "load")
    if not creds.context_name and not creds.inline:
        return creds.error("the kubeconfig names no current-context; its contexts: %s" % names,
                           "fix: set %s, to one of them" % SET_CONTEXT, "load")
    cluster = creds.cluster_name
    if cluster and cluster not in creds.clusters:
        return creds.error("context %s names cluster %s, which the kubeconfig does not define"
                           % (creds.context_name, cluster),
                           "fix the kubeconfig, or set %s" % SET_CREDENTIALS, "load")
    text = short(exc).replace("Could not create API client: ", "")
    return creds.error("the kubeconfig was refused: %s" % text, "fix the kubeconfig, or set %s" % SET_CREDENTIALS,
                       "load")


def connect_failure(creds, exc):
    """ClientError for a failed first request (GET /version) with loaded credentials."""
    url = _pool_url(exc) or creds.server
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:
        if status == 401:
            who = (" of user %s" % creds.user_name) if creds.user_name else ""
            return creds.error("the API server refused the credentials%s" % who,
                               "the token or client certificate is expired, revoked or for another cluster: "
                               "renew it in the kubeconfig, or set %s" % SET_CREDENTIALS,
                               "connect", url, status, getattr(exc, "reason", None) or "Unauthorized")
        hint = STATUS_HINTS.get(status) or (STATUS_HINTS[500] if status >= 500 else None)
        return creds.error(_server_message(exc), hint, "connect", url, status, getattr(exc, "reason", None))
    causes = _causes(exc)
    verify = [c for c in causes if isinstance(c, ssl.SSLCertVerificationError)]
    if verify:
        why = getattr(verify[0], "verify_message", None) or short(verify[0])
        return creds.error("TLS certificate verification failed: %s" % why,
                           "the server's certificate is not signed by the CA the kubeconfig trusts: set the "
                           "certificate-authority(-data) of cluster %s to the cluster's CA (or the module's "
                           "ca_cert option), or set %s" % (creds.cluster_name or "(unnamed)", SET_CREDENTIALS),
                           "connect", url)
    tls = [c for c in causes if isinstance(c, ssl.SSLError)]
    if tls:
        reason = getattr(tls[0], "reason", None) or short(tls[0])
        return creds.error("TLS handshake failed (%s)" % reason,
                           "does the server speak HTTPS on that port? A plain HTTP server needs an http:// "
                           "server in the kubeconfig; or set %s" % SET_CREDENTIALS, "connect", url)
    text = " ".join("%s %s" % (type(c).__name__, c) for c in causes)
    if any(isinstance(c, socket.gaierror) for c in causes) or "NameResolutionError" in text:
        host = url.partition("://")[2].rpartition(":")[0] if url else "the server's host name"
        return creds.error("the host name %s does not resolve (DNS)" % host,
                           "fix the server of cluster %s in the kubeconfig, or set %s"
                           % (creds.cluster_name or "(unnamed)", SET_CREDENTIALS), "connect", url)
    if any(isinstance(c, ConnectionRefusedError) for c in causes) or _connection_refused(exc):
        return creds.error("connection refused: nothing listens at that address",
                           "is the API server running? If it is the wrong server, set %s" % SET_CREDENTIALS,
                           "connect", url)
    if "Timeout" in text or "timed out" in text:
        return creds.error("no answer in time", "is the server reachable from here (firewall, VPN, proxy)? "
                           "If it is the wrong server, set %s" % SET_CREDENTIALS, "connect", url)
    inner = [c for c in causes if not type(c).__name__ == "MaxRetryError"] or causes
    return creds.error("%s" % short("%s: %s" % (type(inner[-1]).__name__, inner[-1])),
                       "check the server in the kubeconfig, or set %s" % SET_CREDENTIALS, "connect", url)


def connect(module, get_api_client, **kube_args):
    """Kube for the module's credentials; ClientError (an ApiError) when there is no client."""
    try:
        client = get_api_client(module)
    except ApiError:
        raise
    except Exception as exc:  # whatever kubernetes' loader or urllib3 raised: classified below
        creds = Credentials(getattr(module, "params", None))
        loaded = not (creds.missing and len(creds.missing) == len(creds.paths)) and not creds.not_yaml
        if _is_load_error(exc) or not loaded:
            raise load_failure(creds, exc)
        raise connect_failure(creds, exc)
    return Kube(client, **kube_args)


def _is_load_error(exc):
    names = set(type(c).__name__ for c in _causes(exc))
    return bool(names & {"CoreException", "ConfigException", "YAMLError", "ScannerError", "ParserError",
                         "ComposerError", "ConstructorError", "FileNotFoundError", "PermissionError"})
