"""Server-side printing (meta.k8s.io Table) compared with the real printers' output."""

import datetime

import pytest
import yaml

from kit.paths import CLUSTERPOLICY_CRD
from simcluster import jsonpath, tables
from simcluster.registry import ResourceInfo, Registry



class Req:
    def __init__(self, **q):
        self._q = q

    def q(self, name):
        return self._q.get(name)


def ago(seconds):
    t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def info(key):
    return Registry().get(key)


def render(key, obj, **kw):
    t = tables.table(info(key), [obj], "1", Req(), **kw)
    names = [c["name"] for c in t["columnDefinitions"]]
    return dict(zip(names, t["rows"][0]["cells"])), t["columnDefinitions"]


def test_age_like_human_duration():
    assert tables.age(ago(5)) in ("5s", "6s")
    assert tables.age(ago(180)) == "3m"                 # not 3m0s
    assert tables.age(ago(185)) in ("3m5s", "3m6s")
    assert tables.age(ago(3 * 3600)) == "3h"
    assert tables.age(ago(9 * 86400)) == "9d"
    assert tables.age(None) == "<unknown>"


def test_pod_init_crashloop_counts_init_restarts():
    pod = {"metadata": {"name": "nvidia-operator-validator-x", "creationTimestamp": ago(300)},
           "spec": {"nodeName": "gpu-1", "initContainers": [{"name": "driver-validation"},
                                                            {"name": "toolkit-validation"}],
                    "containers": [{"name": "validator"}]},
           "status": {"phase": "Pending", "podIP": "10.0.0.7",
                      "initContainerStatuses": [
                          {"name": "driver-validation", "restartCount": 5, "ready": False,
                           "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                           "lastState": {"terminated": {"exitCode": 1,
                                                        "finishedAt": ago(30)}}},
                          {"name": "toolkit-validation", "restartCount": 0,
                           "state": {"waiting": {"reason": "PodInitializing"}}}],
                      "containerStatuses": [{"name": "validator", "restartCount": 0,
                                             "ready": False,
                                             "state": {"waiting": {"reason": "PodInitializing"}}}]}}
    row, cols = render("pods", pod)
    assert row["Status"] == "Init:CrashLoopBackOff"
    assert row["Ready"] == "0/1"
    assert row["Restarts"] in ("5 (30s ago)", "5 (31s ago)")
    assert (row["IP"], row["Node"]) == ("10.0.0.7", "gpu-1")
    assert [c["name"] for c in cols if c["priority"] == 0] == \
        ["Name", "Ready", "Status", "Restarts", "Age"]
    # without a finishedAt the "(X ago)" part is left out
    del pod["status"]["initContainerStatuses"][0]["lastState"]
    assert render("pods", pod)[0]["Restarts"] == "5"


def test_pod_running_and_init_progress():
    pod = {"metadata": {"name": "p", "creationTimestamp": ago(10)},
           "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"},
                                                                     {"name": "b"}]},
           "status": {"phase": "Pending",
                      "initContainerStatuses": [{"name": "i", "restartCount": 1,
                                                 "state": {"running": {}}}]}}
    assert render("pods", pod)[0]["Status"] == "Init:0/1"
    pod["status"] = {"phase": "Running",
                     "conditions": [{"type": "Initialized", "status": "True"},
                                    {"type": "Ready", "status": "True"}],
                     "initContainerStatuses": [{"name": "i", "restartCount": 1, "state": {
                         "terminated": {"exitCode": 0, "reason": "Completed"}}}],
                     "containerStatuses": [
                         {"name": "a", "ready": True, "restartCount": 2,
                          "state": {"running": {}}},
                         {"name": "b", "ready": True, "restartCount": 0,
                          "state": {"running": {}}}]}
    row = render("pods", pod)[0]
    # once initialised only the regular (and sidecar) containers' restarts count
    assert (row["Ready"], row["Status"], row["Restarts"]) == ("2/2", "Running", "2")


def test_core_event_columns():
    ev = {"metadata": {"name": "p.18ec", "namespace": "gpu-operator"},
          "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
          "reason": "BackOff", "type": "Warning", "count": 4,
          "message": "Back-off restarting failed container\n",
          "firstTimestamp": ago(600), "lastTimestamp": ago(20),
          "source": {"component": "kubelet", "host": "gpu-1"}}
    row, cols = render("events", ev)
    assert [c["name"] for c in cols if c["priority"] == 0] == \
        ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert row["Last Seen"] in ("20s", "21s") and row["First Seen"] == "10m"
    assert (row["Type"], row["Reason"], row["Object"], row["Message"]) == \
        ("Warning", "BackOff", "pod/p", "Back-off restarting failed container")
    assert (row["Source"], row["Count"], row["Name"], row["Subobject"]) == \
        ("kubelet, gpu-1", 4, "p.18ec", "spec.containers{c}")
    del ev["lastTimestamp"], ev["count"]
    row = render("events", ev)[0]
    assert (row["Last Seen"], row["Count"]) == ("10m", 1)


