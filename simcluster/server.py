"""The HTTP front of the simulated API server.

ThreadingHTTPServer, HTTP/1.1 keep-alive; every response goes out in one
write (headers + body) so Nagle/delayed-ACK never adds latency; watches are
chunked streams. Routing follows the API server's URL layout:
/api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] and /apis/GROUP/VERSION/...
"""

import base64
import json
import os
import socket
import sys
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import api_faults, ksm, managed, openapi, protobuf, tables
from .discovery import Discovery
from .errors import ApiError
from .openapi import OpenAPI
from .patch import json_patch, merge_patch, strategic_merge
from .registry import SERVER_VERSION, VIRTUAL
from .selectors import match_fields, match_labels, parse_field_selector, parse_label_selector
from .stats import Stats
from .store import Gone, TooLarge

try:
    import yaml
    _YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:  # pragma: no cover
    yaml = None

REASONS = {200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Bad Request",
           401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
           409: "Conflict", 410: "Gone", 415: "Unsupported Media Type",
           422: "Unprocessable Entity", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
           504: "Gateway Timeout"}

PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
LOG_REQUESTS = bool(os.environ.get("SIMCLUSTER_LOG_REQUESTS"))
WATCH_POLL = 0.5          # seconds between checks of a silent watch (disconnect, deadline)
BOOKMARK_EVERY = 10.0     # seconds between bookmarks when the client allows them


def _bad(msg):
    return ApiError(400, "BadRequest", msg)


def _not_found_path():
    return ApiError(404, "NotFound", "the server could not find the requested resource",
                    {})


def _manager_from_agent(agent):
    return (agent or "unknown").split("/")[0][:128] or "unknown"


class APIServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, store, host="127.0.0.1", port=0):
        self.store = store
        self.registry = store.registry
        self.discovery = Discovery(self.registry)
        self.openapi = OpenAPI(self.registry)
        self.stats = Stats()
        self.api_faults = api_faults.ApiFaults()  # injected errors (simcluster/api_faults.py)
        self.stopping = False
        self.paused_until = 0.0     # the pause fault: monotonic time serving resumes
        self.on_pause = []          # fn(seconds): the twins stop working too
        super().__init__((host, port), Handler)

    def pause(self, seconds):
        """Stop serving for `seconds` without losing state (an API server outage): every
        connection is closed unanswered, watches end; `/_sim/` stays reachable."""
        self.paused_until = time.monotonic() + max(0.0, float(seconds))
        for fn in list(self.on_pause):
            fn(seconds)

    @property
    def paused(self):
        return time.monotonic() < self.paused_until

    @property
    def url(self):
        host, port = self.server_address[:2]
        return "http://%s:%d" % (host, port)

    def shutdown(self):
        self.stopping = True
        super().shutdown()


