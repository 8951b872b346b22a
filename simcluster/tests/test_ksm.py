"""The kube-state-metrics twin (simcluster/ksm.py) on a small in-memory store: 503 until a
kube-state-metrics pod runs, then the exposition text kube-state-metrics v2 writes for nodes,
pods, Jobs and DaemonSets, checked line by line by a strict parser of the text format (0.0.4) and by
promtool when it is installed."""
import re
import shutil
import subprocess

import pytest

from simcluster import ksm

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"'
SAMPLE = re.compile(r"^(%s)\{((?:%s)(?:,%s)*)?\} (\S+)$" % (NAME, LABEL, LABEL))
POD = ["namespace", "pod", "uid"]
LABEL_KEYS = {"kube_node_status_allocatable": ["node", "resource", "unit"],
              "kube_pod_status_phase": POD + ["phase"],
              "kube_daemonset_status_number_unavailable": ["namespace", "daemonset"],
              "kube_pod_owner": POD + ["owner_kind", "owner_name", "owner_is_controller"],
              "kube_pod_container_info": POD + ["container", "image_spec", "image", "image_id", "container_id"],
              "kube_pod_container_status_restarts_total": POD + ["container"],
              "kube_pod_container_status_terminated_reason": POD + ["container", "reason"],
              "kube_pod_container_status_last_terminated_reason": POD + ["container", "reason"]}
# kube-state-metrics' metric types and stability (internal/store/pod.go, job.go): alpha families
# have no "[ALPHA]" in their HELP
COUNTERS = ("kube_pod_container_status_restarts_total",)
ALPHA = ("kube_pod_container_status_terminated_reason", "kube_pod_container_status_last_terminated_reason")


class Store:
    def __init__(self, **objs):
        self.objs = objs

    def list(self, resource, namespace):
        key = {"daemonsets.apps": "daemonsets", "jobs.batch": "jobs"}.get(resource, resource)
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
            assert lines[i + 1] == "# TYPE %s %s" % (name, "counter" if name in COUNTERS else "gauge"), lines[i + 1]
            assert m.group(2).startswith("[STABLE] ") != (name in ALPHA), line
            families[name], current = [], name
            i += 2
            continue
        s = SAMPLE.match(line)
        assert s, "not a sample line: %r" % line
        assert s.group(1) == current, "sample %s outside its family (%s)" % (s.group(1), current)
        labels = re.findall(LABEL, s.group(2) or "")
        keys = [k for k, _v in labels]
        if current == "kube_pod_labels":
            assert keys[:3] == POD and all(k.startswith("label_") for k in keys[3:]) and keys[3:] == sorted(keys[3:])
        elif current == "kube_job_status_failed":
            assert keys in (["namespace", "job_name"], ["namespace", "job_name", "reason"]), line
        else:
            assert keys == LABEL_KEYS[current], line
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


def ksm_pod(*args):
    p = pod("kube-state-metrics-7d9f", "monitoring", labels={ksm.APP_LABEL: ksm.APP})
    p["spec"]["containers"] = [{"name": "kube-state-metrics", "image": "registry.k8s.io/kube-state-metrics/"
                                "kube-state-metrics:v2.17.0", "args": ["--port=8080"] + list(args)}]
    return p


def gpu_pod(name, owner=None, labels=None, state=None, last=None, restarts=0, phase="Running"):
    p = pod(name, "team-a", phase=phase, labels=labels)
    if owner:
        p["metadata"]["ownerReferences"] = [dict(owner, apiVersion="batch/v1", uid="uid-job", blockOwnerDeletion=True)]
    p["spec"]["containers"] = [{"name": "main", "image": "registry.example.com/ml/train:1.4.2"},
                               {"name": "sidecar", "image": "busybox:1.36"}]
    p["status"]["containerStatuses"] = [{
        "name": "main", "image": "registry.example.com/ml/train:1.4.2",
        "imageID": "registry.example.com/ml/train@sha256:0f",
        "containerID": "containerd://9c1e", "restartCount": restarts, "ready": phase == "Running",
        "state": state or {"running": {"startedAt": "2026-12-01T00:00:00Z"}}, "lastState": last or {}}]
    return p


