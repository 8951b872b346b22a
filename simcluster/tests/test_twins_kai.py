"""KAI Scheduler twins: operator from the Config, queues, fair share, gang, limits, reclaim."""
import os

import pytest

from simcluster.twins.testkit import TwinCluster, deployment

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "clusters", "kai-8gpu.yaml")
QUEUES = "queues.scheduling.run.ai"
PODGROUPS = "podgroups.scheduling.run.ai"
REPO = "ghcr.io/kai-scheduler/kai-scheduler"


def config(repo=REPO):
    svc = lambda name: {"service": {"enabled": True, "image": {"name": name, "repository": repo, "tag": "v0.17.0"}}}
    spec = {"namespace": "kai-scheduler", "binder": svc("binder"), "podGrouper": svc("podgrouper"),
            "podGroupController": svc("podgroupcontroller"), "queueController": svc("queuecontroller"),
            "admission": svc("admission"), "scheduler": svc("scheduler")}
    return {"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"}, "spec": spec}


def queue(name, quota, weight=1, limit=-1, parent=None, priority=None):
    spec = {"resources": {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": weight},
                          "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                          "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def job(name, ns, parallelism, queue_name=None, gpus=1):
    labels = {"kai.scheduler/queue": queue_name} if queue_name else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
                "metadata": {"annotations": {"simcluster.skaffon.io/behaviour": "run"}},
                "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


def gang_pod(name, ns, group, gpus=1):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": {
                "pod-group-name": group, "kai.scheduler/skip-podgrouper": "true",
                "simcluster.skaffon.io/behaviour": "run"}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


class Kai(TwinCluster):
    def __init__(self, **kw):
        super().__init__(CLUSTER, **kw)
        for name in ("kai-scheduler", "team-a", "team-b"):
            self.namespace(name)
        node = self.store.get("nodes", None, "gpu-1")
        node["status"]["allocatable"]["nvidia.com/gpu"] = "8"     # as a running device plugin reports
        node["status"]["capacity"]["nvidia.com/gpu"] = "8"
        self.store.update_status("nodes", node)

    def install(self, repo=REPO):
        self.store.create("deployments.apps", deployment("kai-operator", "kai-scheduler",
                                                         image=repo + "/operator:v0.17.0"))
        self.store.create("configs.kai.scheduler", config(repo))

    def running(self, ns):
        return sorted(p["metadata"]["name"] for p in self.pods(ns)
                      if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"))

    def scheduled_count(self, ns):
        return len(self.running(ns))


@pytest.fixture
def kai():
    with Kai() as c:
        c.install()
        c.wait(lambda: (c.store.get("deployments.apps", "kai-scheduler", "kai-scheduler-default") or {})
               .get("status", {}).get("readyReplicas"), what="scheduler deployed by the operator")
        c.store.create(QUEUES, queue("research", 4))
        yield c
        assert c.handle.errors == []


def test_operator_deploys_the_components_from_the_config(kai):
    names = sorted(d["metadata"]["name"] for d in kai.store.list("deployments.apps", "kai-scheduler"))
    assert names == ["admission", "binder", "kai-operator", "kai-scheduler-default", "pod-grouper",
                     "podgroup-controller", "queue-controller"]
    sched = kai.store.get("deployments.apps", "kai-scheduler", "kai-scheduler-default")
    assert sched["spec"]["template"]["spec"]["containers"][0]["image"] == REPO + "/scheduler:v0.17.0"


def test_backend_whose_images_the_mirror_lacks_schedules_nothing():
    with Kai(registries=["registry.local:5000"]) as c:
        c.install()                     # images from ghcr.io: not reachable
        c.store.create(QUEUES, queue("research", 4))
        c.store.create(QUEUES, queue("team-a", 2, parent="research"))
        c.store.create("jobs.batch", job("train", "team-a", 2, "team-a"))
        c.wait(lambda: len(c.pods("team-a")) == 2)
        c.settle()
        assert c.store.list("deployments.apps", "kai-scheduler")[0]["metadata"]["name"] == "kai-operator"
        assert c.running("team-a") == []


def test_fair_share_quotas_2_2_weights_1_3_on_8_gpus_both_asking_6(kai):
    kai.store.create(QUEUES, queue("team-a", 2, weight=1, parent="research"))
    kai.store.create(QUEUES, queue("team-b", 2, weight=3, parent="research"))
    kai.store.create("jobs.batch", job("train", "team-a", 6, "team-a"))
    kai.store.create("jobs.batch", job("train", "team-b", 6, "team-b"))
    kai.wait(lambda: (kai.scheduled_count("team-a"), kai.scheduled_count("team-b")) == (3, 5), timeout=20,
             what="3 and 5 GPUs")
    kai.settle()
    assert (kai.scheduled_count("team-a"), kai.scheduled_count("team-b")) == (3, 5)
    status = kai.store.get(QUEUES, None, "team-b")["status"]
    assert (status["allocated"]["nvidia.com/gpu"], status["requested"]["nvidia.com/gpu"]) == ("5", "6")
    assert kai.store.get(QUEUES, None, "research")["status"]["allocated"]["nvidia.com/gpu"] == "8"
    pending = [p for p in kai.pods("team-a") if not p["spec"].get("nodeName")]
    cond = [c for c in pending[0]["status"]["conditions"] if c["type"] == "PodScheduled"][0]
    assert cond["reason"] == "Unschedulable"
    kai.store.delete("jobs.batch", "team-a", "train")
    kai.wait(lambda: not kai.store.list(PODGROUPS, "team-a"), what="the Job's PodGroup collected")


def test_reclaim_gives_the_late_team_its_share(kai):
    kai.store.create(QUEUES, queue("team-a", 2, weight=1, parent="research"))
    kai.store.create(QUEUES, queue("team-b", 2, weight=3, parent="research"))
    kai.store.create("jobs.batch", job("train", "team-a", 6, "team-a"))
    kai.wait(lambda: kai.scheduled_count("team-a") == 6, what="team-a alone uses 6")
    kai.store.create("jobs.batch", job("train", "team-b", 6, "team-b"))
    kai.wait(lambda: (kai.scheduled_count("team-a"), kai.scheduled_count("team-b")) == (3, 5), timeout=20,
             what="reclaim to 3 and 5")
    assert kai.events(reason="Evict")
    # the workload is the PodGroup the pod-grouper made for the Job: pg-<job>-<job uid>
    uid = kai.store.get("jobs.batch", "team-b", "train")["metadata"]["uid"]
    assert kai.events(reason="Evict")[0]["message"].endswith(
        "was preempted by workload team-b/pg-train-%s." % uid)
    pg = kai.store.get(PODGROUPS, "team-b", "pg-train-%s" % uid)
    assert (pg["spec"]["queue"], pg["spec"]["minMember"]) == ("team-b", 1)


def podgroup(name, ns, min_member, queue_name):
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member, "queue": queue_name}}


