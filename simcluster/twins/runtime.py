"""The twins' event loop: one worker thread, a timer heap and level-triggered passes.

Store subscribers run in the writer's thread, so the callback only records that
something changed. The worker then runs every controller's reconcile() in a
fixed order; each reconcile compares the cluster with what it should be and
writes only differences, so passes converge. Timers (pod start delays, MIG
reconfiguration) just request another pass at a later time. One thread means
the controllers never race each other (a real cluster's controllers do, but
every one of them tolerates conflicts, and so do ours: see util.retry).
"""

import heapq
import itertools
import logging
import threading
import time
import traceback

LOG = logging.getLogger("simcluster.twins")

# Resources whose changes never matter to a controller: skipping them keeps the
# twins idle under a benchmark that creates ConfigMaps or Secrets in a loop.
IGNORED = {"events", "events.events.k8s.io", "secrets", "configmaps", "leases.coordination.k8s.io",
           "serviceaccounts", "roles.rbac.authorization.k8s.io",
           "rolebindings.rbac.authorization.k8s.io", "clusterroles.rbac.authorization.k8s.io",
           "clusterrolebindings.rbac.authorization.k8s.io", "endpoints",
           "endpointslices.discovery.k8s.io", "controllerrevisions.apps",
           "resourcequotas", "limitranges", "networkpolicies.networking.k8s.io"}


class Runtime:
    def __init__(self):
        self._cond = threading.Condition()
        self._timers = []            # heap of (due, seq)
        self._seq = itertools.count()
        self._dirty = True
        self._busy = False
        self._stopped = False
        self._thread = None
        self.controllers = []        # objects with reconcile()
        self.deleted = []            # (resource, obj) DELETED events for the garbage collector
        self.errors = []             # tracebacks of failed passes (tests assert it stays empty)
        self.passes = 0
        self.on_change = None        # fn(resource) called for every event (cache invalidation)

    # -- called from any thread ------------------------------------------------
    def on_event(self, event_type, resource, obj):
        if self.on_change is not None:
            self.on_change(resource)
        if resource in IGNORED:
            return
        with self._cond:
            if event_type == "DELETED":
                self.deleted.append((resource, obj))
            self._dirty = True
            self._cond.notify_all()

    def kick(self):
        with self._cond:
            self._dirty = True
            self._cond.notify_all()

    def after(self, delay):
        """Request a pass `delay` seconds from now."""
        with self._cond:
            heapq.heappush(self._timers, (time.monotonic() + max(0.0, delay), next(self._seq)))
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

    def idle(self, horizon=0.0):
        """True when no pass is running or due within `horizon` seconds."""
        with self._cond:
            if self._dirty or self._busy:
                return False
            return not self._timers or self._timers[0][0] > time.monotonic() + horizon

    def settle(self, timeout=10.0, horizon=5.0):
        """Wait until passes stop and no timer is due within `horizon` s (tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.idle(horizon):
                return True
            time.sleep(0.01)
        return False

    # -- worker thread -------------------------------------------------------------
    def _loop(self):
        while True:
            with self._cond:
                while not self._stopped:
                    now = time.monotonic()
                    while self._timers and self._timers[0][0] <= now:
                        heapq.heappop(self._timers)
                        self._dirty = True
                    if self._dirty:
                        break
                    wait = self._timers[0][0] - now if self._timers else None
                    self._cond.wait(wait)
                if self._stopped:
                    return
                self._dirty = False
                self._busy = True
            try:
                self.run_pass()
            finally:
                with self._cond:
                    self._busy = False

    def run_pass(self):
        self.passes += 1
        for ctl in self.controllers:
            if self._stopped:
                return
            try:
                ctl.reconcile()
            except Exception:  # keep the loop alive; tests check runtime.errors
                text = traceback.format_exc()
                LOG.error("twin %s failed:\n%s", type(ctl).__name__, text)
                self.errors.append(text)
                self.after(0.2)

    def take_deleted(self):
        with self._cond:
            out, self.deleted = self.deleted, []
        return out