GIZMO_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gizmos.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "gizmos", "kind": "Gizmo"},
             "versions": [
                 {"name": "v1", "served": True, "storage": True,
                  "additionalPrinterColumns": [
                      {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                      {"name": "Ready", "type": "string",
                       "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
                      {"name": "Tags", "type": "string", "jsonPath": ".spec.tags"},
                      {"name": "Zone", "type": "string",
                       "jsonPath": ".metadata.labels.topology\\.kubernetes\\.io/zone"},
                      {"name": "Wide", "type": "boolean", "jsonPath": ".spec.wide",
                       "priority": 1},
                      {"name": "Created", "type": "date",
                       "jsonPath": ".metadata.creationTimestamp"}]},
                 {"name": "v2", "served": True, "storage": False}]}}


def gizmo_info():
    return ResourceInfo("example.com", ["v1", "v2"], "gizmos", "Gizmo", True, crd=GIZMO_CRD)


def test_crd_printer_columns_jsonpath_subset():
    obj = {"apiVersion": "example.com/v1", "kind": "Gizmo",
           "metadata": {"name": "g", "creationTimestamp": ago(7200),
                        "labels": {"topology.kubernetes.io/zone": "a"}},
           "spec": {"size": 3, "tags": ["x", "y"], "wide": "yes"},
           "status": {"conditions": [{"type": "Synced", "status": "False"},
                                     {"type": "Ready", "status": "True"}]}}
    t = tables.table(gizmo_info(), [obj], "1", Req(), "v1")
    cols = t["columnDefinitions"]
    assert [(c["name"], c["type"], c["priority"]) for c in cols] == [
        ("Name", "string", 0), ("Size", "integer", 0), ("Ready", "string", 0),
        ("Tags", "string", 0), ("Zone", "string", 0), ("Wide", "boolean", 1),
        ("Created", "date", 0)]
    assert cols[1]["description"] == \
        "Custom resource definition column (in JSONPath format): .spec.size"
    # a value of another type than the column's is a null cell, like the real server
    assert t["rows"][0]["cells"] == ["g", 3, "True", '["x","y"]', "a", None, "120m"]
    # missing keys: null cells; a version without columns: Name and Age (date)
    assert tables.table(gizmo_info(), [{"metadata": {"name": "h"}}], "1", Req(),
                        "v1")["rows"][0]["cells"] == ["h"] + [None] * 6
    t = tables.table(gizmo_info(), [obj], "1", Req(), "v2")
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Age"]
    assert t["rows"][0]["cells"] == ["g", "120m"]


def test_jsonpath_subset():
    doc = {"a": {"b.c": [1, {"d": 2}]}, "l": [{"k": "x", "v": 1}, {"k": "y", "v": 2}]}
    assert jsonpath.find(jsonpath.parse(".a['b.c'][1].d"), doc) == [2]
    assert jsonpath.find(jsonpath.parse(".a.b\\.c[-1]"), doc) == [{"d": 2}]
    assert jsonpath.find(jsonpath.parse(".l[*].v"), doc) == [1, 2]
    assert jsonpath.find(jsonpath.parse('.l[?(@.k!="x")].v'), doc) == [2]
    assert jsonpath.find(jsonpath.parse(".nope.x"), doc) == []
    with pytest.raises(jsonpath.JSONPathError):
        jsonpath.parse(".a[?(foo)]")


@pytest.mark.needs_shared
def test_clusterpolicy_status_and_age_columns_from_real_crd():
    with open(CLUSTERPOLICY_CRD, encoding="utf-8") as fh:
        crd = yaml.safe_load(fh)
    ci = ResourceInfo("nvidia.com", ["v1"], "clusterpolicies", "ClusterPolicy", False, crd=crd)
    obj = {"metadata": {"name": "cluster-policy", "creationTimestamp": "2026-01-02T03:04:05Z"},
           "status": {"state": "notReady"}}
    t = tables.table(ci, [obj], "1", Req(), "v1")
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Status", "Age"]
    # the CRD types Age as string: the real server shows the raw timestamp
    assert t["rows"][0]["cells"] == ["cluster-policy", "notReady", "2026-01-02T03:04:05Z"]
