"""Deployment rollouts paced like kube-controller-manager's deployment controller.

The table tests are ported from kubernetes/kubernetes pkg/controller/deployment/rolling_test.go
(TestDeploymentController_reconcileNewReplicaSet, _reconcileOldReplicaSets,
_cleanupUnhealthyReplicas, _scaleDownOldReplicaSetsForRollingUpdate) and
pkg/controller/deployment/util/deployment_util_test.go (TestResolveFenceposts,
TestNewRSNewReplicas, TestMaxUnavailable): same inputs, same expected sizes.
"""
import threading

import pytest

from simcluster.errors import ApiError
from simcluster.twins import workloads as w
from simcluster.twins.testkit import FAST, TwinCluster, deployment


# -- rolling_test.go ------------------------------------------------------------------------

@pytest.mark.parametrize("replicas,max_surge,old,new,expected", [
    (10, 0, 10, 0, None),       # should not scale up
    (10, 2, 10, 0, 2),
    (10, 2, 5, 0, 7),
    (10, 2, 10, 2, None),
    (10, 2, 2, 11, 10),         # should scale down
])
def test_reconcile_new_replica_set(replicas, max_surge, old, new, expected):
    # upstream: maxUnavailable 0, allRSs = [newRS, oldRS]
    surge = w.max_surge_of("RollingUpdate", max_surge, 0, replicas)
    assert w.reconcile_new("RollingUpdate", replicas, surge, old + new, new) == expected


@pytest.mark.parametrize("replicas,max_unav,old,new,old_ready,new_ready,expected", [
    (10, 0, 10, 0, 10, 0, 9),
    (10, 2, 10, 0, 10, 0, 8),
    (10, 2, 10, 0, 8, 0, 8),    # unhealthy replicas of the old ReplicaSet cleaned up
    (10, 2, 10, 0, 9, 0, 8),    # 1 unhealthy cleaned up, 1 ready scaled down
    (10, 2, 8, 2, 8, 0, None),  # unavailable new pods do not let the old ones go further
])
def test_reconcile_old_replica_sets(replicas, max_unav, old, new, old_ready, new_ready, expected):
    # upstream: maxSurge 0 (so maxUnavailable 0 resolves to 1)
    unavailable = w.max_unavailable("RollingUpdate", 0, max_unav, replicas)
    sizes = w.reconcile_old(replicas, unavailable, (new, new_ready), [(old, old_ready)])
    assert sizes == (None if expected is None else [expected])


@pytest.mark.parametrize("old,ready,max_cleanup,expected", [
    (10, 8, 1, 1), (10, 8, 3, 2), (10, 8, 0, 0), (10, 10, 3, 0)])
def test_cleanup_unhealthy_replicas(old, ready, max_cleanup, expected):
    sizes, count = w.cleanup_unhealthy([(old, ready)], max_cleanup)
    assert count == expected and sizes == [old - expected]


@pytest.mark.parametrize("replicas,max_unav,ready,old,expected", [
    (10, 0, 10, 10, 9),
    (10, 2, 10, 10, 8),
    (10, 2, 8, 10, None),
    (10, 2, 10, 0, None),
    (10, 2, 1, 10, None),
])
def test_scale_down_old_replica_sets_for_rolling_update(replicas, max_unav, ready, old, expected):
    unavailable = w.max_unavailable("RollingUpdate", 0, max_unav, replicas)
    sizes, scaled = w.scale_down_old_for_rolling(replicas, unavailable, ready, [old])
    assert (sizes[0] if scaled else None) == expected


# -- deployment_util_test.go ----------------------------------------------------------------

@pytest.mark.parametrize("surge,unav,desired,expected", [
    ("0%", "0%", 0, (0, 1)),
    ("39%", "39%", 10, (4, 3)),
    ("oops", "39%", 10, ValueError),
    ("55%", "urg", 10, ValueError),
    (None, "39%", 10, (0, 3)),
    ("39%", None, 10, (4, 0)),
    (None, None, 10, (0, 1)),
    # the rounding the API documents: surge up, unavailable down
    ("25%", "25%", 8, (2, 2)),
    ("25%", "25%", 3, (1, 0)),
    (1, 1, 2, (1, 1)),
    ("5", "1", 7, ValueError),          # a string must be a percentage
])
def test_resolve_fenceposts(surge, unav, desired, expected):
    if expected is ValueError:
        with pytest.raises(ValueError):
            w.resolve_fenceposts(surge, unav, desired)
    else:
        assert w.resolve_fenceposts(surge, unav, desired) == expected


