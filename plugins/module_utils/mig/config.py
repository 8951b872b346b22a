# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG reconfiguration workflow behind the mig_config module.

validate everything (all nodes) -> [drain GPU pods] -> set nvidia.com/mig.config
-> watch nvidia.com/mig.config.state -> verify what the node offers -> uncordon.
`api` is a mig_k8s.K8sMigApi (or a fake of it in unit tests).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig import profiles as mig
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.mig.k8s import MIG_MANAGER_APP, K8sMigApi, api_status

TERMINAL_PHASES = upstream.POD_DONE_PHASES
PENDING_CAUSE = (
    "mig-manager validated the request but waits for the GPU clients on the node to stop; "
    "it stays `pending` as long as pods keep using the GPUs (its inner timeout is 5 minutes and it "
    "does not report a failure, gpu-operator#2833)")


# mig-manager acts on label changes only: after a failure the same profile again is never retried,
# so the first report says what the re-run would otherwise only say then.
FAILED_NEXT_STEP = (
    "A re-run with the same profile stops at once (mig-manager does not retry an unchanged label): fix the "
    "cause above, then restart the mig-manager pod on %(node)s (it applies the label when it starts; kubectl "
    "delete pod -n %(ns)s -l app=%(app)s --field-selector spec.nodeName=%(node)s) "
    "or set another mig_profile first.")


class MigConfigError(DomainError):
    """A MIG request that cannot be done (the module base turns it into fail_json)."""


def _labels(obj):
    return (obj.get("metadata") or {}).get("labels") or {}


def _pod_ref(pod):
    return "%s/%s" % (pod["metadata"].get("namespace"), pod["metadata"]["name"])


def gpu_resources(pod):
    """GPU-type extended resources a pod asks for ({name: quantity})."""
    found = {}
    spec = pod.get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            for name, value in (resources.get(section) or {}).items():
                if name == upstream.GPU_RESOURCE or name.startswith(upstream.GPU_RESOURCE + ".") \
                        or name.startswith(upstream.MIG_RESOURCE_PREFIX):
                    found[name] = str(value)
    return found


def running(pods):
    return [p for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES
            and not (p.get("metadata") or {}).get("deletionTimestamp")]


def gpu_pods(pods):
    return [p for p in running(pods) if gpu_resources(p)]


def describe_pods(pods):
    return ", ".join("%s (%s)" % (_pod_ref(p), ", ".join("%s=%s" % kv for kv in sorted(gpu_resources(p).items())))
                     if gpu_resources(p) else _pod_ref(p) for p in pods)


class Snapshot(object):
    """The reads of a validation over many nodes, from one LIST each of the Nodes and of the operator
    namespace's ConfigMaps, instead of a GET of each node and one or two of its ConfigMaps (3 requests
    per node: 1500 for a read of 500 nodes). Pods are still listed per node, and only for a node that
    will change (a cluster-wide pod LIST can be far larger than the nodes it serves)."""

    def __init__(self, api, namespace):
        self.api, self.namespace = api, namespace
        self.nodes = dict((n["metadata"]["name"], n) for n in api.all_nodes())
        self.configmaps = dict((c["metadata"]["name"], c) for c in api.configmaps_in(namespace))

    def node(self, name):
        return self.nodes.get(name)

    def node_names(self):
        return list(self.nodes)

    def configmap(self, namespace, name):
        if namespace != self.namespace:
            return self.api.configmap(namespace, name)
        return self.configmaps.get(name)

    def pods_on_node(self, name):
        return self.api.pods_on_node(name)


