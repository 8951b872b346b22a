"""Workload controllers: Deployment/ReplicaSet, DaemonSet, StatefulSet, Job (fake and real store)."""
import pytest

from simcluster import errors
from simcluster.twins.testkit import TwinCluster, deployment, status_word


@pytest.fixture(params=["fake", "real"])
def cluster(request):
    with TwinCluster("default.yaml", store=request.param) as c:
        c.namespace("apps")
        yield c


def _ready_deploy(c, name, replicas):
    def check():
        d = c.store.get("deployments.apps", "apps", name)
        st = d.get("status") or {}
        return (st.get("observedGeneration") == d["metadata"]["generation"]
                and st.get("updatedReplicas") == replicas and st.get("availableReplicas") == replicas
                and st.get("replicas") == replicas and d)
    return c.wait(check, what="deployment %s rolled out" % name)


def test_deployment_creates_replicaset_and_ready_pods(cluster):
    c = cluster
    c.store.create("deployments.apps", deployment("web", "apps", replicas=2))
    d = _ready_deploy(c, "web", 2)
    conds = {x["type"]: x for x in d["status"]["conditions"]}
    assert conds["Available"]["status"] == "True"
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"
    rs = c.store.list("replicasets.apps", "apps")
    assert len(rs) == 1 and rs[0]["status"]["readyReplicas"] == 2
    assert rs[0]["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"]
    pods = c.pods("apps", "web-")
    assert len(pods) == 2
    assert all(status_word(p) == "Running" and p["spec"]["nodeName"] for p in pods)
    assert all(p["metadata"]["labels"]["pod-template-hash"] in rs[0]["metadata"]["name"] for p in pods)


@pytest.mark.parametrize("store", ["fake", "real"])
def test_rolling_update_keeps_the_old_pod_until_the_new_one_is_ready(store):
    """RollingUpdate (maxUnavailable 25% of 1 = 0): a new template whose image never pulls
    leaves the old pod serving, like a real cluster; Recreate drops it at once."""
    with TwinCluster("default.yaml", store=store, faults={"image_pull_fail": ["broken:1"]}) as c:
        c.namespace("apps")
        c.store.create("deployments.apps", deployment("web", "apps", replicas=1))
        _ready_deploy(c, "web", 1)
        old = {p["metadata"]["name"] for p in c.pods("apps", "web-")}
        c.store.merge_patch("deployments.apps", "apps", "web", {"spec": {"template": {"spec": {
            "containers": [{"name": "web", "image": "broken:1"}]}}}})
        c.wait(lambda: any(status_word(p) in ("ErrImagePull", "ImagePullBackOff")
                           for p in c.pods("apps", "web-")), what="new pod failing to pull")
        c.settle()
        running = {p["metadata"]["name"] for p in c.pods("apps", "web-") if status_word(p) == "Running"}
        assert running == old, "the old pod must keep serving while the new one is not ready"
        d = c.store.get("deployments.apps", "apps", "web")
        assert d["status"]["availableReplicas"] == 1 and d["status"]["updatedReplicas"] == 1

        c.store.merge_patch("deployments.apps", "apps", "web", {"spec": {"strategy": {"type": "Recreate"},
                            "template": {"metadata": {"annotations": {"r": "2"}}}}})
        c.wait(lambda: not old & {p["metadata"]["name"] for p in c.pods("apps", "web-")},
               what="Recreate removes the old pod")


def test_rollout_restart_replaces_pods_with_a_new_replicaset(cluster):
    c = cluster
    c.store.create("deployments.apps", deployment("web", "apps", replicas=1))
    _ready_deploy(c, "web", 1)
    old = {p["metadata"]["name"] for p in c.pods("apps", "web-")}
    patch = {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}}}
    c.store.merge_patch("deployments.apps", "apps", "web", patch)
    c.wait(lambda: len(c.store.list("replicasets.apps", "apps")) == 2, what="second ReplicaSet")
    c.wait(lambda: {p["metadata"]["name"] for p in c.pods("apps", "web-")
                    if status_word(p) == "Running"} - old and
           not old & {p["metadata"]["name"] for p in c.pods("apps", "web-")}, what="pods replaced")
    _ready_deploy(c, "web", 1)
    revs = sorted(r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                  for r in c.store.list("replicasets.apps", "apps"))
    assert revs == ["1", "2"]