@pytest.mark.parametrize("kind,replicas,new,surge,expected", [
    ("RollingUpdate", 1, 5, 1, 5),      # can not scale up
    ("RollingUpdate", 6, 2, 10, 6),     # scale up to the Deployment's replicas
    ("Recreate", 3, 1, 1, 3),
])
def test_new_rs_new_replicas(kind, replicas, new, surge, expected):
    # upstream: allRSs = [rs5] (5 replicas), maxUnavailable 1
    assert w.new_rs_new_replicas(kind, replicas, surge, 5, new) == expected


@pytest.mark.parametrize("kind,replicas,max_unav,expected", [
    ("RollingUpdate", 10, 5, 5), ("RollingUpdate", 10, 10, 10), ("RollingUpdate", 5, 10, 5),
    ("RollingUpdate", 0, 10, 0), ("Recreate", 1, None, 0), ("RollingUpdate", 10, "50%", 5),
    ("RollingUpdate", 10, "100%", 10), ("RollingUpdate", 5, "100%", 5)])
def test_max_unavailable(kind, replicas, max_unav, expected):
    assert w.max_unavailable(kind, 1, max_unav, replicas) == expected


def test_strategy_defaults_are_the_api_defaults():
    assert w.rollout_strategy({}) == ("RollingUpdate", "25%", "25%")
    assert w.rollout_strategy({"strategy": {"rollingUpdate": {"maxSurge": 0}}}) == ("RollingUpdate", 0, "25%")
    assert w.rollout_strategy({"strategy": {"type": "Recreate"}})[0] == "Recreate"


# -- the controller on a cluster ---------------------------------------------------------------

class PodWatch:
    """Counts the pods of one Deployment after every store event: the most that existed at once
    and the fewest that were Ready, while recording."""

    def __init__(self, store, prefix, pods):
        self.prefix, self.pods, self.lock = prefix, {}, threading.Lock()
        self.max_total, self.min_ready, self.recording = 0, None, False
        store.subscribe(self.on_event)
        for pod in pods:
            self.on_event("ADDED", "pods", pod)

    def on_event(self, etype, resource, obj):
        if resource != "pods" or not obj["metadata"]["name"].startswith(self.prefix):
            return
        with self.lock:
            if etype == "DELETED" or w.terminal(obj):
                self.pods.pop(obj["metadata"]["name"], None)
            else:
                self.pods[obj["metadata"]["name"]] = w.pod_ready(obj)
            if self.recording:
                self.max_total = max(self.max_total, len(self.pods))
                ready = sum(self.pods.values())
                self.min_ready = ready if self.min_ready is None else min(self.min_ready, ready)

    def start(self):
        with self.lock:
            self.recording = True
            self.max_total, self.min_ready = len(self.pods), sum(self.pods.values())


def _rolled_out(c, name, replicas, ns="apps"):
    def check():
        d = c.store.get("deployments.apps", ns, name)
        st = d.get("status") or {}
        conds = {x["type"]: x for x in st.get("conditions") or []}
        return (st.get("observedGeneration") == d["metadata"].get("generation")
                and st.get("updatedReplicas") == replicas and st.get("availableReplicas") == replicas
                and st.get("replicas") == replicas
                and conds.get("Progressing", {}).get("reason") == "NewReplicaSetAvailable" and d)
    return c.wait(check, what="deployment %s rolled out" % name)


def _with_strategy(dep, strategy):
    dep["spec"]["strategy"] = strategy
    return dep


def _new_template(c, name, value, ns="apps"):
    c.store.merge_patch("deployments.apps", ns, name, {"spec": {"template": {"metadata": {
        "annotations": {"rev": value}}}}})


@pytest.mark.parametrize("store", ["fake", "real"])
@pytest.mark.parametrize("surge,unav,most,fewest", [
    (1, 0, 5, 4),           # one extra pod at a time, never one less ready
    (0, 1, 4, 3),           # one pod down at a time, never one more
    ("50%", "25%", 6, 3),   # 2 extra (rounded up), 1 down (rounded down)
])
def test_rolling_update_stays_within_surge_and_unavailable(store, surge, unav, most, fewest):
    with TwinCluster("default.yaml", store=store) as c:
        c.namespace("apps")
        c.store.create("deployments.apps", _with_strategy(deployment("web", "apps", replicas=4), {
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unav}}))
        _rolled_out(c, "web", 4)
        watch = PodWatch(c.store, "web-", c.pods("apps", "web-"))
        assert len(watch.pods) == 4 and all(watch.pods.values())
        old = set(watch.pods)
        watch.start()
        _new_template(c, "web", "2")
        d = _rolled_out(c, "web", 4)
        assert not old & {p["metadata"]["name"] for p in c.pods("apps", "web-")}
        assert watch.max_total == most, "pods at once: %d" % watch.max_total
        assert watch.min_ready == fewest, "fewest ready: %d" % watch.min_ready
        scaled = [e["message"] for e in c.events("ScalingReplicaSet", "web")]
        assert any(m.startswith("Scaled down replica set web-") for m in scaled), scaled
        assert d["status"].get("unavailableReplicas") is None


