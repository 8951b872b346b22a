"""The twins' runtime: informer cache, full-pass and keyed controllers, per-key timers, pause."""
import time

from simcluster.store import Store
from simcluster.twins.runtime import Informer, Runtime


def cm(name, ns="default", **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": data}


def _wait(pred, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_informer_follows_events_and_ignores_stale_ones():
    store = Store()
    inf = Informer(store)
    store.subscribe(inf.on_event)
    first = store.create("configmaps", cm("a", v="1"), admit=False)
    assert inf.get("configmaps", "default", "a")["data"] == {"v": "1"}     # listed lazily
    second = store.merge_patch("configmaps", "default", "a", {"data": {"v": "2"}})
    assert inf.get("configmaps", "default", "a")["data"] == {"v": "2"}
    # a late event of an older version (another writer thread) changes nothing
    assert inf.on_event("MODIFIED", "configmaps", first) is False
    assert inf.get("configmaps", "default", "a")["metadata"]["resourceVersion"] == \
        second["metadata"]["resourceVersion"]
    store.delete("configmaps", "default", "a")
    assert inf.get("configmaps", "default", "a") is None
    # ... nor does it bring a deleted object back
    assert inf.on_event("MODIFIED", "configmaps", second) is False
    assert [o for o in inf.list("configmaps") if o["metadata"]["name"] == "a"] == []
    assert len(inf.list("configmaps")) == len(store.list("configmaps"))


def test_informer_index_by_node():
    store = Store()
    inf = Informer(store)
    inf.add_index("pods", "node", lambda p: [p["spec"].get("nodeName")])
    store.subscribe(inf.on_event)
    for i, node in enumerate(["n1", "n2", "n1"]):
        store.create("pods", {"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": "p%d" % i, "namespace": "default"},
                              "spec": {"nodeName": node, "containers": [{"name": "c",
                                                                          "image": "i"}]}},
                     admit=False)
    assert [p["metadata"]["name"] for p in inf.by_index("pods", "node", "n1")] == ["p0", "p2"]
    store.delete("pods", "default", "p0")
    assert [p["metadata"]["name"] for p in inf.by_index("pods", "node", "n1")] == ["p2"]


class FullPass:
    watches = {"configmaps"}

    def __init__(self):
        self.runs = 0

    def reconcile(self):
        self.runs += 1


class Keyed:
    def __init__(self, runtime):
        self.runtime = runtime
        self.seen = []
        self.watches = {"secrets": lambda etype, obj: [obj["metadata"]["name"]]}

    def resync(self):
        return ["initial"]

    def reconcile_key(self, key):
        self.seen.append(key)
        if key == "later":
            return
        if key == "timer":
            self.runtime.after(0.05, "later", self)


def _runtime():
    store = Store()
    rt = Runtime()
    full, keyed = FullPass(), Keyed(rt)
    rt.controllers = [full, keyed]
    store.subscribe(rt.on_event)
    rt.start()
    return store, rt, full, keyed


def test_full_pass_twins_run_only_for_what_they_watch():
    store, rt, full, _keyed = _runtime()
    try:
        rt.kick()
        assert rt.settle(5, 0)
        runs = full.runs
        store.create("services", {"apiVersion": "v1", "kind": "Service",
                                  "metadata": {"name": "s", "namespace": "default"},
                                  "spec": {"ports": [{"port": 80}]}}, admit=False)
        assert rt.settle(5, 0) and full.runs == runs
        store.create("configmaps", cm("x"), admit=False)
        assert _wait(lambda: full.runs == runs + 1)
    finally:
        rt.stop()


def test_keyed_twins_get_their_keys_once_and_per_key_timers():
    store, rt, _full, keyed = _runtime()
    try:
        rt.kick()
        assert _wait(lambda: "initial" in keyed.seen)
        rt.pause(0.3)            # queue several events for one key while nothing runs
        for i in range(3):
            store.create("secrets", {"apiVersion": "v1", "kind": "Secret",
                                     "metadata": {"name": "s%d" % i, "namespace": "default"}},
                         admit=False)
            store.merge_patch("secrets", "default", "s%d" % i, {"data": {"k": "dg=="}})
        time.sleep(0.1)
        assert "s0" not in keyed.seen, "worked while paused"
        assert _wait(lambda: {"s0", "s1", "s2"} <= set(keyed.seen))
        assert rt.settle(5, 0)
        assert sorted(k for k in keyed.seen if k.startswith("s")) == ["s0", "s1", "s2"]
        rt.enqueue(keyed, ["timer"])
        assert _wait(lambda: "later" in keyed.seen)
        assert keyed.seen.index("later") > keyed.seen.index("timer")
    finally:
        rt.stop()


def test_a_failing_key_is_retried_and_recorded():
    rt = Runtime()
    calls = []

    class Flaky:
        watches = {}

        def reconcile_key(self, key):
            calls.append(key)
            if len(calls) == 1:
                raise RuntimeError("boom")

    ctl = Flaky()
    rt.controllers = [ctl]
    rt.start()
    try:
        rt.enqueue(ctl, ["k"])
        assert _wait(lambda: len(calls) == 2)
        assert len(rt.errors) == 1 and "boom" in rt.errors[0]
    finally:
        rt.stop()
