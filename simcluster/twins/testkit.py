"""Test helpers for the twins: a running cluster on the fake or the real store.

    with TwinCluster("default.yaml", store="real") as c:
        c.install_operator(driver=True)
        c.wait(lambda: c.policy_state() == "ready")

Also kubectl's STATUS column for a pod (status_word), so tests assert what
an operator would see.
"""

import functools
import os
import time

import yaml

from ..jsoncopy import clone
from .. import clusterfile
from ..errors import ApiError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTERS = os.path.join(REPO, "tests", "clusters")
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
CP = "clusterpolicies.nvidia.com"
OPERATOR_IMAGE = "nvcr.io/nvidia/gpu-operator:v26.7.0"
CHART = os.path.join(SHARED, "upstream", "gpu-operator", "charts", "gpu-operator-v26.7.0.tgz")
HELM = os.path.join(REPO, ".venv", "bin", "helm")
# Waits poll up to SLACK times their nominal bound: on a loaded machine (CI, tests in parallel)
# the twins run several times slower, and 10 s for an operator install to reach the device
# plugin ran out under 8 runnable processes per core.
SLACK = 3.0
# Faster than the cluster-file defaults: keeps the unit tests of the twins quick.
FAST = {"pod_start": 0.01, "operand_start": 0.02, "driver_install": 0.02, "mig_reconfigure": 0.02,
        "image_pull_backoff": 0.05, "job_run": 0.01, "crash_backoff": 0.05}


