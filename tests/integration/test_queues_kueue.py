"""roles/queues with Kueue: the real chart (helm 4; the install also with helm 3), flavors from the node pools, cohort reclaim."""
import os

import pytest

from kit.paths import BIN, KUEUE_CHART
from kit.kubectl import apply, kget, kubectl
from kit.queues import gpu_job, inventory, play, running, start_cluster, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]
LABEL = "kueue.x-k8s.io/queue-name"
FLAVOR = "h100-nvlink-training"
# host_vars of the GPU node, as node_prereqs defines its pool (inventories/example/group_vars)
GPU_HOSTS = {"gpu-h100-1": {
    "node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "workload": "training"},
    "node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]}}


def team(name, nominal=4, **res):
    block = {"nominal": nominal}
    block.update(res)
    return {"name": name, "queue": {"cohort": "research", "flavors": [
        {"name": FLAVOR, "resources": {"nvidia.com/gpu": block}}]}}


def settings(**over):
    values = {"tenants_queue_backend": "kueue", "queues_chart_source": "archive", "queues_chart_ref": KUEUE_CHART,
              "queues_chart_version": "0.19.2", "queues_wait_timeout": 120,
              "tenants_list": [team("team-a"), team("team-b")]}   # 4 + 4 = the 8 GPUs of the pool
    values.update(over)
    return values


# The helm client (major) a test's installed cluster uses. Flavors, queues, reclaim, gang and the
# admission policy do not depend on it: helm 4 runs them all. Helm 3 is kept for the install and
# its re-run: the chart install/upgrade is the one place the two clients differ (helm 4 applies
# server-side and diffs its own way), and a site may still run helm 3.
HELM4 = pytest.mark.parametrize("installed", ["helm4"], indirect=True)
HELM3_AND_HELM4 = pytest.mark.parametrize("installed", ["helm3", "helm4"], indirect=True)


@pytest.fixture(scope="module")
def installed(request, tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "kueue-" + request.param)
    inv = inventory(tmp_path_factory.mktemp("inv"), settings(), GPU_HOSTS)
    first = play(sim, inv, queues_helm_binary=os.path.join(BIN, request.param))
    yield sim, inv, request.param, first
    sim.stop()


@HELM3_AND_HELM4
def test_install_renders_flavor_and_queues_and_reruns_unchanged(installed):
    sim, inv, helm, first = installed
    assert first.rc == 0, first
    rf = kget(sim, "resourceflavor", FLAVOR)
    assert rf["spec"]["nodeLabels"] == {"gpu.skaffon.io/accelerator": "h100", "gpu.skaffon.io/topology": "nvlink",
                                        "gpu.skaffon.io/workload": "training"}
    assert rf["spec"]["tolerations"] == [{"key": "gpu.skaffon.io/workload", "operator": "Equal",
                                          "value": "training", "effect": "NoSchedule"}]
    cq = kget(sim, "clusterqueue", "team-a")
    assert cq["spec"]["cohortName"] == "research"
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    assert kget(sim, "localqueue", "team-a", "-n", "team-a")["spec"]["clusterQueue"] == "team-a"
    again = play(sim, inv, queues_helm_binary=os.path.join(BIN, helm))
    assert again.rc == 0, again
    assert again.changed() == 0, again.data


@HELM4
def test_check_mode_writes_nothing(installed, tmp_path):
    sim, _inv, helm, _ = installed
    changed = settings()
    changed["tenants_list"][0] = team("team-a", 6)
    before = kget(sim, "clusterqueue", "team-a")["metadata"]["resourceVersion"]
    res = play(sim, inventory(tmp_path, changed, GPU_HOSTS), check=True, diff=True,
               queues_helm_binary=os.path.join(BIN, helm))
    assert res.rc == 0, res
    assert res.changed() == 1
    assert kget(sim, "clusterqueue", "team-a")["metadata"]["resourceVersion"] == before


@HELM4
def test_borrow_while_idle_then_reclaim_and_gang(installed):
    sim, _inv, _helm, _ = installed
    apply(sim, gpu_job("one", "team-a", 4, LABEL, "team-a"))
    wait_for(lambda: len(running(sim, "team-a")) == 4, 60, "team-a within its nominal 4")
    apply(sim, gpu_job("two", "team-a", 4, LABEL, "team-a"))
    wait_for(lambda: len(running(sim, "team-a")) == 8, 60, "team-a runs 8 while team-b is idle")
    job = kget(sim, "job", "two", "-n", "team-a")
    assert job["spec"]["template"]["spec"]["nodeSelector"]["gpu.skaffon.io/accelerator"] == "h100"
    apply(sim, gpu_job("mine", "team-b", 4, LABEL, "team-b"))
    wait_for(lambda: (len(running(sim, "team-a")), len(running(sim, "team-b"))) == (4, 4), 60,
             "team-b gets its 4 back")
    # gang: with 1 GPU of team-a in use and team-b's 4 busy, team-a has room for 3; 4 start only whole
    for j in ("one", "two"):
        kubectl(sim, "delete", "job", j, "-n", "team-a")
    apply(sim, gpu_job("small", "team-a", 1, LABEL, "team-a"))
    wait_for(lambda: len(running(sim, "team-a", "small")) == 1, 60, "team-a small")
    apply(sim, gpu_job("gang", "team-a", 4, LABEL, "team-a"))
    wl_name = wait_for(lambda: next((w["metadata"]["name"] for w in
                                     (kget(sim, "workloads", "-n", "team-a") or {}).get("items", [])
                                     if w["metadata"]["name"].startswith("job-gang-")), None),
                       60, "workload of the gang")
    assert len(wl_name) == len("job-gang-") + 5
    wait_for(lambda: any(c.get("type") == "QuotaReserved" and c.get("status") == "False" for c in
                         (kget(sim, "workload", wl_name, "-n", "team-a").get("status") or {}).get("conditions", [])),
             60, "gang pending")
    assert running(sim, "team-a", "gang") == []
    kubectl(sim, "delete", "job", "small", "-n", "team-a")
    wait_for(lambda: len(running(sim, "team-a", "gang")) == 4, 60, "the whole gang")


@HELM4
def test_a_job_naming_another_teams_queue_is_refused(installed):
    sim, _inv, _helm, _ = installed
    res = apply(sim, gpu_job("steal", "team-a", 1, LABEL, "team-b"), check=False)
    assert res.returncode != 0
    assert ("denied request: kueue.x-k8s.io/queue-name team-b is not the queue of namespace team-a"
            in res.stderr)


@HELM4
def test_refused_before_any_write(installed, tmp_path):
    sim, _inv, helm, _ = installed
    bad = settings(tenants_list=[team("team-a", 4, borrowing_limit=2), {"name": "team-x", "queue": {
        "flavors": [{"name": FLAVOR, "resources": {"nvidia.com/gpu": {"nominal": 1, "borrowing_limit": 1}}}]}}])
    res = play(sim, inventory(tmp_path, bad, GPU_HOSTS), queues_helm_binary=os.path.join(BIN, helm))
    assert res.rc != 0
    assert any("tenants_list[1].queue.flavors[0].resources[nvidia.com/gpu].borrowing_limit: set without a cohort"
               in m for m in res.failure_messages())
    assert res.changed() == 0
    assert "borrowingLimit" not in kget(sim, "clusterqueue", "team-a")["spec"]["resourceGroups"][0]["flavors"][0][
        "resources"][0]


def test_install_under_the_mirror(tmp_path_factory):
    sim = start_cluster(tmp_path_factory, "kueue-mirror", registries=["registry.local:5000"])
    try:
        inv = inventory(tmp_path_factory.mktemp("inv"), settings(queues_image_mirror="registry.local:5000/mirror"),
                        GPU_HOSTS)
        res = play(sim, inv, queues_helm_binary=os.path.join(BIN, "helm4"))
        assert res.rc == 0, res
        dep = kget(sim, "deployment", "kueue-controller-manager", "-n", "kueue-system")
        images = [c["image"] for c in dep["spec"]["template"]["spec"]["containers"]]
        assert images and all(i.startswith("registry.local:5000/mirror/kueue/kueue:") for i in images)
    finally:
        sim.stop()
