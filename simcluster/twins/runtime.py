"""The twins' event loop: an informer cache, one worker thread, timers and work queues.

How a twin (controller) plugs in
================================
A twin is an object in `Runtime.controllers` (built in simcluster/twins/__init__.py);
the list order is the order in which work runs inside one loop iteration. A twin
uses one of two modes; both are supported and can be mixed.

Full-pass mode (the original interface; small or cluster-wide twins)::

    class MyTwin:
        watches = {"nodes", "pods"}     # optional; default: every resource not in IGNORED
        def reconcile(self): ...         # compare the whole cluster with what it should be

  Instead of `watches`, `unwatched = {...}` names resources to skip on top of IGNORED
  (for a twin that reads open-ended kinds). `reconcile()` runs once per loop iteration
  in which a watched resource changed,
  `runtime.kick()` was called or a bare timer `runtime.after(delay)` fell due.

Keyed mode (informer + work queue, like a client-go controller; heavy twins)::

    class MyTwin:
        watches = {"pods": lambda etype, obj: [key, ...],   # keys an event touches
                   "nodes": ...}
        def resync(self): return [key, ...]    # every key (on start and on kick())
        def reconcile_key(self, key): ...      # make one key right; read ctx caches

  A key is any hashable value (usually (namespace, name) or a node name). The
  key functions run in the writer's thread right after the informer applied the
  event: keep them cheap and read-only. Keys are deduplicated while queued. Timers
  are per key: `runtime.after(delay, key, ctl=self)` re-queues one key. A failed
  reconcile_key is retried after 0.2 s. Explicitly watched resources are delivered
  even when they are in IGNORED.

Reads come from the informer (`ctx.list`, `ctx.get_cached`, `ctx.by_index`), which
is kept current by the store's events, so a pass costs no store copies. Writes go
through the store (admission, resourceVersions) like a real controller's.

One loop iteration takes a snapshot of what is due (dirty full-pass twins, queued
keys) and then runs the twins in list order; whatever their writes cause is handled
in the next iteration. So a keyed twin that reads state derived by an earlier
full-pass twin (the operator's ready pods) never sees it older than the event
that queued the key. One thread means the twins never race each other (a real
cluster's controllers do; ours still tolerate conflicts from API clients:
util.write_status ignores 404/409 and the next event or timer retries).
"""

import heapq
import itertools
import logging
import threading
import time
import traceback

LOG = logging.getLogger("simcluster.twins")

# Resources whose changes never matter to a full-pass twin: skipping them keeps the
# twins idle under a benchmark that creates ConfigMaps or Secrets in a loop.
IGNORED = {"events", "events.events.k8s.io", "secrets", "configmaps", "leases.coordination.k8s.io",
           "serviceaccounts", "roles.rbac.authorization.k8s.io",
           "rolebindings.rbac.authorization.k8s.io", "clusterroles.rbac.authorization.k8s.io",
           "clusterrolebindings.rbac.authorization.k8s.io", "endpoints",
           "endpointslices.discovery.k8s.io", "controllerrevisions.apps",
           "resourcequotas", "limitranges", "networkpolicies.networking.k8s.io"}
RETRY = 0.2


def _rv(obj):
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return None


def _key(obj):
    meta = obj["metadata"]
    return (meta.get("namespace"), meta["name"])