def test_gang_of_4_in_a_queue_with_room_for_3_starts_nothing_then_all(kai):
    kai.store.create(QUEUES, queue("team-a", 4, limit=4, parent="research"))
    kai.store.create("jobs.batch", job("small", "team-a", 1, "team-a"))
    kai.wait(lambda: kai.scheduled_count("team-a") == 1)
    kai.store.create(PODGROUPS, podgroup("gang", "team-a", 4, "team-a"))
    for i in range(4):
        kai.store.create("pods", gang_pod("w%d" % i, "team-a", "gang"))
    kai.settle()
    assert [n for n in kai.running("team-a") if n.startswith("w")] == []     # room for 3: no pod starts
    pg = kai.store.get(PODGROUPS, "team-a", "gang")
    assert pg["status"]["schedulingConditions"][0]["reason"] == "OverLimit"
    kai.store.delete("jobs.batch", "team-a", "small")
    kai.wait(lambda: kai.running("team-a") == ["w0", "w1", "w2", "w3"], timeout=20, what="the whole gang")


def test_gang_waits_for_nodes_all_or_none(kai):
    kai.store.create(QUEUES, queue("team-a", 4, parent="research"))
    kai.store.create(PODGROUPS, podgroup("big", "team-a", 3, "team-a"))
    for i in range(3):
        kai.store.create("pods", gang_pod("g%d" % i, "team-a", "big", gpus=3))   # 9 GPUs on an 8-GPU node
    kai.settle()
    assert kai.running("team-a") == []
    msg = kai.store.get(PODGROUPS, "team-a", "big")["status"]["schedulingConditions"][0]["message"]
    assert "didn't have enough resources: GPUs" in msg