def test_scaling_down_deletes_pods(cluster):
    c = cluster
    c.store.create("deployments.apps", deployment("web", "apps", replicas=3))
    _ready_deploy(c, "web", 3)
    c.store.merge_patch("deployments.apps", "apps", "web", {"spec": {"replicas": 1}})
    _ready_deploy(c, "web", 1)
    c.wait(lambda: len(c.pods("apps", "web-")) == 1, what="2 pods deleted")


def _ds(name, ns="apps", node_selector=None, tolerations=None, privileged=False, image="busybox:1.36"):
    spec = {"containers": [{"name": "c", "image": image}]}
    if privileged:
        spec["containers"][0]["securityContext"] = {"privileged": True}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def _ds_status(c, name, ns="apps"):
    return (c.store.get("daemonsets.apps", ns, name) or {}).get("status") or {}


def test_daemonset_runs_one_pod_per_eligible_node(cluster):
    c = cluster
    c.store.create("daemonsets.apps", _ds("agent"))
    c.wait(lambda: _ds_status(c, "agent").get("numberReady") == 3, what="3 ready")
    st = _ds_status(c, "agent")
    assert st["desiredNumberScheduled"] == 3 and st["numberAvailable"] == 3
    assert st["updatedNumberScheduled"] == 3 and "numberUnavailable" not in st
    assert st["observedGeneration"] == 1
    nodes = sorted(p["spec"]["nodeName"] for p in c.pods("apps", "agent-"))
    assert nodes == ["cpu-1", "gpu-h100-1", "gpu-l40s-1"]


def test_daemonset_node_selector_and_taints(cluster):
    c = cluster
    c.store.merge_patch("nodes", None, "gpu-l40s-1", {"spec": {"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}})
    c.store.create("daemonsets.apps", _ds("zone-a", node_selector={"topology.kubernetes.io/zone": "a"}))
    c.store.create("daemonsets.apps", _ds("tolerant", node_selector={"topology.kubernetes.io/zone": "a"},
                                          tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]))
    c.wait(lambda: _ds_status(c, "tolerant").get("numberReady") == 2, what="tolerant on 2 nodes")
    c.wait(lambda: _ds_status(c, "zone-a").get("numberReady") == 1, what="zone-a on 1 node")
    assert [p["spec"]["nodeName"] for p in c.pods("apps", "zone-a-")] == ["gpu-h100-1"]
    assert _ds_status(c, "zone-a")["desiredNumberScheduled"] == 1


def test_daemonset_template_change_replaces_pods(cluster):
    c = cluster
    # the pool label node_prereqs puts on the node (a cluster file carries none)
    c.store.merge_patch("nodes", None, "gpu-h100-1", {"metadata": {"labels": {"gpu.skaffon.io/accelerator": "h100"}}})
    c.store.create("daemonsets.apps", _ds("agent", node_selector={"gpu.skaffon.io/accelerator": "h100"}))
    c.wait(lambda: _ds_status(c, "agent").get("numberReady") == 1)
    first = c.pods("apps", "agent-")[0]["metadata"]["name"]
    c.store.merge_patch("daemonsets.apps", "apps", "agent", {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}})
    c.wait(lambda: [p["metadata"]["name"] for p in c.pods("apps", "agent-")
                    if status_word(p) == "Running"] not in ([], [first]), what="new pod running")
    assert first not in [p["metadata"]["name"] for p in c.pods("apps", "agent-")]
    c.wait(lambda: _ds_status(c, "agent").get("observedGeneration") == 2
           and _ds_status(c, "agent").get("updatedNumberScheduled") == 1)


def test_daemonset_pod_refused_by_admission_leaves_failedcreate_event():
    """Real behaviour: PSA refuses privileged DaemonSet pods in a restricted namespace."""
    with TwinCluster("default.yaml", store="real") as c:
        c.namespace("locked", {"pod-security.kubernetes.io/enforce": "restricted"})
        c.store.create("daemonsets.apps", _ds("priv", ns="locked", privileged=True))
        ev = c.wait(lambda: c.events("FailedCreate", "priv"), what="FailedCreate event")
        assert ev[0]["message"].startswith("Error creating: ")
        assert "forbidden" in ev[0]["message"] and "PodSecurity" in ev[0]["message"]
        c.wait(lambda: _ds_status(c, "priv", "locked").get("desiredNumberScheduled") == 3)
        st = _ds_status(c, "priv", "locked")
        assert st["numberReady"] == 0 and st["numberUnavailable"] == 3
        assert c.pods("locked") == []


def test_fake_store_admission_refusal_is_reported_the_same_way():
    def admit(op, resource, obj, old):
        if resource == "pods" and obj["metadata"]["namespace"] == "locked":
            raise errors.forbidden("pods", obj["metadata"]["name"], "violates PodSecurity")
    with TwinCluster("default.yaml", store="fake", admit=admit) as c:
        c.namespace("locked")
        c.store.create("daemonsets.apps", _ds("priv", ns="locked"))
        ev = c.wait(lambda: c.events("FailedCreate", "priv"))
        assert 'pods "priv-' in ev[0]["message"] and "violates PodSecurity" in ev[0]["message"]


def _job(name, ns="apps", backoff=None, behaviour=None, completions=None):
    spec = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
    meta = {"labels": {"job": name}}
    if behaviour:
        meta["annotations"] = {"simcluster.skaffon.io/behaviour": behaviour}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
           "spec": {"template": {"metadata": meta, "spec": spec}}}
    if backoff is not None:
        job["spec"]["backoffLimit"] = backoff
    if completions:
        job["spec"]["completions"] = completions
    return job


