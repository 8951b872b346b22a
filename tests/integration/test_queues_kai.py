"""roles/queues with the KAI Scheduler: the real chart (helm 4; the install also with helm 3), queues, fair share, gang, policy."""
import os

import pytest

from kit.paths import BIN, KAI_CHART
from kit.kubectl import apply, kget, kubectl
from kit.queues import gpu_job, inventory, play, running, start_cluster, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
LABEL = "kai.scheduler/queue"


def settings(**over):
    """group_vars/all.yml of a site with two teams in one department."""
    values = {
        "tenants_queue_backend": "kai",
        "queues_chart_source": "archive",
        "queues_chart_ref": KAI_CHART,
        "queues_chart_version": "v0.17.0",
        "queues_wait_timeout": 120,
        "queues_departments": [{"name": "research", "gpu": {"quota": 4}}],
        "tenants_list": [
            {"name": "team-a", "queue": {"parent": "research", "gpu": {"quota": 2, "over_quota_weight": 1}}},
            {"name": "team-b", "queue": {"parent": "research", "gpu": {"quota": 2, "over_quota_weight": 3}}},
            {"name": "team-c", "queue": {"parent": "research", "gpu": {"quota": 0, "limit": 4}}},
        ],
    }
    values.update(over)
    return values


# The helm client (major) a test's installed cluster uses. The queue objects, the guards, scheduling
# and admission do not depend on it: helm 4 runs them all. Helm 3 is kept for the install and
# its re-run: the chart install/upgrade is the one place the two clients differ (helm 4 applies
# server-side and diffs its own way), and a site may still run helm 3.
HELM4 = pytest.mark.parametrize("installed", ["helm4"], indirect=True)
HELM3_AND_HELM4 = pytest.mark.parametrize("installed", ["helm3", "helm4"], indirect=True)


@pytest.fixture(scope="module")
def installed(request, tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "kai-" + request.param)
    inv = inventory(tmp_path_factory.mktemp("inv"), settings())
    first = play(sim, inv, queues_helm_binary=os.path.join(BIN, request.param))
    yield sim, inv, request.param, first
    sim.stop()


@HELM3_AND_HELM4
def test_install_renders_queues_and_reruns_unchanged(installed):
    sim, inv, helm, first = installed
    assert first.rc == 0, first
    assert first.changed() > 0
    deps = {d["metadata"]["name"] for d in kget(sim, "deployments", "-n", "kai-scheduler")["items"]}
    assert {"kai-operator", "kai-scheduler-default", "binder"} <= deps
    b = kget(sim, "queue", "team-b")
    assert b["spec"]["parentQueue"] == "research"
    assert b["spec"]["resources"]["gpu"] == {"quota": 2, "limit": -1, "overQuotaWeight": 3}
    assert kget(sim, "queue", "default-queue")["spec"]["resources"]["gpu"]["limit"] == 0
    assert kget(sim, "validatingadmissionpolicy", "skaffon-queue-owner")
    again = play(sim, inv, queues_helm_binary=os.path.join(BIN, helm))
    assert again.rc == 0, again
    assert again.changed() == 0, again.data
    # the release is read (helm list, helm get values) and found as the inventory wants it: Helm is not
    # run, and so does not warn "Install helm diff" on every re-run
    chart_task = "Install or upgrade the backend chart kai-scheduler"
    assert first.task_results(chart_task)[0]["changed"] is True
    assert again.task_results(chart_task)[0].get("skipped"), again.task_results(chart_task)
    assert not [w for t in again.data["plays"][0]["tasks"] for r in t["hosts"].values() for w in r.get("warnings", [])]


@HELM3_AND_HELM4
def test_a_values_change_runs_helm(installed, tmp_path):
    sim, _inv, helm, _ = installed
    inv = inventory(tmp_path, settings(queues_values={"global": {"nodeSelector": {"kubernetes.io/os": "linux"}}},
                                       queues_helm_binary=os.path.join(BIN, helm)))
    res = play(sim, inv, check=True)
    assert res.rc == 0, res
    chart = res.task_results("Install or upgrade the backend chart kai-scheduler")[0]
    assert not chart.get("skipped") and chart["changed"] is True, chart


@HELM4
def test_check_mode_writes_nothing(installed, tmp_path):
    sim, _inv, helm, _ = installed
    changed = settings()
    changed["tenants_list"][1]["queue"]["gpu"]["over_quota_weight"] = 5
    inv = inventory(tmp_path, changed)
    before = kget(sim, "queue", "team-b")["metadata"]["resourceVersion"]
    res = play(sim, inv, check=True, diff=True, queues_helm_binary=os.path.join(BIN, helm))
    assert res.rc == 0, res
    assert res.changed() == 1
    after = kget(sim, "queue", "team-b")
    assert after["metadata"]["resourceVersion"] == before
    assert after["spec"]["resources"]["gpu"]["overQuotaWeight"] == 3