def test_pod_owner_container_info_restarts_and_termination_reasons():
    job = {"kind": "Job", "name": "llm-pretrain", "controller": True}
    pods = [ksm_pod(),
            gpu_pod("llm-pretrain-0-abcde", job, phase="Failed",
                    state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}}),
            gpu_pod("serve-1", {"kind": "ReplicaSet", "name": "serve-5d8f"}, restarts=2,
                    last={"terminated": {"exitCode": 1, "reason": "Error"}}),
            gpu_pod("notebook-1")]
    fams = parse(serve(Store(pods=pods))[1])
    owners = dict((lb["pod"], (lb["owner_kind"], lb["owner_name"], lb["owner_is_controller"]))
                  for lb, _v in fams["kube_pod_owner"])
    assert owners["llm-pretrain-0-abcde"] == ("Job", "llm-pretrain", "true")
    assert owners["serve-1"] == ("ReplicaSet", "serve-5d8f", "false")     # controller unset
    assert owners["notebook-1"] == ("", "", "")
    info = [lb for lb, _v in fams["kube_pod_container_info"] if lb["pod"] == "serve-1"]
    # only containers with a status (the sidecar has none here)
    assert [(lb["container"], lb["image_spec"], lb["image_id"]) for lb in info] == [
        ("main", "registry.example.com/ml/train:1.4.2", "registry.example.com/ml/train@sha256:0f")]
    assert dict((lb["pod"], v) for lb, v in fams["kube_pod_container_status_restarts_total"])["serve-1"] == 2
    assert [(lb["pod"], lb["reason"]) for lb, _v in fams["kube_pod_container_status_terminated_reason"]] == [
        ("llm-pretrain-0-abcde", "OOMKilled")]
    assert [(lb["pod"], lb["reason"]) for lb, _v in fams["kube_pod_container_status_last_terminated_reason"]] == [
        ("serve-1", "Error")]
    # no allowlist for pods: kube_pod_labels has no series (kube-state-metrics' default)
    assert fams["kube_pod_labels"] == []


def test_pod_labels_only_those_the_allowlist_names():
    labels = {"gpu.skaffon.io/model": "llama-3-8b", "gpu.skaffon.io/dataset": "c4-sample", "app": "x",
              "batch.kubernetes.io/job-name": "llm-pretrain", "camelKey": "v"}
    pods = [ksm_pod("--metric-labels-allowlist=pods=[gpu.skaffon.io/model,gpu.skaffon.io/owner,camelKey],"
                    "nodes=[*]"), gpu_pod("train-1", labels=labels)]
    fams = parse(serve(Store(pods=pods))[1])
    got = dict((lb["pod"], lb) for lb, _v in fams["kube_pod_labels"])
    assert got["train-1"] == {"namespace": "team-a", "pod": "train-1", "uid": "uid-train-1",
                              "label_camel_key": "v", "label_gpu_skaffon_io_model": "llama-3-8b"}
    assert got["kube-state-metrics-7d9f"] == {"namespace": "monitoring", "pod": "kube-state-metrics-7d9f",
                                              "uid": "uid-kube-state-metrics-7d9f"}
    every = parse(serve(Store(pods=[ksm_pod("--metric-labels-allowlist=pods=[*]"), gpu_pod("t", labels=labels)]))[1])
    assert len([k for k in dict(every["kube_pod_labels"][1][0]) if k.startswith("label_")]) == 5
    partial = parse(serve(Store(pods=[ksm_pod("--metric-labels-allowlist=pods=[gpu.skaffon.io/*]"),
                                      gpu_pod("t", labels=labels)]))[1])
    assert sorted(k for k in dict(partial["kube_pod_labels"][1][0]) if k.startswith("label_")) == [
        "label_gpu_skaffon_io_dataset", "label_gpu_skaffon_io_model"]


def test_job_status_failed_count_then_reason():
    def job(name, failed, reason=None):
        status = {"failed": failed} if failed else {}
        if reason:
            status["conditions"] = [{"type": "Failed", "status": "True", "reason": reason}]
        return {"metadata": {"name": name, "namespace": "team-a"}, "status": status}
    jobs = [job("ok", 0), job("retried", 2), job("gave-up", 3, "BackoffLimitExceeded"),
            job("odd", 1, "PodFailurePolicy")]
    fams = parse(serve(Store(pods=[ksm_pod()], jobs=jobs))[1])
    got = sorted((lb["job_name"], lb.get("reason"), v) for lb, v in fams["kube_job_status_failed"])
    # a Failed condition with a reason kube-state-metrics does not know: the three known reasons at 0
    # and the count under reason="" (job.go appends both)
    assert got == [("gave-up", "BackoffLimitExceeded", 1), ("gave-up", "DeadlineExceeded", 0),
                   ("gave-up", "Evicted", 0), ("odd", "", 1), ("odd", "BackoffLimitExceeded", 0),
                   ("odd", "DeadlineExceeded", 0), ("odd", "Evicted", 0), ("ok", None, 0), ("retried", "", 2)]


def test_resources_flag_limits_the_families():
    text = serve(Store(pods=[ksm_pod("--resources=daemonsets,nodes,pods")], nodes=NODES))[1]
    assert "kube_job_status_failed" not in text and "kube_pod_owner" in text
