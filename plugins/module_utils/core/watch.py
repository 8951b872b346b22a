# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One watch for every wait of the collection (ClusterPolicy, operator rollout, MIG state).

    follow = ObjectWatch(kube, "v1", "Node", name="gpu-1")
    objects = follow.sync()                       # LIST: {key: object}, resourceVersion kept
    for event_type, obj in follow.events(deadline):
        ...                                       # break whenever the wait is decided

- resumes from the last resourceVersion seen (objects and BOOKMARK events), so nothing
  between the LIST and the watch, or between two watch requests, is lost;
- 410 Gone (the version left the server's window): LIST again and hand the differences
  to the caller as ADDED/MODIFIED/DELETED events;
- dropped streams, timeouts, 429 and 5xx, an API server restarting mid-watch: back off
  and resume; an outage longer than `outage_seconds` (or past the deadline) raises the
  ApiError (verb WATCH) naming the kind, the object and the URL.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import retry_after as _retry_after

try:
    from kubernetes.dynamic.resource import ResourceInstance
except ImportError:  # pragma: no cover - the module base reports the missing library
    ResourceInstance = None


def _key(obj):
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace") or "", meta.get("name"))


def instance(obj, kind):
    """A dict as the ResourceInstance kubernetes.core's waiter predicates expect."""
    return ResourceInstance(None, dict(obj, kind=obj.get("kind") or kind))


def _default_watch():
    from kubernetes import watch as k8s_watch  # the module base guards the import
    return k8s_watch.Watch()


class ObjectWatch(object):
    def __init__(self, kube, api_version, kind, namespace=None, name=None, label_selector=None,
                 field_selector=None, watch_factory=None, clock=None, sleep=None, outage_seconds=None):
        self.kube = kube
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.label_selector = label_selector
        selectors = [s for s in (field_selector, ("metadata.name=%s" % name) if name else None) if s]
        self.field_selector = ",".join(selectors) or None
        self.watch_factory = watch_factory or _default_watch
        self.clock = clock or getattr(kube, "_clock", time.monotonic)
        self.sleep = sleep or getattr(kube, "_sleep", time.sleep)
        self.outage_seconds = outage_seconds if outage_seconds is not None else getattr(kube, "retry_seconds", 30)
        self.objects = {}
        self.resource_version = None
        self.relists = 0

    def sync(self):
        """LIST: the current objects ({namespace/name: object}) and the version to watch from."""
        items, version = self.kube.list(self.api_version, self.kind, namespace=self.namespace,
                                        label_selector=self.label_selector, field_selector=self.field_selector)
        self.objects = dict((_key(o), o) for o in items)
        self.resource_version = version
        return self.objects

    def _relist(self):
        before = self.objects
        self.relists += 1
        after = self.sync()
        for key, obj in after.items():
            old = before.get(key)
            if old is None:
                yield "ADDED", obj
            elif (old.get("metadata") or {}).get("resourceVersion") != (obj.get("metadata") or {}).get(
                    "resourceVersion"):
                yield "MODIFIED", obj
        for key, obj in before.items():
            if key not in after:
                yield "DELETED", obj

    def _stream(self, remaining):
        resource = self.kube.resource(self.api_version, self.kind)
        params = dict(resource_version=self.resource_version, allow_watch_bookmarks=True, serialize=False,
                      timeout_seconds=max(1, int(remaining + 0.999)), _request_timeout=(10, remaining + 10))
        for key in ("namespace", "label_selector", "field_selector"):
            if getattr(self, key):
                params[key] = getattr(self, key)
        watcher = self.watch_factory()
        return watcher, watcher.stream(resource.get, **params)

    def events(self, deadline):
        """(type, object dict) of every change until the clock reaches `deadline`."""
        if self.resource_version is None:
            yield from self._relist()
        backoff, down_since = 0.5, None
        while True:
            remaining = deadline - self.clock()
            if remaining <= 0:
                return
            watcher = stream = None
            try:
                watcher, stream = self._stream(remaining)
                for event in stream:
                    down_since, backoff = None, 0.5
                    etype = event.get("type")
                    obj = event.get("raw_object") or event.get("object") or {}
                    if hasattr(obj, "to_dict"):
                        obj = obj.to_dict()
                    version = (obj.get("metadata") or {}).get("resourceVersion")
                    if version:
                        self.resource_version = version
                    if etype == "BOOKMARK":
                        continue
                    if etype == "DELETED":
                        self.objects.pop(_key(obj), None)
                    else:
                        self.objects[_key(obj)] = obj
                    yield etype, obj
                    if self.clock() >= deadline:
                        return
            except GeneratorExit:
                raise
            except Exception as exc:  # every client failure: translated, then resumed or raised
                err = self.kube.error(exc, "WATCH", self.kind, self.name, self.namespace)
                if err.status == 410:
                    yield from self._relist()
                    continue
                if not _transient(err):
                    raise err
                now = self.clock()
                down_since = now if down_since is None else down_since
                if now - down_since >= self.outage_seconds or now >= deadline:
                    raise err
                wait = (_retry_after(exc) if err.status == 429 else None) or backoff
                self.sleep(min(wait, max(0.0, deadline - now)))
                backoff = min(backoff * 2, 4.0)
            finally:
                if stream is not None:
                    stream.close()
                if watcher is not None:
                    watcher.stop()


def _transient(err):
    return err.status is None or err.status == 429 or err.status >= 500