def test_over_limit_reason_and_message(kai):
    kai.store.create(QUEUES, queue("team-a", 2, limit=3, parent="research"))
    kai.store.create("jobs.batch", job("big", "team-a", 1, "team-a", gpus=4))
    kai.settle()
    pod = kai.pods("team-a")[0]
    cond = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"][0]
    assert cond["message"] == ("OverLimit: team-a quota has reached the allowable limit of GPUs. Limit is 3 GPUs, "
                               "currently 0 GPUs allocated and workload requested 4 GPUs")


def test_queue_lookup_top_owner_label_then_default_queue(kai):
    kai.store.create(QUEUES, queue("team-a", 2, parent="research"))
    kai.store.create(QUEUES, queue("default-parent-queue", 0))
    kai.store.create(QUEUES, queue("default-queue", 0, weight=0, limit=0, parent="default-parent-queue"))
    j = job("owned", "team-a", 1, "team-a")
    j["spec"]["template"]["metadata"]["labels"] = {"kai.scheduler/queue": "default-queue"}  # owner wins
    kai.store.create("jobs.batch", j)
    kai.store.create("jobs.batch", job("nolabel", "team-b", 1))          # -> default-queue, limit 0
    kai.wait(lambda: kai.scheduled_count("team-a") == 1)
    kai.settle()
    assert kai.running("team-b") == []
    msg = [c for c in kai.pods("team-b")[0]["status"]["conditions"] if c["type"] == "PodScheduled"][0]["message"]
    assert msg.startswith("OverLimit: default-queue quota has reached the allowable limit of GPUs")


def test_queue_whose_parent_is_missing_is_dropped(kai):
    kai.store.create(QUEUES, queue("orphan", 2, parent="ghost"))
    kai.store.create("jobs.batch", job("x", "team-a", 1, "orphan"))
    kai.settle()
    msg = [c for c in kai.pods("team-a")[0]["status"]["conditions"] if c["type"] == "PodScheduled"][0]["message"]
    assert msg.startswith("QueueDoesNotExist")


def test_non_preemptible_workload_must_fit_in_quota(kai):
    kai.store.create("priorityclasses.scheduling.k8s.io", {"apiVersion": "scheduling.k8s.io/v1",
                                                          "kind": "PriorityClass", "metadata": {"name": "build"},
                                                          "value": 100})
    kai.store.create(QUEUES, queue("team-a", 2, parent="research"))
    j = job("build", "team-a", 1, "team-a", gpus=3)
    j["spec"]["template"]["spec"]["priorityClassName"] = "build"
    kai.store.create("jobs.batch", j)
    kai.settle()
    assert kai.running("team-a") == []
    msg = [c for c in kai.pods("team-a")[0]["status"]["conditions"] if c["type"] == "PodScheduled"][0]["message"]
    assert msg == ("NonPreemptibleOverQuota: Non-preemptible workload is over quota. Workload requested 3 GPUs, "
                   "but team-a quota is 2 GPUs, while 0 GPUs are already allocated for non-preemptible pods. "
                   "Use a preemptible workload to go over quota.")


def test_a_departments_limit_caps_its_teams(kai):
    dept = kai.store.get(QUEUES, None, "research")
    dept["spec"]["resources"]["gpu"]["limit"] = 5
    kai.store.update(QUEUES, dept)
    kai.store.create(QUEUES, queue("team-a", 2, parent="research"))
    kai.store.create(QUEUES, queue("team-b", 2, parent="research"))
    kai.store.create("jobs.batch", job("train", "team-a", 4, "team-a"))
    kai.store.create("jobs.batch", job("train", "team-b", 4, "team-b"))
    kai.wait(lambda: kai.scheduled_count("team-a") + kai.scheduled_count("team-b") == 5)
    kai.settle()
    assert kai.scheduled_count("team-a") + kai.scheduled_count("team-b") == 5
    pending = [p for ns in ("team-a", "team-b") for p in kai.pods(ns) if not p["spec"].get("nodeName")]
    msgs = {[c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"][0]["message"] for p in pending}
    assert any(m.startswith("OverLimit: research quota has reached the allowable limit of GPUs. Limit is 5 GPUs")
               for m in msgs), msgs
