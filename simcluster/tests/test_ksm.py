"""The kube-state-metrics twin (simcluster/ksm.py) on a small in-memory store: 503 until a
kube-state-metrics pod runs, then the exposition text kube-state-metrics v2 writes for nodes,
pods and DaemonSets, checked line by line by a strict parser of the text format (0.0.4) and by
promtool when it is installed."""
import re
import shutil
import subprocess

import pytest

from simcluster import ksm

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"'
SAMPLE = re.compile(r"^(%s)\{((?:%s)(?:,%s)*)?\} (\S+)$" % (NAME, LABEL, LABEL))
LABEL_KEYS = {"kube_node_status_allocatable": ["node", "resource", "unit"],
              "kube_pod_status_phase": ["namespace", "pod", "uid", "phase"],
              "kube_daemonset_status_number_unavailable": ["namespace", "daemonset"]}


class Store:
    def __init__(self, **objs):
        self.objs = objs

    def list(self, resource, namespace):
        key = {"daemonsets.apps": "daemonsets"}.get(resource, resource)
        return list(self.objs.get(key, []))


def pod(name, namespace="team-a", phase="Running", labels=None, ready=True, uid=None):
    status = {"phase": phase} if phase else {}
    if phase == "Running":
        status["containerStatuses"] = [{"name": "main", "ready": ready}]
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid or "uid-" + name,
                         "labels": labels or {}}, "spec": {"nodeName": "cpu-1"}, "status": status}


