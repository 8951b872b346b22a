"""GPU Operator twin: operands, node labels, ClusterPolicy status (fake and real store)."""
import os

import pytest

from simcluster.twins.testkit import TwinCluster, status_word

pytestmark = [pytest.mark.needs_shared]

NFD_WORKER_DS = "gpu-operator-node-feature-discovery-worker"  # the chart's NFD subchart
OPERANDS = ["gpu-feature-discovery", "nvidia-container-toolkit-daemonset", "nvidia-dcgm-exporter",
            "nvidia-device-plugin-daemonset", "nvidia-device-plugin-mps-control-daemon", "nvidia-driver-daemonset",
            "nvidia-mig-manager", "nvidia-operator-validator"]


@pytest.fixture(params=["real"])
def store(request):
    """The real store (with admission); the fake store runs the first test too."""
    return request.param


def operand_daemonsets(c):
    return [d for d in c.store.list("daemonsets.apps", "gpu-operator") if d["metadata"]["name"] != NFD_WORKER_DS]


def _ready(c, reason="Reconciled", timeout=10):
    c.wait(lambda: c.policy_state() == "ready" and c.ready_reason() == reason, timeout=timeout,
           what="ClusterPolicy ready/%s" % reason)


@pytest.mark.parametrize("store", ["fake", "real"])
def test_operand_daemonsets_then_ready_reconciled(store):
    with TwinCluster("default.yaml", store=store) as c:
        c.install_operator()
        c.wait(lambda: c.policy_state() == "notReady", what="notReady while operands start")
        err = c.condition("Error")
        assert err["status"] == "True" and err["reason"] == "OperandNotReady"
        assert err["message"].startswith("ClusterPolicy is not ready; states not ready: [state-")
        ready = c.condition("Ready")
        assert ready["status"] == "False" and ready["reason"] == "Error"
        _ready(c)
        assert c.condition("Error")["status"] == "False"
        assert c.policy()["status"]["namespace"] == "gpu-operator"
        names = sorted(d["metadata"]["name"] for d in c.store.list("daemonsets.apps", "gpu-operator")
                       if d["metadata"]["name"] != NFD_WORKER_DS)
        assert names == OPERANDS
        dp = c.store.get("daemonsets.apps", "gpu-operator", "nvidia-device-plugin-daemonset")
        tmpl = dp["spec"]["template"]["spec"]
        assert tmpl["nodeSelector"] == {"nvidia.com/gpu.deploy.device-plugin": "true"}
        assert tmpl["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
        val = c.store.get("daemonsets.apps", "gpu-operator", "nvidia-operator-validator")
        assert val["spec"]["template"]["spec"]["initContainers"][0]["image"] == \
            "nvcr.io/nvidia/gpu-operator:v26.7.0"
        assert c.allocatable("gpu-h100-1") == "8" and c.allocatable("gpu-l40s-1") == "4"
        assert c.allocatable("cpu-1") is None


def test_host_driver_node_is_labelled_pre_installed_and_has_no_driver_pod(store):
    with TwinCluster("default.yaml", store=store) as c:
        c.install_operator(driver={"enabled": True})
        _ready(c)
        assert c.labels("gpu-h100-1")["nvidia.com/gpu.deploy.driver"] == "pre-installed"
        assert c.labels("gpu-l40s-1")["nvidia.com/gpu.deploy.driver"] == "true"
        assert c.operand_pods("nvidia-driver-daemonset", "gpu-h100-1") == []
        assert len(c.operand_pods("nvidia-driver-daemonset", "gpu-l40s-1")) == 1


def test_gpu_node_labels_follow_the_real_example(store):
    from simcluster.twins.nodes import example_labels
    real = example_labels()
    with TwinCluster("default.yaml", store=store) as c:
        c.install_operator()
        _ready(c)
        labels = c.labels("gpu-h100-1")
        skip = {"kubernetes.io/hostname", "nvidia.com/gpu.deploy.nvsm", "nvidia.com/gpu.deploy.driver",
                "nvidia.com/gpu-driver-upgrade-state", "node-role.kubernetes.io/control-plane",
                "node-role.kubernetes.io/worker", "node.kubernetes.io/exclude-from-external-load-balancers"}
        missing = sorted(k for k in real if k not in labels and k not in skip)
        assert missing == []
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert labels["nvidia.com/gpu.count"] == "8"
        assert labels["nvidia.com/cuda.driver-version.full"] == "550.54.15"
        assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
        l40s = c.labels("gpu-l40s-1")
        assert l40s["nvidia.com/gpu.family"] == "ada-lovelace" and l40s["nvidia.com/mig.capable"] == "false"
        assert "nvidia.com/gpu.deploy.mig-manager" not in l40s
        cpu = c.labels("cpu-1")
        assert "feature.node.kubernetes.io/pci-10de.present" not in cpu
        assert not any(k.startswith("nvidia.com/") for k in cpu)


def test_all_host_drivers_without_driver_and_toolkit_operands(store):
    with TwinCluster("all-host-drivers.yaml", store=store) as c:
        c.install_operator(driver={"enabled": False}, toolkit={"enabled": False})
        _ready(c)
        names = {d["metadata"]["name"] for d in c.store.list("daemonsets.apps", "gpu-operator")}
        assert "nvidia-driver-daemonset" not in names
        assert "nvidia-container-toolkit-daemonset" not in names
        assert c.allocatable("dgx-1") == "8"


def test_no_host_driver_and_driver_disabled_never_gets_ready(store):
    with TwinCluster("no-host-drivers.yaml", store=store) as c:
        c.install_operator(driver={"enabled": False})
        c.wait(lambda: [p for p in c.operand_pods("nvidia-operator-validator")
                        if status_word(p) == "Init:0/4"] and c.policy_state() == "notReady")
        c.settle()
        assert c.policy_state() == "notReady"
        assert "state-operator-validation" in c.condition("Error")["message"]
        assert all(status_word(p) == "Init:0/4" for p in c.operand_pods("nvidia-operator-validator"))
        st = c.store.get("daemonsets.apps", "gpu-operator", "nvidia-operator-validator")["status"]
        assert st["numberUnavailable"] == 2
        assert c.allocatable("gpu-a100-1") is None


def test_injected_validator_crashloop_keeps_it_not_ready(store):
    with TwinCluster("crashloop.yaml", store=store) as c:
        c.install_operator(driver={"enabled": False}, toolkit={"enabled": False})
        c.wait(lambda: [p for p in c.operand_pods("nvidia-operator-validator")
                        if status_word(p) == "Init:CrashLoopBackOff"], what="Init:CrashLoopBackOff")
        c.settle()
        assert c.policy_state() == "notReady"
        assert "state-operator-validation" in c.condition("Error")["message"]
        p = c.operand_pods("nvidia-operator-validator")[0]
        assert c.logs("gpu-operator", p["metadata"]["name"], "cuda-validation")


def test_no_gpu_nodes_is_ready_with_reason_nogpunodes(store):
    with TwinCluster("no-gpu.yaml", store=store) as c:
        c.install_operator()
        _ready(c, "NoGPUNodes")
        assert operand_daemonsets(c) == []


def test_missing_nfd_labels_is_ready_with_reason_nfdlabelsmissing(store):
    with TwinCluster("no-nfd.yaml", store=store) as c:
        c.install_operator()
        _ready(c, "NFDLabelsMissing")
        assert c.allocatable("gpu-1") is None


def test_nothing_happens_without_the_operator_deployment(store):
    with TwinCluster("default.yaml", store=store) as c:
        c.namespace("gpu-operator")
        from simcluster.twins.testkit import cluster_policy
        c.store.create("clusterpolicies.nvidia.com", cluster_policy())
        c.settle()
        assert c.policy_state() is None
        assert c.store.list("daemonsets.apps") == []


def test_deploy_false_sticks_and_operands_false_removes_everything(store):
    with TwinCluster("mixed.yaml", store=store) as c:
        c.label("gpu-host-driver", {"nvidia.com/gpu.deploy.driver": "false"})
        c.install_operator()
        _ready(c)
        assert c.labels("gpu-host-driver")["nvidia.com/gpu.deploy.driver"] == "false"
        assert c.operand_pods("nvidia-driver-daemonset", "gpu-host-driver") == []
        c.label("gpu-no-driver", {"nvidia.com/gpu.deploy.operands": "false"})
        c.wait(lambda: not [p for p in c.pods("gpu-operator") if p["spec"].get("nodeName") == "gpu-no-driver"
                            and not p["metadata"]["name"].startswith("gpu-operator-")],
               what="every operand gone from gpu-no-driver")
        labels = c.labels("gpu-no-driver")
        assert all(labels[k] == "false" for k in labels
                   if k.startswith("nvidia.com/gpu.deploy.") and not k.endswith("operands"))


def test_images_come_from_the_policy_spec(store):
    with TwinCluster("default.yaml", store=store) as c:
        c.install_operator(devicePlugin={"repository": "registry.local:5000/nvidia",
                                         "version": "v0.20.1", "imagePullSecrets": ["mirror"]},
                           validator={"repository": "registry.local:5000/nvidia", "version": "v26.7.0"})
        _ready(c)
        dp = c.store.get("daemonsets.apps", "gpu-operator", "nvidia-device-plugin-daemonset")
        spec = dp["spec"]["template"]["spec"]
        assert spec["containers"][0]["image"] == "registry.local:5000/nvidia/k8s-device-plugin:v0.20.1"
        assert spec["imagePullSecrets"] == [{"name": "mirror"}]
        assert spec["initContainers"][0]["image"] == "registry.local:5000/nvidia/gpu-operator:v26.7.0"


def test_restricted_operator_namespace_leaves_operands_uncreated():
    """PSA refuses the privileged operand pods: FailedCreate events and notReady."""
    # NFD preinstalled: the chart's own NFD worker (hostPath volumes) is refused by baseline too
    with TwinCluster("default.yaml", store="real", nfd="preinstalled") as c:
        c.install_operator(psa="baseline")
        c.wait(lambda: c.events("FailedCreate", "nvidia-device-plugin-daemonset"))
        c.settle()
        assert c.policy_state() == "notReady"
        assert c.operand_pods("nvidia-device-plugin-daemonset") == []
        st = c.store.get("daemonsets.apps", "gpu-operator", "nvidia-device-plugin-daemonset")["status"]
        assert st["desiredNumberScheduled"] == 2 and st["numberUnavailable"] == 2


def test_psa_enabled_labels_the_operator_namespace():
    """psa.enabled: the operator pod labels its namespace privileged, then operands start."""
    with TwinCluster("default.yaml", store="real") as c:
        c.namespace("gpu-operator", {"pod-security.kubernetes.io/enforce": "baseline"})
        c.ns = "gpu-operator"
        from simcluster.twins.testkit import chart_workloads, cluster_policy
        for obj in chart_workloads("gpu-operator"):
            c.store.create("deployments.apps" if obj["kind"] == "Deployment" else "daemonsets.apps", obj)
        c.store.create("clusterpolicies.nvidia.com", cluster_policy(psa={"enabled": True}))
        _ready(c)
        labels = c.store.get("namespaces", None, "gpu-operator")["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "privileged"


def test_deleting_the_policy_removes_the_operands(store):
    with TwinCluster("default.yaml", store=store) as c:
        c.install_operator()
        _ready(c)
        c.store.delete("clusterpolicies.nvidia.com", None, "cluster-policy")
        c.wait(lambda: not operand_daemonsets(c)
               and not [p for p in c.pods("gpu-operator") if not p["metadata"]["name"].startswith("gpu-operator-")])


def test_operator_converges_when_the_api_defaults_its_daemonsets():
    """The API server defaults pod templates; the operator must not fight it (endless updates)."""
    def admit(op, resource, obj, old):
        if resource == "daemonsets.apps":
            obj["spec"].setdefault("revisionHistoryLimit", 10)
            for ctr in obj["spec"]["template"]["spec"]["containers"]:
                ctr.setdefault("imagePullPolicy", "IfNotPresent")
                ctr.setdefault("terminationMessagePath", "/dev/termination-log")
    with TwinCluster("default.yaml", store="fake", admit=admit) as c:
        c.install_operator()
        _ready(c)
        c.settle()
        updates = []
        real_update = c.store.update

        def counting_update(resource, obj, **kw):
            if resource == "daemonsets.apps":
                updates.append(obj["metadata"]["name"])
            return real_update(resource, obj, **kw)
        c.store.update = counting_update
        c.patch_policy({"dcgmExporter": {"version": "4.6.0-4.8.3-distroless"}})   # same as default
        c.label("cpu-1", {"touch": "1"})                                          # another pass
        c.settle()
        assert updates == []
        c.patch_policy({"dcgmExporter": {"version": "4.6.1"}})
        c.wait(lambda: updates == ["nvidia-dcgm-exporter"])


# --- what the twins key on: the running operator process, NFD's worker pods, the hook's image ------

def test_operator_reconciles_whatever_its_deployment_is_labelled():
    """The real chart's Deployment has no `app` label; labels are irrelevant, the pod runs."""
    with TwinCluster("default.yaml", store="real") as c:
        c.install_operator()
        dep = c.store.get("deployments.apps", "gpu-operator", "gpu-operator")
        assert "app" not in dep["metadata"]["labels"]        # as helm template renders it
        _ready(c)
        c.store.delete("clusterpolicies.nvidia.com", None, "cluster-policy")
        c.wait(lambda: not operand_daemonsets(c))
        # relabel everything: still the operator as long as its pod runs the operator binary
        c.store.delete("deployments.apps", "gpu-operator", "gpu-operator")
        dep["metadata"] = {"name": "renamed", "namespace": "gpu-operator", "labels": {"team": "x"}}
        dep["spec"]["selector"] = {"matchLabels": {"team": "x"}}
        dep["spec"]["template"]["metadata"]["labels"] = {"team": "x"}
        c.store.create("deployments.apps", dep)
        from simcluster.twins.testkit import cluster_policy
        c.store.create("clusterpolicies.nvidia.com", cluster_policy())
        _ready(c)


def test_an_operator_pod_that_cannot_pull_reconciles_nothing():
    with TwinCluster("default.yaml", store="real", registries=["mirror.example:5000"]) as c:
        c.install_operator()
        c.wait(lambda: [p for p in c.pods("gpu-operator", "gpu-operator-")
                        if status_word(p) in ("ErrImagePull", "ImagePullBackOff")])
        c.settle()
        assert c.policy_state() is None and operand_daemonsets(c) == []


def test_nfd_labels_only_where_the_nfd_worker_runs():
    """An untolerated taint keeps the NFD worker off a GPU node: no NFD labels, no operands."""
    with TwinCluster("default.yaml", store="real") as c:
        c.store.merge_patch("nodes", None, "gpu-l40s-1", {"spec": {"taints": [
            {"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}]}})
        c.install_operator()
        _ready(c)
        assert c.labels("gpu-h100-1")["feature.node.kubernetes.io/pci-10de.present"] == "true"
        assert not any(k.startswith("feature.node.kubernetes.io/") for k in c.labels("gpu-l40s-1"))
        assert "nvidia.com/gpu.present" not in c.labels("gpu-l40s-1")
        assert [p["spec"]["nodeName"] for p in c.pods("gpu-operator", NFD_WORKER_DS)
                if p["spec"].get("nodeName") == "gpu-l40s-1"] == []


def test_nfd_prune_job_removes_the_labels():
    with TwinCluster("default.yaml", store="real") as c:
        c.install_operator()
        _ready(c)
        job_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "prune", "namespace": "gpu-operator"},
                   "spec": {"restartPolicy": "Never", "nodeName": "cpu-1", "containers": [
                       {"name": "nfd-master", "image": "registry.k8s.io/nfd/node-feature-discovery:v0.19.0",
                        "command": ["nfd-master"], "args": ["-prune"]}]}}
        c.store.delete("daemonsets.apps", "gpu-operator", NFD_WORKER_DS)
        c.store.create("pods", job_pod)
        c.wait(lambda: not any(k.startswith("feature.node.kubernetes.io/") for k in c.labels("gpu-h100-1")))


def _hook_pod(name, image, files):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "gpu-operator"},
            "spec": {"restartPolicy": "OnFailure", "nodeName": "cpu-1", "containers": [
                {"name": "upgrade-crd", "image": image, "command": ["/usr/bin/manage-crds"],
                 "args": ["apply"] + ["--filepath=/opt/gpu-operator/%s" % f for f in files]}]}}


def test_the_crd_upgrade_hook_applies_the_crds_its_image_carries():
    """upgrade_crd.yaml: the operator image of the NEW release applies its own CRDs."""
    with TwinCluster("default.yaml", store="real") as c:
        crds = "customresourcedefinitions.apiextensions.k8s.io"
        assert c.store.get(crds, None, "gpuclusters.nvidia.com") is None
        c.namespace("gpu-operator")
        c.store.create("pods", _hook_pod("hook", "mirror.example:5000/nvidia/gpu-operator:v26.7.0", [
            "nvidia.com_clusterpolicies.yaml", "nvidia.com_gpuclusters.yaml", "nfd-api-crds.yaml"]))
        c.wait(lambda: (c.pod("gpu-operator", "hook").get("status") or {}).get("phase") == "Succeeded")
        assert c.store.get(crds, None, "gpuclusters.nvidia.com") is not None
        assert c.store.get(crds, None, "nodefeaturerules.nfd.k8s-sigs.io") is not None
        cp = c.store.get(crds, None, "clusterpolicies.nvidia.com")
        sm = (cp["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
              ["dcgmExporter"]["properties"]["serviceMonitor"]["properties"])
        assert "scrapeTimeout" in sm
        assert "Applied CRD gpuclusters.nvidia.com" in c.logs("gpu-operator", "hook", "upgrade-crd")
        # the hook does not carry the DRA CRDs of crds/ (upstream difference, see docs)
        assert c.store.get(crds, None, "computedomains.resource.nvidia.com") is None


def test_the_crd_upgrade_hook_of_an_unknown_release_fails():
    with TwinCluster("default.yaml", store="real") as c:
        c.namespace("gpu-operator")
        c.store.create("pods", _hook_pod("hook", "nvcr.io/nvidia/gpu-operator:v99.0.0",
                                         ["nvidia.com_clusterpolicies.yaml"]))
        c.wait(lambda: "open /opt/gpu-operator/nvidia.com_clusterpolicies.yaml: no such file"
               in (c.logs("gpu-operator", "hook", "upgrade-crd") or ""))
        assert (c.pod("gpu-operator", "hook")["status"]["containerStatuses"][0]["state"]
                .get("terminated", {}).get("exitCode", 1)) != 0


def test_validator_image_falls_back_to_the_operator_pods_env():
    """gpuv1.ImagePath: no repository/image/version in the policy -> VALIDATOR_IMAGE of the pod."""
    with TwinCluster("default.yaml", store="real") as c:
        c.install_operator(validator={})

        def mirror_validator(dep):
            for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]:
                if e["name"] == "VALIDATOR_IMAGE":
                    e["value"] = "mirror.example:5000/nvidia/gpu-operator:v26.7.0"
        # the deployment twin writes the Deployment's status meanwhile
        c.edit("deployments.apps", "gpu-operator", "gpu-operator", mirror_validator)
        c.wait(lambda: (c.store.get("daemonsets.apps", "gpu-operator", "nvidia-operator-validator") or {})
               .get("spec", {}).get("template", {}).get("spec", {}).get("containers", [{}])[0].get("image")
               == "mirror.example:5000/nvidia/gpu-operator:v26.7.0")


def test_edit_reads_again_when_the_object_changed_between_its_read_and_its_write():
    """TwinCluster.edit: a write from an older resourceVersion is refused (409), as by the API
    server; edit reads the object again and applies its change to what another writer left."""
    with TwinCluster("default.yaml", store="real") as c:
        c.namespace("team", {"a": "1"})
        calls = []

        def change(ns):
            calls.append(ns["metadata"]["resourceVersion"])
            if len(calls) == 1:     # another writer, between this read and its write
                c.store.merge_patch("namespaces", None, "team", {"metadata": {"labels": {"b": "2"}}})
            ns["metadata"]["labels"]["c"] = "3"
        out = c.edit("namespaces", None, "team", change)
        assert len(calls) == 2 and calls[0] != calls[1]
        assert {k: v for k, v in out["metadata"]["labels"].items() if k in "abc"} == {"a": "1", "b": "2", "c": "3"}


def test_operand_names_the_role_reads_are_the_operators():
    """The operand DaemonSets are not in the chart: the operator renders them from its assets
    (NVIDIA/gpu-operator assets/state-device-plugin/0500_daemonset.yaml: name and label
    app=nvidia-device-plugin-daemonset, container nvidia-device-plugin). The role and the twin agree."""
    import yaml
    from simcluster.twins.gpu_operator import BY_DS
    from simcluster.twins.testkit import REPO
    with open(os.path.join(REPO, "roles", "gpu_operator", "vars", "main.yml")) as fh:
        role_vars = yaml.safe_load(fh)
    ds = role_vars["gpu_operator_device_plugin_daemonset"]
    assert ds == "nvidia-device-plugin-daemonset" and BY_DS[ds]["containers"] == ["nvidia-device-plugin"]
    with TwinCluster("default.yaml", store="real") as c:
        c.install_operator()
        _ready(c)
        obj = c.store.get("daemonsets.apps", "gpu-operator", ds)
        assert obj["spec"]["selector"]["matchLabels"] == {"app": ds}
        assert obj["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.deploy.device-plugin": "true"}
