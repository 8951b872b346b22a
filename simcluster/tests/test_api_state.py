"""--state FILE (objects survive a restart, even a SIGKILL), the pause fault, and the
dry-run counters of /_sim/stats."""
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from simcluster import persist, testing
from simcluster.store import Store

CLUSTER = """\
nodes:
  - name: gpu-1
    gpus: {model: NVIDIA-H100-80GB-HBM3, count: 8, memory_mib: 81559, mig_capable: true}
    host_driver: "550.54.15"
  - name: cpu-1
"""


def call(sim, path, method="GET", body=None, ctype="application/json"):
    req = urllib.request.Request(sim.url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def cm(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture
def sim(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    s = testing.start(str(cluster), workdir=str(tmp_path / "work"),
                      state=str(tmp_path / "state.json"))
    yield s
    s.stop()


def _wait(pred, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("condition not met in %ss" % timeout)


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_objects_and_resource_versions_survive_a_restart(sim, kill):
    base = "/api/v1/namespaces/default/configmaps"
    assert call(sim, base, "POST", cm("keep", a="1"))[0] == 201
    code, obj = call(sim, base + "/keep", "PATCH", {"data": {"b": "2"}},
                     "application/merge-patch+json")
    assert code == 200
    assert call(sim, base, "POST", cm("gone"))[0] == 201
    assert call(sim, base + "/gone", "DELETE")[0] == 200
    _code, before = call(sim, "/api/v1/nodes")
    _code, listed = call(sim, base)
    sim.restart(kill=kill)
    code, again = call(sim, base + "/keep")
    assert code == 200 and again == obj
    assert call(sim, base + "/gone")[0] == 404
    _code, nodes = call(sim, "/api/v1/nodes")
    assert [n["metadata"]["uid"] for n in nodes["items"]] == \
        [n["metadata"]["uid"] for n in before["items"]]
    code, new = call(sim, base, "POST", cm("after"))
    assert int(new["metadata"]["resourceVersion"]) > int(listed["metadata"]["resourceVersion"])
    # a watch from before the restart is told to list again
    code, body = call(sim, base + "?watch=1&timeoutSeconds=1&resourceVersion=%s"
                      % obj["metadata"]["resourceVersion"])
    assert body["type"] == "ERROR" and body["object"]["code"] == 410


def test_state_file_is_written_atomically(tmp_path):
    path = str(tmp_path / "s.json")
    store = Store()
    assert persist.restore(store, path) is False
    store.create("configmaps", dict(cm("x"), metadata={"name": "x", "namespace": "default"}),
                 admit=False)
    with open(path + ".journal", "a", encoding="utf-8") as fh:
        fh.write('{"t": "P", "r": "configmaps", "o": {"metad')    # a write cut by a crash
    again = Store()
    assert persist.restore(again, path) is True
    assert again.get("configmaps", "default", "x")["data"] == {}
    assert again.resource_version == store.resource_version
    assert [f for f in os.listdir(tmp_path) if ".tmp." in f] == []
    with open(path, encoding="utf-8") as fh:
        assert json.load(fh)["resourceVersion"] == store.resource_version


def test_pause_stops_serving_and_keeps_state(sim):
    base = "/api/v1/namespaces/default/configmaps"
    call(sim, base, "POST", cm("before"))
    code, _ = call(sim, "/_sim/pause", "POST", {"seconds": 2})
    assert code == 200
    with pytest.raises((urllib.error.URLError, ConnectionError, socket.error)):
        urllib.request.urlopen(sim.url + base, timeout=5)
    assert call(sim, "/_sim/stats")[0] == 200          # the control endpoints stay up
    got = _wait(lambda: _try(sim, base + "/before"), timeout=30)
    assert got["metadata"]["name"] == "before"
    assert call(sim, "/_sim/pause", "POST", {"seconds": -1})[0] == 400


def _try(sim, path):
    try:
        code, body = call(sim, path)
    except (urllib.error.URLError, ConnectionError, socket.error):
        return None
    return body if code == 200 else None


def test_pause_cuts_open_watches(sim):
    ended = threading.Event()

    def watch():
        try:
            with urllib.request.urlopen(sim.url + "/api/v1/configmaps?watch=1", timeout=30) as r:
                while r.readline():
                    pass
        except Exception:      # noqa: BLE001 - any end is fine, only the timing matters
            pass
        ended.set()

    threading.Thread(target=watch, daemon=True).start()
    time.sleep(0.3)
    call(sim, "/_sim/pause", "POST", {"seconds": 1})
    assert ended.wait(10), "the watch stream stayed open through the outage"


def test_stats_count_dry_run_apart_and_reset(sim):
    base = "/api/v1/namespaces/default/configmaps"
    sim.reset_stats()
    assert call(sim, base + "?dryRun=All", "POST", cm("dry"))[0] == 201
    assert call(sim, base, "POST", cm("real"))[0] == 201
    assert call(sim, base + "/real?dryRun=All", "PATCH", {"data": {"x": "y"}},
                "application/merge-patch+json")[0] == 200
    stats = sim.stats()
    assert stats["by_resource"]["configmaps"] == {"create": 1}
    assert stats["dry_run"]["by_resource"]["configmaps"] == {"create": 1, "patch": 1}
    assert stats["dry_run"]["total"] == 2
    sim.reset_stats()
    stats = sim.stats()
    assert stats["total"] == 0 and stats["dry_run"]["total"] == 0