class Informer:
    """Per-resource caches kept current by store events (a shared informer).

    A resource is listed from the store the first time it is read; from then on
    events update it. resourceVersions order events that two writer threads
    deliver out of order; tombstones keep a late stale event from resurrecting a
    deleted object. Cached objects are shared: never mutate them."""

    def __init__(self, store):
        self.store = store
        self._lock = threading.Lock()
        self._objs = {}        # resource -> {(ns, name): obj}
        self._gone = {}        # resource -> {(ns, name): rv of the DELETED event}
        self._sorted = {}      # resource -> [obj] sorted by (namespace, name)
        self._indexers = {}    # resource -> {index: fn(obj) -> iterable of values}
        self._index = {}       # (resource, index) -> {value: {key: obj}}

    def add_index(self, resource, name, fn):
        with self._lock:
            self._indexers.setdefault(resource, {})[name] = fn
            table = self._objs.get(resource)
            idx = self._index[(resource, name)] = {}
            for key, obj in (table or {}).items():
                for value in fn(obj) or ():
                    idx.setdefault(value, {})[key] = obj

    def _unindex(self, resource, key, obj):
        for name, fn in self._indexers.get(resource, {}).items():
            idx = self._index[(resource, name)]
            for value in fn(obj) or ():
                bucket = idx.get(value)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del idx[value]

    def _reindex(self, resource, key, obj):
        for name, fn in self._indexers.get(resource, {}).items():
            idx = self._index[(resource, name)]
            for value in fn(obj) or ():
                idx.setdefault(value, {})[key] = obj

    def _apply(self, etype, resource, obj):
        """Under the lock. Returns True when the cache changed."""
        table = self._objs.get(resource)
        if table is None:
            return False
        key = _key(obj)
        rv = _rv(obj)
        cur = table.get(key)
        gone = self._gone[resource]
        if rv is not None:
            cur_rv = _rv(cur) if cur is not None else None
            # a DELETED event may carry the deleted version's own resourceVersion
            if cur_rv is not None and (cur_rv > rv or (cur_rv == rv and etype != "DELETED")):
                return False
            if key in gone and gone[key] is not None and gone[key] >= rv:
                return False
        if cur is not None:
            self._unindex(resource, key, cur)
        if etype == "DELETED":
            if cur is None and key in gone:
                return False
            table.pop(key, None)
            gone[key] = rv
            if len(gone) > 20000:
                gone.clear()
        else:
            table[key] = obj
            gone.pop(key, None)
            self._reindex(resource, key, obj)
        self._sorted.pop(resource, None)
        return True

    def on_event(self, etype, resource, obj):
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            return False
        with self._lock:
            return self._apply(etype, resource, obj)

    def _ensure(self, resource):
        with self._lock:
            if resource in self._objs:
                return
            self._objs[resource] = {}
            self._gone[resource] = {}
        from ..errors import ApiError
        try:
            items = self.store.list(resource, None)
        except (ApiError, KeyError):     # unknown resource (CRD not installed)
            items = []
        with self._lock:
            for obj in items:
                self._apply("ADDED", resource, obj)

    def forget(self, resource):
        """Drop a cache (its CRD went away); the next read lists again."""
        with self._lock:
            self._objs.pop(resource, None)
            self._gone.pop(resource, None)
            self._sorted.pop(resource, None)
            for (res, name) in list(self._index):
                if res == resource:
                    self._index[(res, name)] = {}

    def list(self, resource):
        self._ensure(resource)
        with self._lock:
            out = self._sorted.get(resource)
            if out is None:
                table = self._objs.get(resource) or {}
                out = [table[k] for k in sorted(table, key=lambda k: (k[0] or "", k[1]))]
                self._sorted[resource] = out
            return out

    def get(self, resource, namespace, name):
        self._ensure(resource)
        with self._lock:
            return (self._objs.get(resource) or {}).get((namespace, name))

    def by_index(self, resource, index, value):
        self._ensure(resource)
        with self._lock:
            bucket = (self._index.get((resource, index)) or {}).get(value) or {}
            return [bucket[k] for k in sorted(bucket, key=lambda k: (k[0] or "", k[1]))]

    def cached(self, resource):
        with self._lock:
            return resource in self._objs