class Request:
    """What a handler needs from the HTTP request."""

    def __init__(self, method, path, query, headers, body):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.warnings = []

    def q(self, name, default=None):
        return self.query.get(name, default)

    def flag(self, name):
        return self.query.get(name, "").lower() in ("1", "true")

    @property
    def dry_run(self):
        return self.query.get("dryRun") == "All"

    @property
    def accept(self):
        return self.headers.get("Accept") or ""

    @property
    def content_type(self):
        return (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "simcluster"
    sys_version = ""

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, fmt, *args):
        if LOG_REQUESTS:
            sys.stderr.write("simcluster: " + (fmt % args) + "\n")

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_HEAD(self):
        self._dispatch("HEAD")

    # --- plumbing ---------------------------------------------------------------

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length:
            return self.rfile.read(int(length))
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return b""

    def _dispatch(self, method):
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query,
                                                             keep_blank_values=True).items()}
        try:
            body = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            return
        req = Request(method, url.path, query, self.headers, body)
        if self.server.paused and not url.path.startswith("/_sim/"):
            self.close_connection = True        # like a restarting API server: no answer
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if LOG_REQUESTS:
            sys.stderr.write("simcluster: %s %s ct=%s accept=%s ua=%s\n" % (
                method, self.path, self.headers.get("Content-Type"), self.headers.get("Accept"),
                self.headers.get("User-Agent")))
        audit_log = getattr(self.server, "audit", None)    # simcluster/audit.py, from the cluster file
        self._audit = None
        if audit_log is not None and not url.path.startswith("/_sim/"):
            self._audit_out = (200, b"")
            record = audit_log.begin(method, url.path, self.path, query, self.headers, body, self.client_address[0])
            self._audit = (audit_log, record, req.flag("watch") or "/watch/" in url.path)
        try:
            self._route(req)
        except ApiError as exc:
            status = exc.status()
            if getattr(exc, "list_continue", None):
                status.setdefault("metadata", {})["continue"] = exc.list_continue
            self._send_json(exc.code, status, req, getattr(exc, "headers", ()))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug: answer like the API server does, log it
            traceback.print_exc()
            self._send_json(500, ApiError(500, "InternalError",
                                          "Internal error occurred: %s" % exc).status(), req)
        self._end_audit()

    def _end_audit(self):
        """The request's last audit event, once. kube-apiserver's audit filter writes it (blocking
        log backend) before the buffered response reaches the client, so _send calls this before
        writing: a client that reads the log after its answer finds the event."""
        pending, self._audit = getattr(self, "_audit", None), None
        if pending is not None:
            audit_log, record, watch = pending
            audit_log.end(record, *self._audit_out, watch=watch)

    def _send(self, code, body, ctype="application/json", req=None, extra=()):
        head = ["HTTP/1.1 %d %s" % (code, REASONS.get(code, "Unknown")),
                "Content-Type: " + ctype,
                "Content-Length: %d" % len(body),
                "Cache-Control: no-cache, private",
                "Date: " + self.date_time_string()]
        if req is not None:
            for w in req.warnings:
                head.append('Warning: 299 - "%s"' % str(w).replace('"', '\\"')
                            .replace("\n", " "))
        head.extend(extra)
        if self.close_connection:
            head.append("Connection: close")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1", "replace")
        self._audit_out = (code, body if ctype.startswith("application/json") else b"")
        self._end_audit()
        if self.command != "HEAD":
            data += body
        self.wfile.write(data)
        if LOG_REQUESTS:
            sys.stderr.write("simcluster:   -> %d %s\n" % (code, body[:300]))

    def _send_json(self, code, obj, req=None, extra=()):
        if req is not None and isinstance(obj, dict) and self._wants_protobuf(req) \
                and protobuf.can_encode(obj.get("kind", "")):
            self._send(code, protobuf.encode(obj), protobuf.CONTENT_TYPE, req, extra)
            return
        self._send(code, json.dumps(obj, separators=(",", ":")).encode(), "application/json",
                   req, extra)

    def _wants_protobuf(self, req):
        accept = req.accept
        return protobuf.CONTENT_TYPE in accept and "json" not in accept and "*/*" not in accept

    # --- routing ------------------------------------------------------------------

    def _route(self, req):
        path = req.path.rstrip("/") or "/"
        parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
        srv = self.server
        if parts[:1] == ["_sim"]:
            return self._sim(req, parts[1:])
        if not parts:
            return self._send_json(200, {"paths": ["/api", "/api/v1", "/apis", "/openapi/v2",
                                                   "/openapi/v3",
                                                   "/version", "/healthz"]})
        head = parts[0]
        if head in ("healthz", "livez", "readyz"):
            srv.stats.count("get", "nonresource")
            return self._send(200, b"ok", "text/plain; charset=utf-8")
        if head == "version":
            srv.stats.count("get", "nonresource")
            return self._send_json(200, SERVER_VERSION)
        if head == "openapi":
            srv.stats.count("get", "openapi")
            return self._openapi(req, parts[1:])
        if head == "api":
            if len(parts) == 1:
                srv.stats.count("get", "discovery")
                host = "%s:%d" % srv.server_address[:2]
                return self._send(200, srv.discovery.api_versions(host))
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            if len(parts) == 1:
                srv.stats.count("get", "discovery")
                return self._send(200, srv.discovery.group_list())
            if len(parts) == 2:
                srv.stats.count("get", "discovery")
                body = srv.discovery.group(parts[1])
                if body is None:
                    raise _not_found_path()
                return self._send(200, body)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _not_found_path()
        if not rest:
            srv.stats.count("get", "discovery")
            body = srv.discovery.resource_list(group, version)
            if body is None:
                raise _not_found_path()
            return self._send(200, body)
        return self._resource(req, group, version, rest)

    def _sim(self, req, parts):
        stats = self.server.stats
        if parts == ["stats"] and req.method == "GET":
            return self._send_json(200, stats.snapshot())
        if parts == ["stats", "reset"] and req.method == "POST":
            stats.reset()
            return self._send_json(200, stats.snapshot())
        if parts == ["api_errors"]:
            return self._send_json(200, self.server.api_faults.endpoint(req.method, req.body))
        if parts == ["pause"] and req.method == "POST":
            try:
                seconds = float((json.loads(req.body or b"{}") or {}).get("seconds", 0))
            except (ValueError, TypeError, AttributeError):
                raise _bad('body must be {"seconds": N}')
            if not 0 <= seconds <= 3600:
                raise _bad("seconds must be between 0 and 3600, got %s" % seconds)
            self.server.pause(seconds)
            return self._send_json(200, {"paused_seconds": seconds})
        if parts[:1] == ["dcgm"] and getattr(self.server, "dcgm", None) is not None:
            return self._send(*self.server.dcgm.handle(req.method, parts[1:], req.body))  # simcluster/dcgm.py
        if parts == ["audit"] and req.method == "GET":
            if getattr(self.server, "audit", None) is None:
                raise ApiError(404, "NotFound", "no audit log: the cluster file has no audit: {policy: FILE}")
            lines = self.server.audit.lines()
            return self._send(200, ("\n".join(lines) + ("\n" if lines else "")).encode(), "application/x-ndjson")
        if parts[:1] == ["kube-state-metrics"]:
            return self._send(*ksm.handle(self.server.store, req.method, parts[1:]))  # simcluster/ksm.py
        raise _not_found_path()

    def _openapi(self, req, parts):
        if parts == ["v2"]:
            if any(a in req.accept for a in openapi.V2_PROTOBUF_ACCEPT) \
                    and "json" not in req.accept:
                return self._send(200, openapi.v2_protobuf(), openapi.V2_PROTOBUF)
            return self._send(200, openapi.v2_json())
        if parts[:1] != ["v3"]:
            raise _not_found_path()
        if len(parts) == 1:
            return self._send(200, self.server.openapi.index())
        body = self.server.openapi.document("/".join(parts[1:]))
        if body is None:
            raise _not_found_path()
        return self._send(200, body, "application/json",
                          extra=["Etag: \"%d\"" % self.server.registry.generation])

    def _resource(self, req, group, version, rest):
        watch_prefix = False
        if rest[0] == "watch":
            watch_prefix = True
            rest = rest[1:]
            if not rest:
                raise _not_found_path()
        if len(rest) >= 3 and rest[0] == "namespaces" and \
                not (len(rest) == 3 and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
        else:
            namespace = None
        if len(rest) > 3:
            raise _not_found_path()
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        info = self.server.registry.lookup(group, version, plural)
        if info is None:
            raise _not_found_path()
        if namespace is not None and not info.namespaced:
            raise _not_found_path()
        if sub is not None and sub not in info.subresources:
            raise _not_found_path()
        ctx = ResourceContext(self, req, info, version, namespace, name, sub)
        if watch_prefix:
            req.query["watch"] = "true"
        return ctx.serve()


def _decode_body(req, allow_yaml=False):
    body = req.body
    if not body:
        raise _bad("the body of the request was empty")
    ct = req.content_type
    if ct == protobuf.CONTENT_TYPE:
        try:
            return protobuf.decode(body)
        except (protobuf.ProtobufError, UnicodeDecodeError) as exc:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                           "unknown format: %s" % exc)
    try:
        return json.loads(body)
    except ValueError as exc:
        if (allow_yaml or "yaml" in ct) and yaml is not None:
            try:
                return yaml.load(body, Loader=_YAML_LOADER)
            except yaml.YAMLError as yexc:
                raise _bad("error decoding YAML: %s" % yexc)
        raise _bad("json: cannot unmarshal request body: %s" % exc)


