"""Watch streams: a chunked HTTP response of watch events, as the API server sends them.

From resourceVersion (or an initial list of ADDED events, with sendInitialEvents the
k8s.io/initial-events-end bookmark), label/field selectors re-applied to both sides of a
MODIFIED event (so an object leaving the selection is DELETED for this watch), bookmarks when
the client allows them, 410 Expired as an ERROR event, the stream cut by an outage.
"""

import json
import socket
import time

from .selectors import match_fields, match_labels, parse_field_selector, parse_label_selector
from .errors import bad_request
from .store import Gone

WATCH_POLL = 0.5          # seconds between checks of a silent watch (disconnect, deadline)
BOOKMARK_EVERY = 10.0     # seconds between bookmarks when the client allows them


def serve(ctx):
    """Stream the watch of one ResourceContext (simcluster/verbs.py) until its deadline or the end."""
    q = ctx.req.query
    lreq = parse_label_selector(q.get("labelSelector"))
    freq = parse_field_selector(q.get("fieldSelector"), ctx.info.key,
                                ctx.store._selectable(ctx.info))
    timeout = q.get("timeoutSeconds")
    deadline = time.monotonic() + (float(timeout) if timeout else 1e9)
    bookmarks = ctx.req.flag("allowWatchBookmarks")
    initial = q.get("sendInitialEvents", "").lower() == "true"
    rv = q.get("resourceVersion") or ""
    if rv not in ("", "0") and not rv.isdigit():
        raise bad_request('invalid resource version "%s"' % rv)
    key, ns = ctx.info.key, ctx.namespace

    def matches(obj):
        if obj is None:
            return False
        if ns and obj["metadata"].get("namespace") != ns:
            return False
        if lreq and not match_labels(lreq, obj["metadata"].get("labels")):
            return False
        return not freq or match_fields(freq, obj)

    h = ctx.h
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
        send("BOOKMARK", {"kind": ctx.info.kind, "apiVersion": ctx.api_version,
                          "metadata": meta})

    try:
        if rv in ("", "0") or initial:
            items, list_rv = ctx.store.list_with_rv(key, ns, lreq, freq, copy=False)
            for obj in items:
                send("ADDED", ctx.present(obj))
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
                events = ctx.store.events_since(last, min(WATCH_POLL, remaining))
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
                send(etype, ctx.present(obj))
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