class Runtime:
    def __init__(self):
        self._cond = threading.Condition()
        self._timers = []            # heap of (due, seq, controller or None, key or None)
        self._seq = itertools.count()
        self._dirty = set()          # full-pass controllers due for reconcile()
        self._queues = {}            # keyed controller -> {key: None} (ordered set)
        self._busy = False
        self._stopped = False
        self._paused_until = 0.0
        self._thread = None
        self.controllers = []        # full-pass (reconcile) and keyed (reconcile_key) twins
        self.deleted = []            # (resource, obj) DELETED events for the garbage collector
        self.errors = []             # tracebacks of failed passes (tests assert it stays empty)
        self.passes = 0
        self.keyed_runs = 0
        self.on_change = None        # fn(event_type, resource, obj): the informer

    @staticmethod
    def keyed(ctl):
        return hasattr(ctl, "reconcile_key")

    # -- called from any thread ------------------------------------------------
    def on_event(self, event_type, resource, obj):
        if self.on_change is not None:
            self.on_change(event_type, resource, obj)
        queued = []
        for ctl in self.controllers:
            watches = getattr(ctl, "watches", None)
            if self.keyed(ctl):
                fn = (watches or {}).get(resource)
                if fn is not None:
                    keys = fn(event_type, obj)
                    if keys:
                        queued.append((ctl, keys))
        full = [ctl for ctl in self.controllers if not self.keyed(ctl) and (
            resource in ctl.watches if getattr(ctl, "watches", None) is not None
            else resource not in IGNORED and resource not in getattr(ctl, "unwatched", ()))]
        record = event_type == "DELETED" and resource not in IGNORED
        if not full and not queued and not record:
            return
        with self._cond:
            if record:
                self.deleted.append((resource, obj))
            self._dirty.update(full)
            for ctl, keys in queued:
                q = self._queues.setdefault(ctl, {})
                for k in keys:
                    q[k] = None
            self._cond.notify_all()

    def kick(self):
        """Every full-pass twin runs, every keyed twin resyncs all its keys."""
        resync = [(ctl, list(ctl.resync())) for ctl in self.controllers
                  if self.keyed(ctl) and hasattr(ctl, "resync")]
        with self._cond:
            self._dirty.update(c for c in self.controllers if not self.keyed(c))
            for ctl, keys in resync:
                q = self._queues.setdefault(ctl, {})
                for k in keys:
                    q[k] = None
            self._cond.notify_all()

    def enqueue(self, ctl, keys):
        with self._cond:
            q = self._queues.setdefault(ctl, {})
            for k in keys:
                q[k] = None
            self._cond.notify_all()

    def after(self, delay, key=None, ctl=None):
        """Work `delay` seconds from now: a full pass (no arguments), or one key of `ctl`."""
        with self._cond:
            heapq.heappush(self._timers, (time.monotonic() + max(0.0, delay), next(self._seq),
                                          ctl, key))
            self._cond.notify_all()

    def pause(self, seconds):
        """Stop working for `seconds` (the API server's pause fault); nothing is lost."""
        with self._cond:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)
            self._cond.notify_all()

    def start(self):
        self._thread = threading.Thread(target=self._loop, name="simcluster-twins", daemon=True)
        self._thread.start()

    def stop(self):
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _pending(self):
        return self._dirty or any(self._queues.values())

    def idle(self, horizon=0.0):
        """True when no work is running, queued or due within `horizon` seconds."""
        with self._cond:
            if self._busy or self._pending():
                return False
            return not self._timers or self._timers[0][0] > time.monotonic() + horizon

    def settle(self, timeout=10.0, horizon=5.0):
        """Wait until work stops and no timer is due within `horizon` s (tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.idle(horizon):
                return True
            time.sleep(0.01)
        return False

    # -- worker thread -------------------------------------------------------------
    def _fire(self, ctl, key):
        if ctl is None:
            self._dirty.update(c for c in self.controllers if not self.keyed(c))
        elif key is None or not self.keyed(ctl):
            if self.keyed(ctl):
                self._queues.setdefault(ctl, {}).update((k, None) for k in ctl.resync())
            else:
                self._dirty.add(ctl)
        else:
            self._queues.setdefault(ctl, {})[key] = None

    def _loop(self):
        while True:
            with self._cond:
                while not self._stopped:
                    now = time.monotonic()
                    if now < self._paused_until:
                        self._cond.wait(self._paused_until - now)
                        continue
                    while self._timers and self._timers[0][0] <= now:
                        _due, _seq, ctl, key = heapq.heappop(self._timers)
                        self._fire(ctl, key)
                    if self._pending():
                        break
                    wait = self._timers[0][0] - now if self._timers else None
                    self._cond.wait(wait)
                if self._stopped:
                    return
                dirty, self._dirty = self._dirty, set()
                queues, self._queues = self._queues, {}
                self._busy = True
            try:
                self.run_iteration(dirty, queues)
            finally:
                with self._cond:
                    self._busy = False

    def run_pass(self):
        """One full pass of every twin (tests drive the twins by hand with it)."""
        queues = {ctl: dict.fromkeys(ctl.resync()) for ctl in self.controllers
                  if self.keyed(ctl) and hasattr(ctl, "resync")}
        with self._cond:
            for ctl, q in self._queues.items():
                queues.setdefault(ctl, {}).update(q)
            self._queues = {}
            self._dirty = set()
        self.run_iteration(set(c for c in self.controllers if not self.keyed(c)), queues)

    def run_iteration(self, dirty, queues):
        self.passes += 1
        for ctl in self.controllers:
            if self._stopped:
                return
            if self.keyed(ctl):
                for key in queues.get(ctl) or ():
                    if self._stopped:
                        return
                    self.keyed_runs += 1
                    try:
                        ctl.reconcile_key(key)
                    except Exception:  # keep the loop alive; tests check runtime.errors
                        self._failed(ctl)
                        self.after(RETRY, key, ctl)
                continue
            if ctl not in dirty:
                continue
            try:
                ctl.reconcile()
            except Exception:
                self._failed(ctl)
                self.after(RETRY, None, ctl)

    def _failed(self, ctl):
        text = traceback.format_exc()
        LOG.error("twin %s failed:\n%s", type(ctl).__name__, text)
        self.errors.append(text)

    def take_deleted(self):
        with self._cond:
            out, self.deleted = self.deleted, []
        return out
