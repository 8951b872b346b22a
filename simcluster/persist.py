"""`--state FILE`: the object store survives a restart of the simulated API server.

FILE is a snapshot (JSON: resourceVersion and every object); FILE.journal gets one
line per committed change, written and flushed under the store lock before the write
is answered, so an acknowledged write survives even a SIGKILL of the process (the
operating system keeps the file's data), like etcd's write-ahead log. On start the
snapshot and the journal are read, a new snapshot is written atomically (temporary
file, fsync, rename) and the journal starts empty; a clean stop does the same.
resourceVersions continue from the highest one stored. The watch history starts
empty at that resourceVersion, so a watch or a continue token from before the
restart gets 410 Expired and the client lists again, as after a real restart.
"""

import itertools
import json
import os

from . import controllers

CRD = "customresourcedefinitions.apiextensions.k8s.io"


def _write_atomic(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:
        dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


class Journal:
    def __init__(self, path):
        self.path = path
        self._fh = open(path, "a", encoding="utf-8")

    def append(self, etype, resource, obj):
        meta = obj["metadata"]
        if etype == "DELETED":
            rec = {"t": "D", "r": resource, "ns": meta.get("namespace"), "n": meta["name"],
                   "rv": meta.get("resourceVersion")}
        else:
            rec = {"t": "P", "r": resource, "o": obj}
        self._fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._fh.flush()

    def close(self):
        try:
            self._fh.close()
        except OSError:
            pass


def _read(path):
    objects, rv = {}, 0
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        rv = int(data.get("resourceVersion") or 0)
        for resource, items in (data.get("objects") or {}).items():
            table = objects.setdefault(resource, {})
            for obj in items:
                meta = obj["metadata"]
                table[(meta.get("namespace"), meta["name"])] = obj
    journal = path + ".journal"
    if os.path.exists(journal):
        with open(journal, encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:        # a line cut by a crash: the write was not answered
                    break
                table = objects.setdefault(rec["r"], {})
                if rec["t"] == "D":
                    table.pop((rec.get("ns"), rec["n"]), None)
                    rv = max(rv, int(rec.get("rv") or 0))
                else:
                    obj = rec["o"]
                    meta = obj["metadata"]
                    table[(meta.get("namespace"), meta["name"])] = obj
                    rv = max(rv, int(meta.get("resourceVersion") or 0))
    return objects, rv


def snapshot(store, path):
    """Write the whole store to `path` atomically and start an empty journal."""
    with store._lock:
        tables = {res: list(objs.values()) for res, objs in store._objs.items() if objs}
        rv = store._rv
        if store.journal is not None:
            store.journal.close()
        data = json.dumps({"resourceVersion": str(rv), "objects": tables},
                          separators=(",", ":"))
        _write_atomic(path, data)
        with open(path + ".journal", "w", encoding="utf-8"):
            pass
        store.journal = Journal(path + ".journal")


def restore(store, path):
    """Load `path` (+ journal) into a fresh store; True when there was a state."""
    if not os.path.exists(path) and not os.path.exists(path + ".journal"):
        snapshot(store, path)
        return False
    objects, rv = _read(path)
    with store._lock:
        store._objs.clear()
        store._dependents.clear()
        store._history.clear()
        # CRDs first: the registry must serve their resources before their objects
        for key, obj in (objects.get(CRD) or {}).items():
            store._put(CRD, (None, key[1]), obj)
        for resource, table in objects.items():
            if resource == CRD:
                continue
            for key, obj in table.items():
                store._put(resource, key, obj)
        store._rv = max(rv, store._rv if not objects else 0)
        store._dropped_upto = store._rv
        ips = [s.get("spec", {}).get("clusterIP") or "" for s in store._objs["services"].values()]
        nums = [int(ip.split(".")[2]) * 250 + int(ip.split(".")[3]) - 1
                for ip in ips if ip.startswith("10.96.") and ip.count(".") == 3]
        store._ip = itertools.count(max(nums + [9]) + 1)
    store._sync_crds()
    controllers.attach(store).resync()     # the objects came in without events
    snapshot(store, path)
    return True


def close(store, path):
    """Clean stop: one snapshot, empty journal."""
    snapshot(store, path)
    if store.journal is not None:
        store.journal.close()
        store.journal = None