def _job_cond(c, name):
    st = (c.store.get("jobs.batch", "apps", name) or {}).get("status") or {}
    return {x["type"]: x for x in st.get("conditions") or [] if x["status"] == "True"}, st


def test_job_completes(cluster):
    c = cluster
    c.store.create("jobs.batch", _job("once", completions=2))
    c.wait(lambda: "Complete" in _job_cond(c, "once")[0], what="job complete")
    _conds, st = _job_cond(c, "once")
    assert st["succeeded"] == 2 and "active" not in st and st.get("completionTime")
    pods = c.pods("apps", "once-")
    assert len(pods) == 2 and all(status_word(p) == "Completed" for p in pods)
    assert pods[0]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "once"


def test_job_failing_pods_hit_backoff_limit(cluster):
    c = cluster
    c.store.create("jobs.batch", _job("bad", backoff=1, behaviour="fail"))
    conds, _st = c.wait(lambda: "Failed" in _job_cond(c, "bad")[0] and _job_cond(c, "bad"))
    assert conds["Failed"]["reason"] == "BackoffLimitExceeded"
    assert _job_cond(c, "bad")[1]["failed"] == 2
    assert all(status_word(p) == "Error" for p in c.pods("apps", "bad-"))


def test_statefulset_pods_have_ordinal_names(cluster):
    c = cluster
    sts = deployment("db", "apps", replicas=2)
    sts["kind"] = "StatefulSet"
    sts["spec"]["serviceName"] = "db"
    c.store.create("statefulsets.apps", sts)
    c.wait(lambda: ((c.store.get("statefulsets.apps", "apps", "db").get("status") or {})
                    .get("readyReplicas")) == 2)
    assert sorted(p["metadata"]["name"] for p in c.pods("apps", "db-")) == ["db-0", "db-1"]


def test_deleting_an_owner_removes_its_pods(cluster):
    c = cluster
    c.store.create("deployments.apps", deployment("web", "apps", replicas=2))
    _ready_deploy(c, "web", 2)
    c.store.delete("deployments.apps", "apps", "web")
    c.wait(lambda: not c.pods("apps", "web-") and not c.store.list("replicasets.apps", "apps"),
           what="garbage collected")


def test_indexed_job_pods_carry_their_completion_index(cluster):
    """completionMode Indexed: one pod per index, the index in an annotation, a label and
    JOB_COMPLETION_INDEX, hostname <job>-<index> (what multi-node launchers address over DNS)."""
    c = cluster
    c.store.create("jobs.batch", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "idx", "namespace": "apps"},
        "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3,
                 "template": {"spec": {"restartPolicy": "Never", "subdomain": "idx",
                                       "containers": [{"name": "c", "image": "busybox:1.36"}]}}}})
    job = c.wait(lambda: (c.store.get("jobs.batch", "apps", "idx").get("status") or {}).get("succeeded") == 3
                 and c.store.get("jobs.batch", "apps", "idx"), what="indexed job complete")
    pods = sorted(c.pods("apps", "idx-"), key=lambda p: p["metadata"]["name"])
    assert len(pods) == 3 and job["status"]["succeeded"] == 3
    key = "batch.kubernetes.io/job-completion-index"
    for i, p in enumerate(pods):
        assert p["metadata"]["name"].startswith("idx-%d-" % i)
        assert p["metadata"]["annotations"][key] == str(i) and p["metadata"]["labels"][key] == str(i)
        assert p["spec"]["hostname"] == "idx-%d" % i and p["spec"]["subdomain"] == "idx"
        env = p["spec"]["containers"][0]["env"][0]
        assert env["name"] == "JOB_COMPLETION_INDEX"
        assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['%s']" % key