@pytest.mark.parametrize("store", ["fake", "real"])
def test_recreate_removes_every_old_pod_before_the_first_new_one(store):
    with TwinCluster("default.yaml", store=store) as c:
        c.namespace("apps")
        c.store.create("deployments.apps", _with_strategy(deployment("web", "apps", replicas=3),
                                                          {"type": "Recreate"}))
        _rolled_out(c, "web", 3)
        watch = PodWatch(c.store, "web-", c.pods("apps", "web-"))
        assert len(watch.pods) == 3 and all(watch.pods.values())
        watch.start()
        _new_template(c, "web", "2")
        _rolled_out(c, "web", 3)
        assert watch.max_total == 3 and watch.min_ready == 0


def test_new_pods_that_never_get_ready_keep_the_old_ones_serving():
    """maxUnavailable 0 and a template whose image never pulls: maxSurge new pods wait, all
    the old ones stay Ready, the Deployment stays Available and Progressing."""
    with TwinCluster("default.yaml", faults={"image_pull_fail": ["broken:1"]}) as c:
        c.namespace("apps")
        c.store.create("deployments.apps", _with_strategy(deployment("web", "apps", replicas=4), {
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}))
        _rolled_out(c, "web", 4)
        c.store.merge_patch("deployments.apps", "apps", "web", {"spec": {"template": {"spec": {
            "containers": [{"name": "web", "image": "broken:1"}]}}}})
        c.wait(lambda: len(c.pods("apps", "web-")) == 5, what="one surge pod")
        c.settle()
        pods = c.pods("apps", "web-")
        assert len(pods) == 5 and sum(w.pod_ready(p) for p in pods) == 4
        st = c.store.get("deployments.apps", "apps", "web")["status"]
        conds = {x["type"]: x for x in st["conditions"]}
        assert conds["Available"]["status"] == "True"
        assert conds["Progressing"]["reason"] == "ReplicaSetUpdated"
        assert st["updatedReplicas"] == 1 and st["unavailableReplicas"] == 1


def test_both_fenceposts_zero_is_refused_like_the_api_server():
    with TwinCluster("default.yaml", store="real") as c:
        c.namespace("apps")
        with pytest.raises(ApiError) as err:
            c.store.create("deployments.apps", _with_strategy(deployment("web", "apps"), {
                "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}))
        assert err.value.code == 422
        assert ("spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": "
                "may not be 0 when `maxSurge` is 0") in err.value.message


@pytest.mark.parametrize("strategy,message", [
    ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "5", "maxUnavailable": 1}},
     'spec.strategy.rollingUpdate.maxSurge: Invalid value: "5": a valid percent string must be a numeric '
     "string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"),
    ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": -1}},
     "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"),
    ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "110%"}},
     'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "110%": must not be greater than 100%'),
    ({"type": "Recreate", "rollingUpdate": {"maxSurge": 1}},
     "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"),
    ({"type": "BlueGreen"},
     'spec.strategy.type: Unsupported value: "BlueGreen": supported values: "Recreate", "RollingUpdate"'),
])
def test_strategy_validation_messages(strategy, message):
    with TwinCluster("default.yaml", store="real") as c:
        c.namespace("apps")
        with pytest.raises(ApiError) as err:
            c.store.create("deployments.apps", _with_strategy(deployment("web", "apps"), strategy))
        assert message in err.value.message, err.value.message


def test_eviction_honours_the_pdb_until_the_replacement_is_ready():
    """A serving Deployment with a PodDisruptionBudget (minAvailable 2 of 3): one eviction
    goes through, the next is refused (429) until the ReplicaSet's replacement pod is Ready."""
    from simcluster.controllers import disruption
    with TwinCluster("default.yaml", store="real", timings=dict(FAST, pod_start=0.3)) as c:
        c.namespace("apps")
        c.store.create("deployments.apps", deployment("web", "apps", replicas=3))
        _rolled_out(c, "web", 3)
        c.store.create("poddisruptionbudgets.policy", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
        first, second = sorted(p["metadata"]["name"] for p in c.pods("apps", "web-"))[:2]
        disruption.evict(c.store, "apps", first, {})
        with pytest.raises(ApiError) as err:
            disruption.evict(c.store, "apps", second, {})
        assert err.value.code == 429
        c.wait(lambda: sum(w.pod_ready(p) for p in c.pods("apps", "web-")) == 3, what="replacement Ready")
        disruption.evict(c.store, "apps", second, {})
        assert c.store.get("pods", "apps", second) is None