@HELM4
def test_fair_share_3_and_5_then_gang_waits_whole(installed):
    sim, _inv, _helm, _ = installed
    tol = [{"key": "gpu.skaffon.io/workload", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]
    for team in ("team-a", "team-b"):
        job = gpu_job("train", team, 6, LABEL, team, scheduler="kai-scheduler")
        job["spec"]["template"]["spec"]["tolerations"] = tol
        apply(sim, job)
    wait_for(lambda: (len(running(sim, "team-a")), len(running(sim, "team-b"))) == (3, 5), 60, "3 and 5 GPUs")
    for team in ("team-a", "team-b"):
        kubectl(sim, "delete", "job", "train", "-n", team)
    wait_for(lambda: not running(sim, "team-a") and not running(sim, "team-b"), 60, "jobs gone")
    # team-c: limit 4; one GPU in use leaves room for 3, so a gang of 4 starts no pod
    small = gpu_job("small", "team-c", 1, LABEL, "team-c", scheduler="kai-scheduler")
    small["spec"]["template"]["spec"]["tolerations"] = tol
    apply(sim, small)
    wait_for(lambda: len(running(sim, "team-c", "small")) == 1, 60, "small job runs")
    apply(sim, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                "metadata": {"name": "gang", "namespace": "team-c"}, "spec": {"minMember": 4, "queue": "team-c"}})
    for i in range(4):
        apply(sim, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "gang-%d" % i, "namespace": "team-c", "labels": {LABEL: "team-c"},
            "annotations": {"pod-group-name": "gang", "kai.scheduler/skip-podgrouper": "true",
                            "simcluster.skaffon.io/behaviour": "run"}},
            "spec": {"schedulerName": "kai-scheduler", "tolerations": tol, "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    wait_for(lambda: ((kget(sim, "podgroup", "gang", "-n", "team-c") or {}).get("status") or {})
             .get("schedulingConditions"), 60, "gang marked unschedulable")
    assert running(sim, "team-c", "gang") == []
    cond = kget(sim, "podgroup", "gang", "-n", "team-c")["status"]["schedulingConditions"][0]
    assert cond["reason"] == "OverLimit"
    kubectl(sim, "delete", "job", "small", "-n", "team-c")
    wait_for(lambda: len(running(sim, "team-c", "gang")) == 4, 60, "the whole gang")


@HELM4
def test_a_pod_naming_another_teams_queue_is_refused(installed):
    sim, _inv, _helm, _ = installed
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "steal", "namespace": "team-a", "labels": {LABEL: "team-b"}},
           "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "busybox"}]}}
    res = apply(sim, pod, check=False)
    assert res.returncode != 0
    assert ("ValidatingAdmissionPolicy 'skaffon-queue-owner' with binding 'skaffon-queue-owner' denied request: "
            "kai.scheduler/queue team-b is not the queue of namespace team-a") in res.stderr
    # a Job (top owner: its label decides the pods' queue) is refused the same way
    res = apply(sim, gpu_job("steal", "team-a", 1, LABEL, "team-b", scheduler="kai-scheduler"), check=False)
    assert res.returncode != 0 and "denied request" in res.stderr


@HELM4
def test_refused_before_any_write(installed, tmp_path):
    sim, _inv, helm, _ = installed
    bad = settings()
    bad["tenants_list"][0]["queue"]["gpu"] = {"quota": 4, "limit": 2}
    res = play(sim, inventory(tmp_path, bad), queues_helm_binary=os.path.join(BIN, helm))
    assert res.rc != 0
    assert any("tenants_list[0].queue.gpu.limit: below the quota 4" in m for m in res.failure_messages())
    assert res.changed() == 0
    assert kget(sim, "queue", "team-a")["spec"]["resources"]["gpu"]["quota"] == 2


@pytest.mark.parametrize("over,expect", [
    ({"queues_helm_binary": "/nonexistent/helm"},
     "queues_helm_binary /nonexistent/helm is not an executable on localhost"),
    ({"queues_chart_ref": "/nonexistent/kai-scheduler-v0.17.0.tgz"},
     "queues_chart_ref /nonexistent/kai-scheduler-v0.17.0.tgz does not exist on localhost"),
])
@HELM4
def test_a_missing_helm_or_chart_archive_is_named_before_any_write(installed, tmp_path, over, expect):
    sim, _inv, helm, _ = installed
    values = dict(settings(queues_helm_binary=os.path.join(BIN, helm)), **over)

    def writes():
        verbs = sim.stats()["by_verb"]
        return sum(verbs.get(v, 0) for v in ("create", "update", "patch", "delete", "deletecollection"))
    before = writes()
    res = play(sim, inventory(tmp_path, values))
    assert res.rc != 0
    assert any(expect in m for m in res.failure_messages()), res.failure_messages()
    assert not any("Errno 2" in m or "path \"" in m for m in res.failure_messages())
    assert res.changed() == 0 and writes() == before


