"""The HTTP front of the simulated API server.

ThreadingHTTPServer, HTTP/1.1 keep-alive; every response goes out in one
write (headers + body) so Nagle/delayed-ACK never adds latency; watches are
chunked streams (simcluster/watch.py). Routing follows the API server's URL layout:
/api/v1[/namespaces/NS]/PLURAL[/NAME[/SUB]] and /apis/GROUP/VERSION/...; a resource
request is served by simcluster/verbs.py (list paging: simcluster/paging.py).
"""

import json
import os
import socket
import sys
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import api_faults, kai_metrics, ksm, openapi, protobuf
from .discovery import Discovery
from .errors import ApiError, bad_request, not_found_path
from .openapi import OpenAPI
from .registry import SERVER_VERSION
from .request import Request
from .stats import Stats
from .verbs import ResourceContext

REASONS = {200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Bad Request",
           401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
           409: "Conflict", 410: "Gone", 415: "Unsupported Media Type",
           422: "Unprocessable Entity", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
           504: "Gateway Timeout"}

LOG_REQUESTS = bool(os.environ.get("SIMCLUSTER_LOG_REQUESTS"))


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
            self.send_json(exc.code, status, req, getattr(exc, "headers", ()))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug: answer like the API server does, log it
            traceback.print_exc()
            self.send_json(500, ApiError(500, "InternalError",
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

    def send(self, code, body, ctype="application/json", req=None, extra=()):
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

    def send_json(self, code, obj, req=None, extra=()):
        if req is not None and isinstance(obj, dict) and self._wants_protobuf(req) \
                and protobuf.can_encode(obj.get("kind", "")):
            self.send(code, protobuf.encode(obj), protobuf.CONTENT_TYPE, req, extra)
            return
        self.send(code, json.dumps(obj, separators=(",", ":")).encode(), "application/json",
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
            return self.send_json(200, {"paths": ["/api", "/api/v1", "/apis", "/openapi/v2",
                                                  "/openapi/v3",
                                                  "/version", "/healthz"]})
        head = parts[0]
        if head in ("healthz", "livez", "readyz"):
            srv.stats.count("get", "nonresource")
            return self.send(200, b"ok", "text/plain; charset=utf-8")
        if head == "version":
            srv.stats.count("get", "nonresource")
            return self.send_json(200, getattr(srv.store.registry, "server_version", SERVER_VERSION))
        if head == "openapi":
            srv.stats.count("get", "openapi")
            return self._openapi(req, parts[1:])
        if head == "api":
            if len(parts) == 1:
                srv.stats.count("get", "discovery")
                host = "%s:%d" % srv.server_address[:2]
                return self.send(200, srv.discovery.api_versions(host))
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            if len(parts) == 1:
                srv.stats.count("get", "discovery")
                return self.send(200, srv.discovery.group_list())
            if len(parts) == 2:
                srv.stats.count("get", "discovery")
                body = srv.discovery.group(parts[1])
                if body is None:
                    raise not_found_path()
                return self.send(200, body)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise not_found_path()
        if not rest:
            srv.stats.count("get", "discovery")
            body = srv.discovery.resource_list(group, version)
            if body is None:
                raise not_found_path()
            return self.send(200, body)
        return self._resource(req, group, version, rest)

    def _sim(self, req, parts):
        stats = self.server.stats
        if parts == ["stats"] and req.method == "GET":
            return self.send_json(200, stats.snapshot())
        if parts == ["stats", "reset"] and req.method == "POST":
            stats.reset()
            return self.send_json(200, stats.snapshot())
        if parts == ["api_errors"]:
            return self.send_json(200, self.server.api_faults.endpoint(req.method, req.body))
        if parts == ["pause"] and req.method == "POST":
            try:
                seconds = float((json.loads(req.body or b"{}") or {}).get("seconds", 0))
            except (ValueError, TypeError, AttributeError):
                raise bad_request('body must be {"seconds": N}')
            if not 0 <= seconds <= 3600:
                raise bad_request("seconds must be between 0 and 3600, got %s" % seconds)
            self.server.pause(seconds)
            return self.send_json(200, {"paused_seconds": seconds})
        if parts[:1] == ["dcgm"] and getattr(self.server, "dcgm", None) is not None:
            return self.send(*self.server.dcgm.handle(req.method, parts[1:], req.body))  # simcluster/dcgm.py
        if parts == ["audit"] and req.method == "GET":
            if getattr(self.server, "audit", None) is None:
                raise ApiError(404, "NotFound", "no audit log: the cluster file has no audit: {policy: FILE}")
            lines = self.server.audit.lines()
            return self.send(200, ("\n".join(lines) + ("\n" if lines else "")).encode(), "application/x-ndjson")
        if parts[:1] == ["kube-state-metrics"]:
            return self.send(*ksm.handle(self.server.store, req.method, parts[1:]))  # simcluster/ksm.py
        if parts[:1] == ["kai-queue-controller"]:
            return self.send(*kai_metrics.handle(self.server.store, req.method, parts[1:]))  # simcluster/kai_metrics.py
        raise not_found_path()

    def _openapi(self, req, parts):
        if parts == ["v2"]:
            if any(a in req.accept for a in openapi.V2_PROTOBUF_ACCEPT) \
                    and "json" not in req.accept:
                return self.send(200, openapi.v2_protobuf(), openapi.V2_PROTOBUF)
            return self.send(200, openapi.v2_json())
        if parts[:1] != ["v3"]:
            raise not_found_path()
        if len(parts) == 1:
            return self.send(200, self.server.openapi.index())
        body = self.server.openapi.document("/".join(parts[1:]))
        if body is None:
            raise not_found_path()
        return self.send(200, body, "application/json",
                         extra=["Etag: \"%d\"" % self.server.registry.generation])

    def _resource(self, req, group, version, rest):
        watch_prefix = False
        if rest[0] == "watch":
            watch_prefix = True
            rest = rest[1:]
            if not rest:
                raise not_found_path()
        if len(rest) >= 3 and rest[0] == "namespaces" and \
                not (len(rest) == 3 and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
        else:
            namespace = None
        if len(rest) > 3:
            raise not_found_path()
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        info = self.server.registry.lookup(group, version, plural)
        if info is None:
            raise not_found_path()
        if namespace is not None and not info.namespaced:
            raise not_found_path()
        if sub is not None and sub not in info.subresources:
            raise not_found_path()
        ctx = ResourceContext(self, req, info, version, namespace, name, sub)
        if watch_prefix:
            req.query["watch"] = "true"
        return ctx.serve()