KSM_POD = pod("kube-state-metrics-7d9f", "monitoring", labels={ksm.APP_LABEL: ksm.APP})
NODES = [
    {"metadata": {"name": "gpu-h100-1"}, "status": {"allocatable": {
        "cpu": "95500m", "memory": "1000Gi", "pods": "110", "ephemeral-storage": "1Ti",
        "hugepages-2Mi": "0", "nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "7"}}},
    {"metadata": {"name": "gpu-l40s-1"}, "status": {"allocatable": {
        "cpu": "32", "nvidia.com/gpu.shared": "8", "nvidia.com/gpu": "0",
        "kubernetes.io/unknown": "1"}}},
    {"metadata": {"name": "new-node"}, "status": {}},
]
DAEMONSETS = [
    {"metadata": {"name": "nvidia-dcgm-exporter", "namespace": "gpu-operator"},
     "status": {"desiredNumberScheduled": 2, "numberUnavailable": 1}},
    {"metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator"},
     "status": {"desiredNumberScheduled": 2, "numberAvailable": 2}},   # 0 omitted, as the API does
]


def parse(text):
    """{family: [(labels as ordered pairs, value)]}; fails on anything the text format forbids or
    kube-state-metrics would not write (sample before its HELP/TYPE, other label keys or order)."""
    assert text.endswith("\n") and "\n\n" not in text
    families, current, seen = {}, None, set()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^# HELP (%s) (.+)$" % NAME, line)
        if m:
            name = m.group(1)
            assert name not in families, "family %s twice" % name
            assert lines[i + 1] == "# TYPE %s gauge" % name, lines[i + 1]
            assert m.group(2).startswith("[STABLE] ")
            families[name], current = [], name
            i += 2
            continue
        s = SAMPLE.match(line)
        assert s, "not a sample line: %r" % line
        assert s.group(1) == current, "sample %s outside its family (%s)" % (s.group(1), current)
        labels = re.findall(LABEL, s.group(2) or "")
        assert [k for k, _v in labels] == LABEL_KEYS[current], line
        value = float(s.group(len(s.groups())))     # the value: a float Prometheus can read
        key = (current, tuple(labels))
        assert key not in seen, "duplicate series %s" % line
        seen.add(key)
        families[current].append((dict(labels), value))
        i += 1
    return families


def serve(store):
    status, body, ctype = ksm.handle(store, "GET", ["metrics"])
    return status, body.decode(), ctype


def test_503_until_a_kube_state_metrics_pod_is_running_and_ready():
    objs = dict(nodes=NODES, daemonsets=DAEMONSETS)
    assert serve(Store(pods=[], **objs))[0] == 503
    assert serve(Store(pods=[pod("x", labels={ksm.APP_LABEL: "other"})], **objs))[0] == 503
    pending = pod("kube-state-metrics-7d9f", "monitoring", phase="Pending", labels={ksm.APP_LABEL: ksm.APP})
    assert serve(Store(pods=[pending], **objs))[0] == 503
    unready = pod("kube-state-metrics-7d9f", "monitoring", labels={ksm.APP_LABEL: ksm.APP}, ready=False)
    assert serve(Store(pods=[unready], **objs))[0] == 503
    status, _body, ctype = serve(Store(pods=[KSM_POD], **objs))
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    assert ksm.handle(Store(pods=[KSM_POD]), "GET", ["nope"])[0] == 404
    assert ksm.handle(Store(pods=[KSM_POD]), "POST", ["metrics"])[0] == 405


def test_node_allocatable_names_units_and_values_as_kube_state_metrics():
    fams = parse(serve(Store(pods=[KSM_POD], nodes=NODES))[1])
    got = {(lb["node"], lb["resource"]): (lb["unit"], v) for lb, v in fams["kube_node_status_allocatable"]}
    assert got == {
        ("gpu-h100-1", "cpu"): ("core", 95.5), ("gpu-h100-1", "memory"): ("byte", 1000 * 2 ** 30),
        ("gpu-h100-1", "pods"): ("integer", 110), ("gpu-h100-1", "ephemeral_storage"): ("byte", 2 ** 40),
        ("gpu-h100-1", "hugepages_2Mi"): ("byte", 0), ("gpu-h100-1", "nvidia_com_gpu"): ("integer", 6),
        ("gpu-h100-1", "nvidia_com_mig_1g_10gb"): ("integer", 7),
        ("gpu-l40s-1", "cpu"): ("core", 32), ("gpu-l40s-1", "nvidia_com_gpu_shared"): ("integer", 8),
        ("gpu-l40s-1", "nvidia_com_gpu"): ("integer", 0)}      # kubernetes.io/unknown: no unit, skipped


def test_pod_phase_one_hot_over_the_five_phases_and_nothing_without_a_phase():
    pods = [KSM_POD, pod("train-1"), pod("job-2", "team-b", phase="Failed"), pod("new", phase=None)]
    fams = parse(serve(Store(pods=pods))[1])
    rows = fams["kube_pod_status_phase"]
    assert len(rows) == 3 * 5
    by_pod = {}
    for lb, v in rows:
        by_pod.setdefault((lb["namespace"], lb["pod"], lb["uid"]), {})[lb["phase"]] = v
    assert by_pod[("team-b", "job-2", "uid-job-2")] == {"Pending": 0, "Succeeded": 0, "Failed": 1,
                                                        "Unknown": 0, "Running": 0}
    assert by_pod[("team-a", "train-1", "uid-train-1")]["Running"] == 1
    assert ("team-a", "new", "uid-new") not in by_pod


def test_daemonset_unavailable_reads_the_status_and_zero_when_omitted():
    fams = parse(serve(Store(pods=[KSM_POD], daemonsets=DAEMONSETS))[1])
    assert sorted((lb["daemonset"], v) for lb, v in fams["kube_daemonset_status_number_unavailable"]) == [
        ("nvidia-dcgm-exporter", 1), ("nvidia-device-plugin-daemonset", 0)]


def test_label_values_are_escaped():
    odd = pod('we"ird\\name', "team-a")
    fams = parse(serve(Store(pods=[KSM_POD, odd]))[1])
    assert any(lb["pod"] == 'we\\"ird\\\\name' for lb, _v in fams["kube_pod_status_phase"])


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_promtool_accepts_the_text():
    text = serve(Store(pods=[KSM_POD, pod("train-1")], nodes=NODES, daemonsets=DAEMONSETS))[1]
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                         timeout=60, check=False)
    # promtool lints names and HELP; kube-state-metrics' own names pass it
    assert res.returncode == 0, res.stdout + res.stderr