@HELM4
def test_quota_lowered_below_use_is_refused_unless_allowed(installed, tmp_path):
    sim, inv, helm, _ = installed
    hold = gpu_job("hold", "team-a", 1, LABEL, "team-a", scheduler="kai-scheduler", gpus=2)
    hold["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "gpu.skaffon.io/workload", "operator": "Exists", "effect": "NoSchedule"}]
    apply(sim, hold)
    wait_for(lambda: (((kget(sim, "queue", "team-a") or {}).get("status") or {}).get("allocated") or {})
             .get("nvidia.com/gpu") == "2", 60, "team-a uses 2 GPUs")
    lower = settings()
    lower["tenants_list"][0]["queue"]["gpu"] = {"quota": 1, "limit": 1}
    res = play(sim, inventory(tmp_path, lower), queues_helm_binary=os.path.join(BIN, helm))
    assert res.rc != 0
    assert any("Queue team-a: gpu quota 1 is below the 2 in use" in m for m in res.failure_messages())
    assert kget(sim, "queue", "team-a")["spec"]["resources"]["gpu"]["quota"] == 2
    res = play(sim, inventory(tmp_path, lower), queues_helm_binary=os.path.join(BIN, helm),
               queues_allow_quota_decrease=True)
    assert res.rc == 0, res
    assert kget(sim, "queue", "team-a")["spec"]["resources"]["gpu"]["limit"] == 1
    assert len(running(sim, "team-a", "hold")) == 1        # lowering evicts nothing
    kubectl(sim, "delete", "job", "hold", "-n", "team-a")
    assert play(sim, inv, queues_helm_binary=os.path.join(BIN, helm)).rc == 0


def test_install_under_the_mirror(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "kai-mirror", registries=["registry.local:5000"])
    try:
        inv = inventory(tmp_path_factory.mktemp("inv"), settings(queues_image_mirror="registry.local:5000/mirror"))
        res = play(sim, inv, queues_helm_binary=os.path.join(BIN, "helm3"))
        assert res.rc == 0, res
        images = {c["image"] for d in kget(sim, "deployments", "-n", "kai-scheduler")["items"]
                  for c in d["spec"]["template"]["spec"]["containers"]}
        assert "registry.local:5000/mirror/kai-scheduler/kai-scheduler/scheduler:v0.17.0" in images
        assert all(i.startswith("registry.local:5000/mirror/") for i in images)
    finally:
        sim.stop()


@HELM4
def test_a_chosen_backend_that_is_not_installed_is_refused(installed, tmp_path):
    sim, _inv, helm, _ = installed
    other = {"tenants_queue_backend": "kueue", "queues_install": False, "queues_wait": False,
             "queues_pools": {"h100": {"labels": {"gpu.skaffon.io/accelerator": "h100"}}},
             "tenants_list": [{"name": "team-a", "queue": {"flavors": [
                 {"name": "h100", "resources": {"nvidia.com/gpu": {"nominal": 4}}}]}}]}
    res = play(sim, inventory(tmp_path, other), queues_helm_binary=os.path.join(BIN, helm))
    assert res.rc != 0
    assert any("tenants_queue_backend: kueue is chosen but the cluster does not serve ResourceFlavor" in m
               for m in res.failure_messages()), res.failure_messages()
    assert kget(sim, "validatingadmissionpolicy", "skaffon-queue-owner")["spec"]["validations"][0][
        "expression"].count("kai.scheduler/queue") == 2      # the KAI policy was not replaced


def test_check_mode_on_a_fresh_cluster_installs_and_writes_nothing(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "kai-check")
    try:
        inv = inventory(tmp_path_factory.mktemp("inv"), settings())
        res = play(sim, inv, check=True, diff=True, queues_helm_binary=os.path.join(BIN, "helm4"))
        assert res.rc == 0, res
        assert res.changed() >= 2          # the chart and the queue objects would change
        applied = res.task_results("Apply the queue objects")[0]
        assert {o["name"] for o in applied["objects"]} >= {"research", "team-a", "team-b", "skaffon-queue-owner"}
        assert kget(sim, "namespace", "kai-scheduler") is None
        assert kget(sim, "crd", "queues.scheduling.run.ai") is None
        assert kget(sim, "validatingadmissionpolicy", "skaffon-queue-owner") is None
    finally:
        sim.stop()