@functools.lru_cache(maxsize=None)
def _crd_docs(path):
    """Parsed CRDs of a file (cached: the upstream CRDs take 0.2 s to parse)."""
    if not os.path.exists(path):
        return ()
    with open(path, encoding="utf-8") as fh:
        return tuple(d for d in yaml.load_all(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                     if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition")


@functools.lru_cache(maxsize=None)
def _chart_workloads():
    """The operator Deployment, NFD master Deployment and NFD worker DaemonSet exactly as
    `helm template` renders them from the real chart (release gpu-operator)."""
    import subprocess
    if not (os.path.exists(CHART) and os.path.exists(HELM)):
        import pytest
        pytest.skip("real chart %s or %s not found (../shared next to the repo?)" % (CHART, HELM))
    out = subprocess.run([HELM, "template", "gpu-operator", CHART, "-n", "gpu-operator"],
                         check=True, capture_output=True, text=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if isinstance(d, dict)]
    return tuple(d for d in docs if d["kind"] in ("Deployment", "DaemonSet")
                 and d["metadata"]["name"] in ("gpu-operator", "gpu-operator-node-feature-discovery-master",
                                               "gpu-operator-node-feature-discovery-worker"))


def chart_workloads(namespace, image=OPERATOR_IMAGE):
    """Copies of the chart's workloads for `namespace`, the operator running `image`."""
    objs = clone(list(_chart_workloads()))
    for obj in objs:
        obj["metadata"]["namespace"] = namespace
        if obj["metadata"]["name"] == "gpu-operator":
            obj["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return objs


def status_word(pod):
    """What `kubectl get pod` prints in STATUS (printPod in kubectl, simplified)."""
    st = pod.get("status") or {}
    reason = st.get("reason") or st.get("phase") or "Pending"
    inits = pod["spec"].get("initContainers") or []
    initializing = False
    for i, cs in enumerate(st.get("initContainerStatuses") or []):
        state = cs.get("state") or {}
        term, wait = state.get("terminated"), state.get("waiting")
        if term and term.get("exitCode") == 0:
            continue
        if term:
            reason = "Init:" + (term.get("reason") or "ExitCode:%d" % term.get("exitCode", 0))
        elif wait and wait.get("reason") and wait["reason"] != "PodInitializing":
            reason = "Init:" + wait["reason"]
        else:
            reason = "Init:%d/%d" % (i, len(inits))
        initializing = True
        break
    if not initializing:
        has_running = False
        for cs in reversed(st.get("containerStatuses") or []):
            state = cs.get("state") or {}
            if state.get("waiting", {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated", {}).get("reason"):
                reason = state["terminated"]["reason"]
            elif state.get("running") and cs.get("ready"):
                has_running = True
        if reason == "Completed" and has_running:
            reason = "Running"
    return reason


def cluster_policy(**over):
    """A ClusterPolicy spec valid against the real CRD (required sections present)."""
    spec = {"operator": {"defaultRuntime": "containerd"}, "daemonsets": {},
            "driver": {"enabled": True}, "toolkit": {"enabled": True},
            "devicePlugin": {"enabled": True}, "dcgm": {"enabled": False},
            "dcgmExporter": {"enabled": True}, "gfd": {"enabled": True},
            "migManager": {"enabled": True}, "nodeStatusExporter": {"enabled": False},
            "mig": {"strategy": "single"}, "validator": {}}
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = dict(spec[key], **value)
        else:
            spec[key] = value
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"}, "spec": spec}


def deployment(name, namespace, labels=None, image="busybox:1.36", replicas=1, **pod_spec):
    labels = labels or {"app": name}
    spec = {"containers": [{"name": name, "image": image}]}
    spec.update(pod_spec)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": spec}}}


def pod(name, namespace="default", image="busybox:1.36", gpus=None, resources=None, **spec):
    c = {"name": "main", "image": image}
    if gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if resources is not None:
        c["resources"] = resources
    body = {"containers": [c]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": body}


class TwinCluster:
    def __init__(self, cluster="default.yaml", store="fake", admit=None, **spec_over):
        path = cluster if os.path.isabs(cluster) else os.path.join(CLUSTERS, cluster)
        self.spec = clusterfile.load(path)
        timings = spec_over.pop("timings", None)
        self.spec.update(spec_over)
        self.spec["timings"] = dict(self.spec["timings"], **(FAST if timings is None else timings))
        self.kind = store
        if store == "real":
            from ..store import Store
            self.store = Store()
            missing = [p for p in self.spec["crds"] if not os.path.exists(p)]
            if missing:
                import pytest
                pytest.skip("CRD files not found (../shared next to the repo?): %s" % ", ".join(missing))
            for path in self.spec["crds"]:
                for doc in _crd_docs(path):
                    self.store.create("customresourcedefinitions.apiextensions.k8s.io",
                                      clone(doc))
        else:
            from .fakestore import FakeStore
            self.store = FakeStore(admit=admit)
            self.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": "default"}})
        from . import start
        self.handle = start(self.store, self.spec)
        self.ns = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.stop()

    # -- waiting ---------------------------------------------------------------------
    def wait(self, predicate, timeout=10.0, what=None):
        """The predicate's first true value; `timeout` is what an idle machine needs, the bound
        is SLACK times that (a wait returns as soon as the predicate holds)."""
        deadline = time.monotonic() + timeout * SLACK
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(0.02)
        raise AssertionError("timed out after %.1fs waiting for %s (last: %r; twin errors: %s)"
                             % (timeout * SLACK, what or getattr(predicate, "__name__", "condition"),
                                last, self.handle.errors[:1]))

    def settle(self, timeout=10.0):
        assert self.handle.settle(timeout * SLACK), "twins did not settle"

    # -- objects -----------------------------------------------------------------------
    def namespace(self, name, labels=None):
        obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        if labels:
            obj["metadata"]["labels"] = dict(labels)
        try:
            return self.store.create("namespaces", obj)
        except ApiError as err:
            if err.code != 409:
                raise
            return self.store.get("namespaces", None, name)

    def install_operator(self, ns="gpu-operator", psa="privileged", image=OPERATOR_IMAGE, **cp_over):
        labels = {}
        if psa:
            labels = {"pod-security.kubernetes.io/enforce": psa}
        self.namespace(ns, labels)
        self.ns = ns
        for obj in chart_workloads(ns, image):
            self.store.create("deployments.apps" if obj["kind"] == "Deployment" else "daemonsets.apps", obj)
        return self.store.create(CP, cluster_policy(**cp_over))

    def edit(self, resource, namespace, name, change, attempts=5):
        """Read the object, change(obj), write it back; read again on a conflict, as client-go's
        retry.RetryOnConflict does: a twin may write the object (its status) between the read and
        the write, and the store refuses a write from an older resourceVersion, as the API server does."""
        for attempt in range(attempts):
            obj = self.store.get(resource, namespace, name)
            change(obj)
            try:
                return self.store.update(resource, obj)
            except ApiError as err:
                if err.code != 409 or attempt == attempts - 1:
                    raise

    def patch_policy(self, spec_patch):
        return self.store.merge_patch(CP, None, "cluster-policy", {"spec": spec_patch})

    def policy(self):
        return self.store.get(CP, None, "cluster-policy")

    def policy_state(self):
        return ((self.policy() or {}).get("status") or {}).get("state")

    def condition(self, ctype):
        for c in ((self.policy() or {}).get("status") or {}).get("conditions") or []:
            if c["type"] == ctype:
                return c
        return None

    def ready_reason(self):
        c = self.condition("Ready")
        return c and c["status"] == "True" and c["reason"]

    def node(self, name):
        return self.store.get("nodes", None, name)

    def labels(self, node):
        return self.node(node)["metadata"].get("labels") or {}

    def label(self, node, labels):
        return self.store.merge_patch("nodes", None, node, {"metadata": {"labels": labels}})

    def allocatable(self, node, resource="nvidia.com/gpu"):
        return ((self.node(node).get("status") or {}).get("allocatable") or {}).get(resource)

    def pods(self, namespace=None, prefix=""):
        return [p for p in self.store.list("pods", namespace)
                if p["metadata"]["name"].startswith(prefix)]

    def pod(self, namespace, name):
        return self.store.get("pods", namespace, name)

    def operand_pods(self, ds, node=None):
        return [p for p in self.pods(self.ns, ds + "-")
                if node is None or p["spec"].get("nodeName") == node]

    def events(self, reason=None, name=None):
        out = []
        for e in self.store.list("events"):
            if reason and e.get("reason") != reason:
                continue
            if name and (e.get("involvedObject") or {}).get("name") != name:
                continue
            out.append(e)
        return out

    def logs(self, namespace, name, container):
        return self.store.pod_logs.get((namespace, name, container))

    def copy(self, obj):
        return clone(obj)
