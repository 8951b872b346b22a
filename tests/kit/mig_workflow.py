"""A scripted fake API for the MIG workflow (mig/config.py) and its node and pod builders, shared by
the MIG workflow tests and the failure-message tests."""
import copy

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import config as mc
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError

from kit.paths import MIG_PARTED_CONFIG as DEFAULT_CM

H100 = "NVIDIA-H100-80GB-HBM3"


def TooMany():
    return ApiError("CREATE", "Pod eviction", "train-0", "team-a", status=429, reason="Too Many Requests",
                    message="Cannot evict pod as it would violate the pod's disruption budget.")


def Lost():
    return ApiError("WATCH", "Node", "n1", status=None, message="connection refused", url="https://api:6443")


def _node(name="n1", config="all-disabled", state="success", alloc=None, strategy="single", rv="10"):
    return {"metadata": {"name": name, "resourceVersion": rv, "labels": {
        "nvidia.com/mig.capable": "true", "nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "2",
        "nvidia.com/mig.config": config, "nvidia.com/mig.config.state": state,
        "nvidia.com/mig.strategy": strategy}},
        "spec": {}, "status": {"allocatable": alloc if alloc is not None else {"nvidia.com/gpu": "2"}}}


def _pod(name, node="n1", gpu=True, ns="team-a", phase="Running"):
    res = {"limits": {"nvidia.com/gpu": "1"}} if gpu else {}
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"nodeName": node, "containers": [
        {"name": "c", "resources": res}]}, "status": {"phase": phase}}


class FakeApi(object):
    """Nodes in a dict; `script` = list of node label/status changes the 'mig-manager' makes
    after the mig.config patch, delivered through watch_node."""

    def __init__(self, nodes, pods=(), strategy="single", script=(), evict_errors=None):
        with open(DEFAULT_CM) as handle:
            import yaml
            self.cm = yaml.safe_load(handle)
        self.cm["metadata"]["namespace"] = "gpu-operator"
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = list(pods)
        self.policy = {"metadata": {"name": "cluster-policy"}, "spec": {"mig": {"strategy": strategy}},
                       "status": {"state": "ready", "namespace": "gpu-operator"}}
        self.script = list(script)
        self.pending_events = []
        self.evict_errors = dict(evict_errors or {})
        self.calls = []     # writes
        self.reads = []     # node, ConfigMap and pod reads

    def cluster_policies(self):
        return [copy.deepcopy(self.policy)] if self.policy else []

    def operator_deployment_namespaces(self):
        return []

    def configmap(self, ns, name):
        self.reads.append(("get", "ConfigMap", name))
        return copy.deepcopy(self.cm) if (ns, name) == ("gpu-operator", "default-mig-parted-config") else None

    def node(self, name):
        self.reads.append(("get", "Node", name))
        return copy.deepcopy(self.nodes.get(name))

    def all_nodes(self):
        self.reads.append(("list", "Node"))
        return [copy.deepcopy(n) for n in self.nodes.values()]

    def configmaps_in(self, ns):
        self.reads.append(("list", "ConfigMap", ns))
        return [copy.deepcopy(self.cm)] if ns == "gpu-operator" else []

    def pods_on_node(self, node):
        self.reads.append(("list", "Pod", node))
        return [copy.deepcopy(p) for p in self.pods if p["spec"]["nodeName"] == node]

    def pods_list_version(self, node):
        return self.pods_on_node(node), "5"

    def watch_pods_on_node(self, node, version, timeout):
        return iter(())

    def node_events(self, node):
        return [{"type": "Warning", "reason": "MigConfigFailed", "message": "mig-parted apply failed",
                 "involvedObject": {"kind": "Node", "name": node}}]

    def pod_log(self, ns, name, container=None, tail_lines=40):
        return "level=error msg=\"Error applying MIG configuration\""

    def patch_node(self, name, patch):
        self.calls.append(("patch", name, patch))
        node = self.nodes[name]
        for key, value in (patch.get("metadata") or {}).get("labels", {}).items():
            node["metadata"]["labels"][key] = value
        if "spec" in patch:
            node["spec"]["unschedulable"] = patch["spec"]["unschedulable"]
        if (patch.get("metadata") or {}).get("labels"):
            self.pending_events = list(self.script)
        return copy.deepcopy(node)

    def evict(self, ns, name):
        self.calls.append(("evict", ns, name))
        errors = self.evict_errors.get(name)
        if errors:
            raise errors.pop(0)
        self.pods = [p for p in self.pods if p["metadata"]["name"] != name]

    def watch_node(self, name, version, timeout):
        while self.pending_events:
            step = self.pending_events.pop(0)
            if step == "lost":
                raise Lost()
            node = self.nodes[name]
            labels, alloc = step
            node["metadata"]["labels"].update(labels)
            if alloc is not None:
                node["status"]["allocatable"] = alloc
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
            yield "MODIFIED", copy.deepcopy(node)


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0  # every look at the clock costs a second: loops end
        return self.now


PENDING = ({"nvidia.com/mig.config.state": "pending"}, None)


def _success(alloc):
    return ({"nvidia.com/mig.config.state": "success",
             "nvidia.com/gpu.product": H100 + "-MIG-1g.10gb", "nvidia.com/gpu.count": "14"}, alloc)


def _params(**kw):
    params = dict(nodes=["n1"], profile="all-1g.10gb", drain=False, timeout=30, verify_timeout=10,
                  eviction_timeout=10, device_id=None, operator_namespace=None)
    params.update(kw)
    return params


def _run(api, check_mode=False, **kw):
    return _run_full(api, check_mode, **kw)[1]


def _run_full(api, check_mode=False, **kw):
    return mc.MigConfigurator(api, _params(**kw), check_mode=check_mode, clock=Clock(),
                              sleep=lambda s: None).run()