def _list_options_invalid(field, detail):
    return ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: %s: Forbidden: %s'
                    % (field, detail), {"kind": "ListOptions", "group": "meta.k8s.io",
                                        "causes": [{"reason": "FieldValueForbidden",
                                                    "message": "Forbidden: " + detail,
                                                    "field": field}]})


def _check_list_options(rv, match, cont):
    """ValidateListOptions of k8s.io/apimachinery (list requests)."""
    if match and match not in ("Exact", "NotOlderThan"):
        raise ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: '
                       'resourceVersionMatch: Unsupported value: "%s": supported values: '
                       '"Exact", "NotOlderThan"' % match)
    if match and not rv:
        raise _list_options_invalid("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                    "unless resourceVersion is provided")
    if match and cont:
        raise _list_options_invalid("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                    "when continue is provided")
    if match == "Exact" and rv == "0":
        raise _list_options_invalid("resourceVersionMatch", 'resourceVersionMatch "exact" is '
                                    'forbidden for resourceVersion "0"')
    if cont and rv not in ("", "0"):
        raise _list_options_invalid("resourceVersion", "specifying resource version is not "
                                    "allowed when using continue")
    if rv and not rv.isdigit():
        raise _bad('invalid resource version "%s"' % rv)


def _encode_continue(rv, start):
    token = {"v": "meta.k8s.io/v1", "rv": int(rv), "start": start}
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode()


def _decode_continue(cont):
    try:
        token = json.loads(base64.urlsafe_b64decode(cont.encode()))
        rv, start = int(token["rv"]), token["start"]
        if not isinstance(start, list) or len(start) != 2 or rv <= 0:
            raise ValueError(start)
    except (ValueError, KeyError, TypeError):
        raise _bad("continue key is not valid: incorrect encoded start resourceVersion "
                   "(version meta.k8s.io/v1)")
    return rv, start


def _too_large(rv, current):
    return ApiError(504, "Timeout", "Too large resource version: %s, current: %s"
                    % (rv, current), {"causes": [{"reason": "ResourceVersionTooLarge",
                                                  "message": "Too large resource version"}],
                                      "retryAfterSeconds": 1})


def _expired_continue(ctx, start, q):
    """410 for a continue token older than the history (the etcd compaction window); the
    Status carries a fresh token for the rest of the list, as the real server's does."""
    rv = ctx.store.resource_version
    err = ApiError(410, "Expired",
                   "The provided continue parameter is too old to display a consistent list "
                   "result. You can start a new list without the continue parameter, or use "
                   "the continue token in this response to retrieve the remainder of the "
                   "results. Continuing with the provided token results in an inconsistent "
                   "list - objects that were created, modified, or deleted between the time "
                   "the first chunk was returned and now may show up in the list.")
    err.list_continue = _encode_continue(rv, start)
    return err


class ResourceContext:
    """One request on one resource type."""

    def __init__(self, handler, req, info, version, namespace, name, sub):
        self.h = handler
        self.req = req
        self.info = info
        self.version = version
        self.api_version = info.api_version(version)
        self.namespace = namespace
        self.name = name
        self.sub = sub
        self.store = handler.server.store
        self.stats = handler.server.stats

    # common write options
    def _opts(self, manager_default=True):
        fm = self.req.q("fieldManager")
        if not fm and manager_default:
            fm = _manager_from_agent(self.req.headers.get("User-Agent"))
        fv = self.req.q("fieldValidation") or "Warn"
        if fv not in ("Strict", "Warn", "Ignore"):
            raise _bad('fieldValidation: Unsupported value: "%s": supported values: "Ignore", '
                       '"Strict", "Warn"' % fv)
        dr = self.req.q("dryRun")
        if dr and dr != "All":
            raise _bad('dryRun: Unsupported value: "%s": supported values: "All"' % dr)
        return {"dry_run": self.req.dry_run, "field_manager": fm, "field_validation": fv,
                "warnings": self.req.warnings}

    def _out(self, obj):
        """Present a stored object in the requested version."""
        if obj.get("apiVersion") != self.api_version:
            obj = dict(obj)
            obj["apiVersion"] = self.api_version
        return obj

    def _verb(self, verb):
        if verb not in self.info.verbs and self.sub is None:
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        dry = self.req.dry_run or (self.req.method == "DELETE" and b'"All"' in (self.req.body or b"")
                                   and b"dryRun" in (self.req.body or b""))
        self.stats.count(verb, self.info.key + ("/" + self.sub if self.sub else ""), dry)
        self.h.server.api_faults.check(verb, self.info, self.namespace, self.name, self.sub)

    def serve(self):
        m = self.req.method
        if self.name is None:
            if m in ("GET", "HEAD"):
                if self.req.flag("watch"):
                    self._verb("watch")
                    return self.watch()
                self._verb("list")
                return self.list()
            if self.namespace is None and self.info.namespaced:
                raise _not_found_path()
            if m == "POST":
                self._verb("create")
                return self.create()
            if m == "DELETE":
                self._verb("deletecollection")
                return self.delete_collection()
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        if self.namespace is None and self.info.namespaced:
            raise _not_found_path()
        if self.sub in (None, "status") or (self.sub == "finalize" and m == "PUT"):
            if m in ("GET", "HEAD"):
                if self.req.flag("watch"):
                    self._verb("watch")
                    self.req.query["fieldSelector"] = "metadata.name=" + self.name
                    return self.watch()
                self._verb("get")
                return self.get()
            if m == "PUT":
                self._verb("update")
                return self.update()
            if m == "PATCH":
                self._verb("patch")
                return self.patch()
            if m == "DELETE" and self.sub is None:
                self._verb("delete")
                return self.delete()
        if self.sub == "scale":
            return self.scale()
        if self.sub == "log" and m == "GET":
            self._verb("get")
            return self.log()
        if self.sub == "eviction" and m == "POST":
            self._verb("create")
            return self.eviction()
        if self.sub == "binding" and m == "POST":
            self._verb("create")
            return self.binding()
        raise ApiError(405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource")

    # --- reads -------------------------------------------------------------------

    def get(self):
        obj = self.store.get(self.info.key, self.namespace, self.name)
        if obj is None:
            raise self._not_found()
        obj = self._out(obj)
        if tables.wants_table(self.req.accept):
            rv = self.store.resource_version
            return self.h._send_json(200, tables.table(self.info, [obj], rv, self.req,
                                                       self.version),
                                     self.req)
        self.h._send_json(200, obj, self.req)

    def _not_found(self):
        from .errors import not_found
        return not_found(self.info.plural, self.name, self.info.group)

    def list(self):
        """LIST with the API server's chunking: limit/continue over a consistent snapshot
        (the continue token pins the first page's resourceVersion), remainingItemCount
        without selectors, resourceVersion/resourceVersionMatch semantics."""
        q = self.req.query
        rv_param = q.get("resourceVersion") or ""
        match = q.get("resourceVersionMatch") or ""
        cont = q.get("continue") or ""
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise _bad('limit: Invalid value: "%s"' % q.get("limit"))
        _check_list_options(rv_param, match, cont)
        at, start = None, None
        if cont:
            at, start = _decode_continue(cont)
        elif match == "Exact":
            at = int(rv_param)
        elif rv_param not in ("", "0"):
            current = int(self.store.resource_version)
            if int(rv_param) > current:
                raise _too_large(rv_param, current)
        selector = q.get("labelSelector") or q.get("fieldSelector")
        try:
            items, rv = self.store.list_with_rv(self.info.key, self.namespace,
                                                q.get("labelSelector"), q.get("fieldSelector"),
                                                copy=False, at=at)
        except Gone:
            if cont:
                raise _expired_continue(self, start, q)
            raise ApiError(410, "Expired", "too old resource version: %s (%s)"
                           % (at, self.store.oldest_resource_version))
        except TooLarge as exc:
            raise _too_large(at, exc.args[0])
        meta = {"resourceVersion": rv}
        if start is not None:
            items = [o for o in items if [o["metadata"].get("namespace") or "",
                                          o["metadata"]["name"]] > start]
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = _encode_continue(rv, [last.get("namespace") or "", last["name"]])
            if not selector:
                meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        items = [self._out(o) for o in items]
        if tables.wants_table(self.req.accept):
            table = tables.table(self.info, items, rv, self.req, self.version)
            table["metadata"] = meta
            return self.h._send_json(200, table, self.req)
        body = {"kind": self.info.list_kind, "apiVersion": self.api_version, "metadata": meta,
                "items": items}
        self.h._send_json(200, body, self.req)

    # --- writes ------------------------------------------------------------------

    def _body_object(self):
        obj = _decode_body(self.req, allow_yaml=True)
        if not isinstance(obj, dict):
            raise _bad("the body of the request must be an object")
        kind = obj.get("kind")
        if kind and kind != self.info.kind and not self.sub:
            raise _bad('the kind of the provided object (%s) does not match the expected '
                       'kind (%s)' % (kind, self.info.kind))
        meta = obj.get("metadata")
        if meta is None:
            obj["metadata"] = meta = {}
        if not isinstance(meta, dict):
            raise _bad("metadata must be an object")
        if self.info.namespaced:
            ns = meta.get("namespace")
            if ns and ns != self.namespace:
                raise _bad("the namespace of the provided object does not match the "
                           "namespace sent on the request")
            meta["namespace"] = self.namespace
        obj["apiVersion"] = self.api_version
        return obj

    def create(self):
        obj = self._body_object()
        if self.info.key in VIRTUAL:
            obj["status"] = {"allowed": True, "reason": "simcluster allows everything"}
            return self.h._send_json(201, obj, self.req)
        opts = self._opts()
        created = self.store.create(self.info.key, obj, drop_status=True,
                                    api_version=self.api_version, **opts)
        self.h._send_json(201, self._out(created), self.req)

    def update(self):
        obj = self._body_object()
        meta = obj["metadata"]
        if meta.get("name") and meta["name"] != self.name:
            raise _bad("the name of the object (%s) does not match the name on the URL (%s)"
                       % (meta["name"], self.name))
        meta["name"] = self.name
        opts = self._opts()
        if self.sub == "finalize":
            cur = self.store.get(self.info.key, None, self.name)
            if cur is None:
                raise self._not_found()
            cur["spec"] = obj.get("spec") or {}
            obj = cur
        try:
            updated = self.store.update(self.info.key, obj, subresource=self.sub
                                        if self.sub == "status" else None,
                                        api_version=self.api_version, **opts)
        except ApiError as exc:
            if exc.code == 404 and self.info.key in ("leases.coordination.k8s.io", "endpoints") \
                    and not self.sub:
                updated = self.store.create(self.info.key, obj, api_version=self.api_version,
                                            **opts)
                return self.h._send_json(201, self._out(updated), self.req)
            raise
        self.h._send_json(200, self._out(updated), self.req)

    def patch(self):
        kind = PATCH_TYPES.get(self.req.content_type)
        if kind is None:
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json-patch+json, application/"
                           "merge-patch+json, application/apply-patch+yaml")
        if kind == "strategic" and self.info.crd is not None:
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json-patch+json, application/"
                           "merge-patch+json, application/apply-patch+yaml")
        if kind == "apply":
            return self.apply()
        body = _decode_body(self.req)
        opts = self._opts()
        sub = self.sub if self.sub == "status" else None

        def fn(cur):
            if kind == "json":
                return json_patch(cur, body)
            if not isinstance(body, dict):
                raise _bad("the patch must be a JSON object")
            if kind == "merge":
                return merge_patch(cur, body)
            return strategic_merge(cur, body)

        updated = self.store.patch(self.info.key, self.namespace, self.name, fn, subresource=sub,
                                   api_version=self.api_version, **opts)
        self.h._send_json(200, self._out(updated), self.req)

    def apply(self):
        applied = _decode_body(self.req, allow_yaml=True)
        if not isinstance(applied, dict):
            raise _bad("the applied configuration must be an object")
        opts = self._opts(manager_default=False)
        manager = opts.pop("field_manager")
        if not manager:
            raise ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is invalid: '
                           "fieldManager: Required value: is required for apply patch",
                           {"kind": "PatchOptions", "group": "meta.k8s.io", "causes": [
                               {"reason": "FieldValueRequired", "message": "Required value: "
                                "is required for apply patch", "field": "fieldManager"}]})
        for field in ("apiVersion", "kind"):
            if not applied.get(field):
                raise _bad("invalid object type: /, Kind=" if field == "kind" else
                           "Object 'apiVersion' is missing in '%s'" % json.dumps(applied))
        if applied["kind"] != self.info.kind:
            raise _bad('the kind of the provided object (%s) does not match the expected kind '
                       '(%s)' % (applied["kind"], self.info.kind))
        meta = applied.setdefault("metadata", {}) or {}
        applied["metadata"] = meta
        if meta.get("name") and meta["name"] != self.name:
            raise _bad("the name of the object (%s) does not match the name on the URL (%s)"
                       % (meta["name"], self.name))
        meta["name"] = self.name
        if self.info.namespaced:
            if meta.get("namespace") and meta["namespace"] != self.namespace:
                raise _bad("the namespace of the provided object does not match the "
                           "namespace sent on the request")
            meta["namespace"] = self.namespace
        applied["apiVersion"] = self.api_version
        sub = "status" if self.sub == "status" else None
        if sub is None and self.info.has_status:
            applied.pop("status", None)
        force = self.req.flag("force")
        current = self.store.get(self.info.key, self.namespace, self.name)
        if current is None:
            if sub:
                raise self._not_found()
            new = managed.apply(None, applied, manager, self.api_version, force,
                                strategic_merge)
            mf = new["metadata"].pop("managedFields", None)
            created = self.store.create(self.info.key, new, api_version=self.api_version,
                                        managed_fields=mf, **opts)
            return self.h._send_json(201, self._out(created), self.req)

        def fn(cur):
            return managed.apply(cur, applied, manager, self.api_version, force,
                                 strategic_merge, sub)

        updated = self.store.patch(self.info.key, self.namespace, self.name, fn, subresource=sub,
                                   api_version=self.api_version, ssa=True,
                                   precondition_rv=True, **opts)
        self.h._send_json(200, self._out(updated), self.req)

    def _delete_options(self):
        opts = {}
        if self.req.body:
            try:
                opts = _decode_body(self.req) or {}
            except ApiError:
                opts = {}
        if not isinstance(opts, dict):
            opts = {}
        q = self.req.query
        if q.get("propagationPolicy"):
            opts["propagationPolicy"] = q["propagationPolicy"]
        if q.get("orphanDependents", "").lower() == "true":
            opts["propagationPolicy"] = "Orphan"
        if opts.get("orphanDependents") is True:
            opts["propagationPolicy"] = "Orphan"
        dry = q.get("dryRun") == "All" or "All" in (opts.get("dryRun") or [])
        return opts, dry

    def delete(self):
        opts, dry = self._delete_options()
        obj, gone = self.store.delete(self.info.key, self.namespace, self.name, dry_run=dry,
                                      propagation=opts.get("propagationPolicy"),
                                      preconditions=opts.get("preconditions"),
                                      warnings=self.req.warnings)
        if gone and self.info.key not in ("namespaces", "pods") and \
                self.info.crd is None:
            meta = obj["metadata"]
            body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": meta["name"], "group": self.info.group,
                                "kind": self.info.plural, "uid": meta.get("uid")}}
            return self.h._send_json(200, body, self.req)
        if self.info.key == "namespaces" and gone:
            obj = dict(obj)
            obj["status"] = {"phase": "Terminating"}
        self.h._send_json(200, self._out(obj), self.req)

    def delete_collection(self):
        opts, dry = self._delete_options()
        items = self.store.delete_collection(self.info.key, self.namespace,
                                             self.req.q("labelSelector"),
                                             self.req.q("fieldSelector"), dry_run=dry,
                                             propagation=opts.get("propagationPolicy"))
        body = {"kind": self.info.list_kind, "apiVersion": self.api_version,
                "metadata": {"resourceVersion": self.store.resource_version},
                "items": [self._out(o) for o in items]}
        self.h._send_json(200, body, self.req)

    # --- subresources ------------------------------------------------------------

    def _scale_of(self, obj):
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        sel = spec.get("selector")
        if isinstance(sel, dict):
            from .selectors import selector_from_label_selector
            sel = selector_from_label_selector(sel)
        meta = obj["metadata"]
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                   "creationTimestamp") if k in meta},
                "spec": {"replicas": spec.get("replicas", 0)},
                "status": {"replicas": status.get("replicas", 0), "selector": sel or ""}}

    def scale(self):
        m = self.req.method
        if m == "GET":
            self._verb("get")
            obj = self.store.get(self.info.key, self.namespace, self.name)
            if obj is None:
                raise self._not_found()
            return self.h._send_json(200, self._scale_of(obj), self.req)
        if m not in ("PUT", "PATCH"):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        self._verb("update" if m == "PUT" else "patch")
        body = _decode_body(self.req)
        opts = self._opts()

        def fn(cur):
            scale = self._scale_of(cur)
            if m == "PUT":
                new_scale = body
            else:
                kind = PATCH_TYPES.get(self.req.content_type)
                new_scale = json_patch(scale, body) if kind == "json" else \
                    merge_patch(scale, body)
            replicas = (new_scale.get("spec") or {}).get("replicas")
            cur.setdefault("spec", {})["replicas"] = replicas
            return cur

        updated = self.store.patch(self.info.key, self.namespace, self.name, fn, **opts)
        self.h._send_json(200, self._scale_of(updated), self.req)

    def log(self):
        pod = self.store.get("pods", self.namespace, self.name)
        if pod is None:
            raise self._not_found()
        spec = pod.get("spec") or {}
        names = [c.get("name") for c in spec.get("containers") or []]
        inits = [c.get("name") for c in spec.get("initContainers") or []]
        container = self.req.q("container")
        if not container:
            if len(names) != 1:
                msg = "a container name must be specified for pod %s, choose one of: [%s]" % (
                    self.name, " ".join(names))
                if inits:
                    msg += " or one of the init containers: [%s]" % " ".join(inits)
                raise _bad(msg)
            container = names[0]
        elif container not in names and container not in inits:
            raise _bad("container %s is not valid for pod %s" % (container, self.name))
        text = self.store.pod_logs.get((self.namespace, self.name, container))
        if text is None:
            phase = (pod.get("status") or {}).get("phase", "Pending")
            if phase == "Pending":
                raise _bad('container "%s" in pod "%s" is waiting to start: '
                           'ContainerCreating' % (container, self.name))
            text = ""
        tail = self.req.q("tailLines")
        if tail:
            lines = text.splitlines(True)
            text = "".join(lines[-int(tail):]) if int(tail) > 0 else ""
        self.h._send(200, text.encode(), "text/plain", self.req)

    def eviction(self):
        body = _decode_body(self.req)
        if self.store.get("pods", self.namespace, self.name) is None:
            raise self._not_found()
        self.store.admission.evict(self.store, self.namespace, self.name, body)
        self.h._send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Success", "code": 201}, self.req)

    def binding(self):
        body = _decode_body(self.req)
        target = ((body or {}).get("target") or {}).get("name")
        if not target:
            raise _bad("target.name: Required value")

        def fn(cur):
            node = (cur.get("spec") or {}).get("nodeName")
            if node:
                raise ApiError(409, "Conflict", "Operation cannot be fulfilled on "
                               "pods/binding \"%s\": pod %s is already assigned to node \"%s\""
                               % (self.name, self.name, node))
            cur.setdefault("spec", {})["nodeName"] = target
            return cur

        self.store.patch("pods", self.namespace, self.name, fn, field_manager="kube-scheduler")
        self.h._send_json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Success", "code": 201}, self.req)

    # --- watch ---------------------------------------------------------------------

    def watch(self):
        q = self.req.query
        lreq = parse_label_selector(q.get("labelSelector"))
        freq = parse_field_selector(q.get("fieldSelector"), self.info.key,
                                    self.store._selectable(self.info))
        timeout = q.get("timeoutSeconds")
        deadline = time.monotonic() + (float(timeout) if timeout else 1e9)
        bookmarks = self.req.flag("allowWatchBookmarks")
        initial = q.get("sendInitialEvents", "").lower() == "true"
        rv = q.get("resourceVersion") or ""
        if rv not in ("", "0") and not rv.isdigit():
            raise _bad('invalid resource version "%s"' % rv)
        key, ns = self.info.key, self.namespace

        def matches(obj):
            if obj is None:
                return False
            if ns and obj["metadata"].get("namespace") != ns:
                return False
            if lreq and not match_labels(lreq, obj["metadata"].get("labels")):
                return False
            return not freq or match_fields(freq, obj)

        h = self.h
        h.close_connection = False
        head = ["HTTP/1.1 200 OK", "Content-Type: application/json",
                "Transfer-Encoding: chunked", "Cache-Control: no-cache, private",
                "Date: " + h.date_time_string()]
        h.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())

        def send(etype, obj):
            data = json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() \
                + b"\n"
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        def bookmark(last, annotations=None):
            meta = {"resourceVersion": str(last)}
            if annotations:
                meta["annotations"] = annotations
            send("BOOKMARK", {"kind": self.info.kind, "apiVersion": self.api_version,
                              "metadata": meta})

        try:
            if rv in ("", "0") or initial:
                items, list_rv = self.store.list_with_rv(key, ns, lreq, freq, copy=False)
                for obj in items:
                    send("ADDED", self._out(obj))
                last = int(list_rv)
                if initial and bookmarks:
                    bookmark(last, {"k8s.io/initial-events-end": "true"})
            else:
                last = int(rv)
            last_bookmark = time.monotonic()
            while not h.server.stopping and not h.server.paused:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    events = self.store.events_since(last, min(WATCH_POLL, remaining))
                except Gone as gone:
                    send("ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                   "status": "Failure", "reason": "Expired", "code": 410,
                                   "message": "too old resource version: %s (%s)"
                                   % (last, gone.args[0])})
                    break
                for erv, etype, eres, obj, old in events:
                    last = erv
                    if eres != key:
                        continue
                    now_match = matches(obj)
                    if etype == "MODIFIED":
                        was = matches(old)
                        if now_match and not was:
                            etype = "ADDED"
                        elif was and not now_match:
                            etype = "DELETED"
                        elif not now_match:
                            continue
                    elif not now_match:
                        continue
                    send(etype, self._out(obj))
                if not events:
                    if _client_gone(h.connection):
                        h.close_connection = True
                        return
                    if bookmarks and time.monotonic() - last_bookmark > BOOKMARK_EVERY:
                        bookmark(last)
                        last_bookmark = time.monotonic()
            if h.server.paused:           # an outage cuts the stream, no clean end
                h.close_connection = True
                h.connection.shutdown(socket.SHUT_RDWR)
                return
            h.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            h.close_connection = True


def _client_gone(sock):
    import select
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