class MigConfigurator(object):
    def __init__(self, api, params, check_mode=False, clock=time.monotonic, log=None, sleep=time.sleep):
        self.api = api
        # what validation reads from: the API, or a Snapshot of it for a call over many nodes
        self.reads = api
        self.sleep = sleep
        self.params = params
        self.check_mode = check_mode
        self.clock = clock
        self.log = log or (lambda msg: None)

    # ------------------------------------------------------------------ cluster
    def cluster(self):
        """ClusterPolicy facts: strategy, operator namespace, custom config name."""
        policies = [p for p in self.api.cluster_policies()
                    if ((p.get("status") or {}).get("state")) != upstream.CP_STATE_IGNORED]
        if not policies:
            raise MigConfigError("No ClusterPolicy found: MIG is driven by the NVIDIA GPU Operator; install it "
                                 "with migManager.enabled=true and mig.strategy single or mixed first")
        policy = sorted(policies, key=lambda p: p["metadata"]["name"] != upstream.CLUSTER_POLICY_NAME)[0]
        spec = policy.get("spec") or {}
        if (spec.get("migManager") or {}).get("enabled") is False:
            raise MigConfigError("ClusterPolicy %s has spec.migManager.enabled=false: no mig-manager would act on "
                                 "%s; enable it (helm value migManager.enabled=true)"
                                 % (policy["metadata"]["name"], upstream.LABEL_MIG_CONFIG))
        strategy = (spec.get("mig") or {}).get("strategy") or "single"
        if strategy not in ("single", "mixed"):
            raise MigConfigError("ClusterPolicy %s spec.mig.strategy is %r: set it to single or mixed "
                                 "(helm value mig.strategy) to use MIG" % (policy["metadata"]["name"], strategy))
        namespace = self.params.get("operator_namespace") or (policy.get("status") or {}).get("namespace")
        if not namespace:
            found = self.api.operator_deployment_namespaces()
            if len(found) != 1:
                raise MigConfigError("ClusterPolicy %s has no status.namespace and %d gpu-operator Deployments "
                                     "were found (%s): set operator_namespace"
                                     % (policy["metadata"]["name"], len(found), ", ".join(found) or "none"))
            namespace = found[0]
        custom = ((spec.get("migManager") or {}).get("config") or {}).get("name")
        return {"name": policy["metadata"]["name"], "strategy": strategy, "namespace": namespace,
                "config_name": custom}

    def mig_parted_config(self, cluster, node):
        """The config mig-manager uses for `node`: custom, per-node generated, default."""
        namespace = cluster["namespace"]
        if cluster["config_name"]:
            configmap = self.reads.configmap(namespace, cluster["config_name"])
            if configmap is None:
                raise MigConfigError("ClusterPolicy %s spec.migManager.config.name names ConfigMap %s/%s, which "
                                     "does not exist: create it (key %s) or unset the field"
                                     % (cluster["name"], namespace, cluster["config_name"], upstream.MIG_CONFIGMAP_KEY))
        else:
            configmap = self.reads.configmap(namespace, node + upstream.PER_NODE_MIG_CONFIGMAP_SUFFIX) \
                or self.reads.configmap(namespace, upstream.DEFAULT_MIG_CONFIGMAP)
            if configmap is None:
                raise MigConfigError("Neither ConfigMap %s/%s%s nor %s/%s exists: the GPU Operator creates the "
                                     "default one when mig-manager is deployed; is the operator running?"
                                     % (namespace, node, upstream.PER_NODE_MIG_CONFIGMAP_SUFFIX, namespace,
                                        upstream.DEFAULT_MIG_CONFIGMAP))
        try:
            return mig.MigPartedConfig.from_configmap(configmap)
        except (mig.MigError, ValueError) as exc:
            raise MigConfigError("Cannot read the mig-parted config: %s" % exc)

    def known_nodes(self):
        """' (nodes of the cluster: a, b)' for a message, or '' when they cannot be listed."""
        try:
            names = self.reads.node_names()
        except (AttributeError, ApiError):
            return ""
        return " (nodes of the cluster: %s)" % ", ".join(sorted(names)) if names else ""

    # --------------------------------------------------------------- validation
    def plan_node(self, cluster, name, profile):
        node = self.reads.node(name)
        if node is None:
            raise MigConfigError("Node %s does not exist%s: set mig_node_name (default node_prereqs_node_name, "
                                 "else the inventory host name) of that host to its Kubernetes node name"
                                 % (name, self.known_nodes()))
        labels = _labels(node)
        if labels.get(upstream.LABEL_MIG_CAPABLE) != "true":
            raise MigConfigError("Node %s is not MIG capable (label %s=%r): only A30/A100/H100/H200/B200-class GPUs "
                                 "support MIG" % (name, upstream.LABEL_MIG_CAPABLE, labels.get(upstream.LABEL_MIG_CAPABLE)))
        config = self.mig_parted_config(cluster, name)
        product = mig.base_product(labels.get(upstream.LABEL_GPU_PRODUCT))
        count = mig.physical_gpu_count(labels, config)
        if count < 1:
            raise MigConfigError("Node %s has no %s label: is gpu-feature-discovery running?"
                                 % (name, upstream.LABEL_GPU_COUNT))
        try:
            model_name, model, device_id = mig.resolve_gpu(product, self.params.get("device_id"))
            layout = mig.check_profile(config, profile, product, count, device_id=device_id, node=name)
            expected = mig.expected_offer(layout, product, cluster["strategy"], model)
        except mig.MigError as exc:
            raise MigConfigError(str(exc))
        current = labels.get(upstream.LABEL_MIG_CONFIG)
        state = labels.get(upstream.LABEL_MIG_CONFIG_STATE)
        done = current == profile and state == upstream.MIG_STATE_SUCCESS
        # a node's pods matter only where it will change (refused, evicted or named in check mode)
        pods = self.reads.pods_on_node(name) if not done and self.params.get("reconfigure", True) else []
        return {"name": name, "node": node, "config": config, "current": current, "state": state,
                "expected": expected, "gpu_count": count, "product": product, "model": model_name,
                "done": done, "gpu_pods": gpu_pods(pods)}

    def validate(self, names, profile):
        cluster = self.cluster()
        plans, errors = [], []
        self.reads = Snapshot(self.api, cluster["namespace"]) if len(names) > 1 else self.api
        read = []
        try:
            for name in names:
                try:
                    read.append(self.plan_node(cluster, name, profile))
                except MigConfigError as exc:
                    read.append(exc.msg)
        finally:
            self.reads = self.api
        for plan in read:
            if not isinstance(plan, dict):
                errors.append(plan)
                continue
            name = plan["name"]
            if plan["current"] == profile and plan["state"] == upstream.MIG_STATE_FAILED:
                # mig-manager acts on label changes: the same value again would never be retried
                errors.append("Node %s: mig-manager already reports %s=failed for %s=%s (an earlier attempt); "
                              "setting the same profile again changes nothing, so this run does not wait for it. "
                              "%s Fix the cause, then restart the mig-manager pod on the node (it applies the "
                              "label when it starts) or set another profile first"
                              % (name, upstream.LABEL_MIG_CONFIG_STATE, upstream.LABEL_MIG_CONFIG, profile,
                                 self.cluster_says(cluster, name)))
            elif (not plan["done"] and plan["gpu_pods"] and not self.params.get("drain")
                  and self.params.get("reconfigure", True)):
                errors.append("Node %s runs GPU pods: %s. mig-manager cannot reconfigure GPUs in use (the state "
                              "would stay pending). Stop them, or set drain=true to cordon the node and evict them "
                              "(PodDisruptionBudgets are respected)" % (name, describe_pods(plan["gpu_pods"])))
            plans.append(plan)
        if errors:
            raise MigConfigError(" | ".join(errors))
        return cluster, plans

    # ------------------------------------------------------------------- run
    def run(self):
        profile = self.params["profile"]
        names = self.params["nodes"]
        if len(set(names)) != len(names):
            raise MigConfigError("nodes lists a node twice: %s" % ", ".join(names))
        cluster, plans = self.validate(names, profile)
        results = []
        for plan in plans:
            result = {"node": plan["name"], "profile": profile, "previous": plan["current"],
                      "previous_state": plan["state"], "strategy": cluster["strategy"],
                      "config_source": plan["config"].source, "expected": plan["expected"],
                      "changed": not plan["done"], "evicted": [], "cordoned": False}
            results.append(result)
            if not plan["done"] and not self.params.get("reconfigure", True):
                result.update(changed=False, pending=True)     # sorted out, not touched
                continue
            if self.check_mode:
                result["would_evict"] = [_pod_ref(p) for p in plan["gpu_pods"]] if not plan["done"] else []
                result["offer"] = mig.node_offer(plan["node"])
                continue
            try:
                if plan["done"]:
                    # from the node validation read (moments ago); a watch from its version if it differs
                    node = self.verify(plan, cluster, self.deadline(self.params["verify_timeout"]), node=plan["node"])
                else:
                    node = self.apply(plan, cluster, profile, result)
            except MigConfigError as exc:
                exc.details.setdefault("nodes", results)
                exc.details.setdefault("changed", any(r.get("relabelled") or r["evicted"] for r in results))
                raise
            except ApiError as exc:
                raise self.interrupted(exc, plan, profile, results)
            result["offer"] = mig.node_offer(node)
            result["state"] = _labels(node).get(upstream.LABEL_MIG_CONFIG_STATE)
        return cluster, results

    def interrupted(self, exc, plan, profile, results):
        """An API failure mid-run: what was already changed, and what a re-run will do."""
        done = ["%s=%s on node %s (was %r)" % (upstream.LABEL_MIG_CONFIG, profile, r["node"], r["previous"])
                for r in results if r.get("relabelled")]
        done += ["node %s cordoned" % r["node"] for r in results if r.get("cordoned")]
        done += ["evicted %s" % ", ".join(r["evicted"]) for r in results if r["evicted"]]
        changed = bool(done)
        if changed:
            what = ("Changed before the failure: %s. A re-run validates again, leaves nodes that already offer "
                    "%s as they are and waits for node %s to finish (mig-manager keeps working on the label)."
                    % ("; ".join(done), profile, plan["name"]))
        else:
            what = "Nothing was changed on node %s; a re-run starts it again." % plan["name"]
        return MigConfigError("Node %s: %s. %s" % (plan["name"], exc, what), changed=changed, nodes=results,
                              api_error=exc.to_dict())

    def deadline(self, seconds):
        return self.clock() + seconds

    def apply(self, plan, cluster, profile, result):
        name = plan["name"]
        cordoned = False
        if plan["gpu_pods"]:
            cordoned = self.drain(plan, result)
        self.log("set %s=%s on %s" % (upstream.LABEL_MIG_CONFIG, profile, name))
        patched = self.api.patch_node(name, {"metadata": {"labels": {upstream.LABEL_MIG_CONFIG: profile}}})
        result["relabelled"] = True
        if plan["state"] == upstream.MIG_STATE_SUCCESS and not mig.offer_differences(plan["expected"], plan["node"]):
            # same layout under another name: mig-manager only re-asserts `success`,
            # which may not even produce a watch event
            node = patched
        else:
            node = self.wait_state(plan, cluster, profile, patched, cordoned)
        node = self.verify(plan, cluster, self.deadline(self.params["verify_timeout"]), node)
        if cordoned:
            node = self.api.patch_node(name, {"spec": {"unschedulable": None}})
            result["cordoned"] = False
        return node

    # ------------------------------------------------------------------ drain
    def drain(self, plan, result):
        """Cordon and evict the GPU pods. Returns True when we cordoned (we uncordon later)."""
        name = plan["name"]
        cordoned = not (plan["node"].get("spec") or {}).get("unschedulable")
        if cordoned:
            self.api.patch_node(name, {"spec": {"unschedulable": True}})
            result["cordoned"] = True
        deadline = self.deadline(self.params["eviction_timeout"])
        remaining = list(plan["gpu_pods"])
        while remaining:
            blocked = []
            for pod in remaining:
                try:
                    self.api.evict(pod["metadata"]["namespace"], pod["metadata"]["name"])
                    result["evicted"].append(_pod_ref(pod))
                except ApiError as exc:
                    status = api_status(exc)
                    if status == 404:
                        continue
                    if status != 429:
                        self.undo_cordon(name, cordoned, result)
                        raise MigConfigError("Evicting %s from %s failed: %s" % (_pod_ref(pod), name, exc))
                    blocked.append((pod, exc))
            if not blocked:
                break
            if self.clock() >= deadline:
                self.undo_cordon(name, cordoned, result)
                raise MigConfigError(
                    "Node %s: eviction refused for %s within %ds: %s. A PodDisruptionBudget protects them; "
                    "nothing was relabelled and the node was uncordoned"
                    % (name, ", ".join(_pod_ref(item[0]) for item in blocked), self.params["eviction_timeout"],
                       getattr(blocked[0][1], "message", None) or blocked[0][1]))
            self.sleep(min(5, max(0.2, deadline - self.clock())))  # like kubectl drain: retry 429
            remaining = [item[0] for item in blocked]
        self.wait_pods_gone(name, deadline)
        return cordoned

    def undo_cordon(self, name, cordoned, result):
        if cordoned:
            self.api.patch_node(name, {"spec": {"unschedulable": None}})
            result["cordoned"] = False

    def wait_pods_gone(self, name, deadline):
        """Watch the node's pods until no GPU pod is left (evicted pods terminate gracefully)."""
        while True:
            pods, version = self.api.pods_list_version(name)
            left = {_pod_ref(p) for p in gpu_pods(pods)}
            if not left:
                return
            if self.clock() >= deadline:
                raise MigConfigError("Node %s: evicted GPU pods still running after %ds: %s. Nothing was "
                                     "relabelled; the node stays cordoned (kubectl uncordon %s)"
                                     % (name, self.params["eviction_timeout"], ", ".join(sorted(left)), name))
            for kind, pod in self.api.watch_pods_on_node(name, version, deadline - self.clock()):
                ref = _pod_ref(pod)
                if kind == "DELETED" or not gpu_pods([pod]):
                    left.discard(ref)
                if not left:
                    return

    # ------------------------------------------------------------------ wait
    def wait_state(self, plan, cluster, profile, patched, cordoned):
        """Watch the node from the patch's resourceVersion until mig-manager reports.

        A state already on the node when we set the label belongs to the previous
        profile: it counts only after a transition we saw ourselves."""
        name = plan["name"]
        timeout = self.params["timeout"]
        deadline = self.deadline(timeout)
        baseline = _labels(patched).get(upstream.LABEL_MIG_CONFIG_STATE)
        version = patched["metadata"].get("resourceVersion")
        node, seen = patched, []
        while self.clock() < deadline:
            for kind, obj in self.api.watch_node(name, version, deadline - self.clock()):
                if kind not in ("ADDED", "MODIFIED"):
                    continue
                node = obj
                version = obj["metadata"].get("resourceVersion", version)
                done = self._judge(node, profile, baseline, seen, plan["expected"])
                if done:
                    return self._finish(done, plan, cluster, node, cordoned)
        return self._timeout(plan, cluster, node, profile, seen, cordoned)

    @staticmethod
    def _judge(node, profile, baseline, seen, expected):
        labels = _labels(node)
        state = labels.get(upstream.LABEL_MIG_CONFIG_STATE)
        if labels.get(upstream.LABEL_MIG_CONFIG) != profile:
            return "relabelled"
        if not seen or seen[-1] != state:
            seen.append(state)
        moved = any(s != baseline for s in seen)
        if state in (upstream.MIG_STATE_SUCCESS, upstream.MIG_STATE_FAILED) and moved:
            return state
        # no visible transition but the node already offers the new layout
        if state == upstream.MIG_STATE_SUCCESS and not mig.offer_differences(expected, node):
            return state
        return None

    def _finish(self, outcome, plan, cluster, node, cordoned):
        name = plan["name"]
        if outcome == upstream.MIG_STATE_SUCCESS:
            return node
        if outcome == "relabelled":
            raise MigConfigError("Node %s: %s was changed to %r by someone else while waiting"
                                 % (name, upstream.LABEL_MIG_CONFIG, _labels(node).get(upstream.LABEL_MIG_CONFIG)))
        raise MigConfigError(
            "Node %s: mig-manager reports %s=failed for %s. %s%s %s"
            % (name, upstream.LABEL_MIG_CONFIG_STATE, _labels(node).get(upstream.LABEL_MIG_CONFIG),
               self.cluster_says(cluster, name),
               " The node stays cordoned (kubectl uncordon %s once fixed)." % name if cordoned else "",
               FAILED_NEXT_STEP % {"node": name, "app": MIG_MANAGER_APP, "ns": cluster["namespace"]}),
            events=self.events(name), mig_manager_log=self.mig_manager_log(cluster, name),
            mig_state=upstream.MIG_STATE_FAILED)

    def _timeout(self, plan, cluster, node, profile, seen, cordoned):
        name = plan["name"]
        state = _labels(node).get(upstream.LABEL_MIG_CONFIG_STATE)
        pods = running(self.api.pods_on_node(name))
        gpu = gpu_pods(pods)
        if upstream.MIG_STATE_PENDING in seen or state == upstream.MIG_STATE_PENDING:
            cause = ("Known cause: %s. GPU pods still on the node: %s. Other pods on the node: %s. "
                     "Stop the GPU clients (the GPU pods above, or processes outside Kubernetes) or re-run with "
                     "drain=true; %s=%s stays set, so mig-manager resumes once the GPUs are free."
                     % (PENDING_CAUSE, describe_pods(gpu) or "none",
                        describe_pods([p for p in pods if p not in gpu]) or "none",
                        upstream.LABEL_MIG_CONFIG, profile))
        else:
            cause = ("mig-manager never reported a new state (states seen: %s): is the nvidia-mig-manager pod "
                     "running on %s? %s" % (", ".join(map(str, seen)) or "none", name, self.cluster_says(cluster, name)))
        raise MigConfigError(
            "Node %s: timed out after %ds waiting for %s=success (now %r). %s%s"
            % (name, self.params["timeout"], upstream.LABEL_MIG_CONFIG_STATE, state, cause,
               " The node stays cordoned." if cordoned else ""),
            pods_on_node=[_pod_ref(p) for p in pods], gpu_pods=[_pod_ref(p) for p in gpu])

    # ------------------------------------------------------------- diagnostics
    def events(self, name):
        events = sorted(self.api.node_events(name),
                        key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        return ["%s %s: %s" % (e.get("type"), e.get("reason"), e.get("message")) for e in events[-10:]]

    def mig_manager_pod(self, cluster, name):
        for pod in running(self.api.pods_on_node(name)):
            meta = pod["metadata"]
            if meta.get("namespace") == cluster["namespace"] and (
                    (meta.get("labels") or {}).get(upstream.LABEL_APP) == MIG_MANAGER_APP or meta["name"].startswith(MIG_MANAGER_APP)):
                return pod
        return None

    def mig_manager_log(self, cluster, name):
        pod = self.mig_manager_pod(cluster, name)
        if pod is None:
            return None
        containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        container = upstream.MIG_MANAGER_CONTAINER if upstream.MIG_MANAGER_CONTAINER in containers \
            else (containers[0] if containers else None)
        return self.api.pod_log(pod["metadata"]["namespace"], pod["metadata"]["name"], container)

    def cluster_says(self, cluster, name):
        parts = []
        events = self.events(name)
        if events:
            parts.append("Events about node %s: %s." % (name, " / ".join(events[-5:])))
        pod = self.mig_manager_pod(cluster, name)
        if pod is None:
            parts.append("No %s pod runs on %s in namespace %s." % (MIG_MANAGER_APP, name, cluster["namespace"]))
        else:
            log = (self.mig_manager_log(cluster, name) or "").strip().splitlines()
            parts.append("mig-manager pod %s log (last lines): %s" % (_pod_ref(pod), " / ".join(log[-8:]) or "empty"))
        return " ".join(parts)

    # ------------------------------------------------------------------ verify
    def verify(self, plan, cluster, deadline, node=None):
        """After success the device plugin re-registers: allocatable follows shortly.
        Watch until the node offers what the strategy and profile promise."""
        name = plan["name"]
        node = node or self.api.node(name)
        diffs = mig.offer_differences(plan["expected"], node)
        version = node["metadata"].get("resourceVersion")
        while diffs and self.clock() < deadline:
            for kind, obj in self.api.watch_node(name, version, deadline - self.clock()):
                node = obj
                version = obj["metadata"].get("resourceVersion", version)
                diffs = mig.offer_differences(plan["expected"], node)
                if not diffs:
                    break
        if diffs:
            raise MigConfigError("Node %s reports %s=success but does not offer what strategy %s and profile %s "
                                 "promise: %s" % (name, upstream.LABEL_MIG_CONFIG_STATE, cluster["strategy"],
                                                  _labels(node).get(upstream.LABEL_MIG_CONFIG), "; ".join(diffs)),
                                 offer=mig.node_offer(node), expected=plan["expected"])
        return node


def diff_of(results):
    """before/after of the labels the module changes, per node."""
    before, after = {}, {}
    for r in results:
        before[r["node"]] = {upstream.LABEL_MIG_CONFIG: r["previous"], upstream.LABEL_MIG_CONFIG_STATE: r["previous_state"]}
        after[r["node"]] = {upstream.LABEL_MIG_CONFIG: r["profile"], upstream.LABEL_MIG_CONFIG_STATE:
                            r.get("state") or upstream.MIG_STATE_SUCCESS}
    return {"before": before, "after": after}


def run(module):
    """The body of the mig_config module: a result dict, or MigConfigError/ApiError."""
    for key in ("timeout", "verify_timeout", "eviction_timeout"):
        if module.params[key] < 1:
            raise MigConfigError("%s must be at least 1 second, got %d" % (key, module.params[key]))
    worker = MigConfigurator(K8sMigApi(module.kube), module.params, check_mode=module.check_mode, log=module.debug)
    cluster, results = worker.run()
    kwargs = dict(changed=any(r["changed"] for r in results), nodes=results, strategy=cluster["strategy"])
    if module._diff:
        kwargs["diff"] = diff_of([r for r in results if r["changed"]])
    return kwargs
