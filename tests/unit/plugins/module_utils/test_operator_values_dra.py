"""The DRA allocation mode in the chart values: the GPUCluster stack's switches, the refusals of
device-plugin settings, and what the real chart v26.7.0 renders from them (helm template)."""
import subprocess

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.values import (
    OperatorValuesError,
    operator_values,
)
from kit import charts
from kit.paths import gpu_operator_chart

HOST_DRIVERS = {"driver_enabled": False, "toolkit_enabled": False, "node_labels": {}, "warnings": [], "errors": []}
OPERATOR_DRIVER = dict(HOST_DRIVERS, driver_enabled=True, toolkit_enabled=True)
DRA_API = ["--api-versions", "resource.k8s.io/v1/DeviceClass"]


def test_device_plugin_mode_leaves_the_chart_switches_alone():
    # existing releases keep their values: nothing new is written without dra
    for api in (None, "device-plugin"):
        values = operator_values(HOST_DRIVERS, allocation_api=api)
        assert "clusterPolicy" not in values and "gpuCluster" not in values


def test_dra_switches_the_stack():
    values = operator_values(HOST_DRIVERS, allocation_api="dra")
    assert values["clusterPolicy"] == {"deployCR": False}
    assert values["gpuCluster"] == {"deployCR": True}
    assert values["driver"] == {"enabled": False, "nvidiaDriverCRD": {"enabled": False}}


def test_dra_with_the_operators_driver_enables_the_nvidiadriver_crd():
    values = operator_values(OPERATOR_DRIVER, allocation_api="dra")
    assert values["driver"] == {"enabled": True, "nvidiaDriverCRD": {"enabled": True}}


@pytest.mark.parametrize("kwargs, words", [
    ({"allocation_api": "DRA"}, "gpu_operator_allocation_api must be one of device-plugin, dra"),
    ({"allocation_api": "dra", "mig_strategy": "mixed"}, "MIG strategy is a ClusterPolicy setting"),
    ({"allocation_api": "dra", "device_plugin_config": {"name": "time-slicing-config"}}, "runs no device plugin"),
    ({"allocation_api": "dra", "gpu_access_by_request": True}, "through CDI"),
    ({"allocation_api": "dra", "user_values": {"clusterPolicy": {"deployCR": True}}}, "refuses both CRs"),
    ({"user_values": {"gpuCluster": {"deployCR": True}}}, "set gpu_operator_allocation_api: dra"),
    ({"allocation_api": "dra", "user_values": {"gpuCluster": {"deployCR": "true"}}}, "wants a boolean"),
])
def test_refusals_name_the_fix(kwargs, words):
    with pytest.raises(OperatorValuesError) as err:
        operator_values(HOST_DRIVERS, **kwargs)
    assert words in str(err.value)


def test_dra_refuses_a_disabled_nvidiadriver_crd_with_the_operators_driver():
    with pytest.raises(OperatorValuesError) as err:
        operator_values(OPERATOR_DRIVER, allocation_api="dra",
                        user_values={"driver": {"nvidiaDriverCRD": {"enabled": False}}})
    assert "the NVIDIADriver CRD must be enabled when deploying a GPUCluster CR" in str(err.value)


def test_mig_strategy_none_is_accepted_with_dra():
    assert operator_values(HOST_DRIVERS, allocation_api="dra", mig_strategy="none")["gpuCluster"]["deployCR"]


@pytest.mark.needs_shared
@pytest.mark.parametrize("plan", [HOST_DRIVERS, OPERATOR_DRIVER], ids=["host-drivers", "operator-driver"])
def test_real_chart_renders_the_gpucluster_and_no_clusterpolicy(plan):
    values = operator_values(plan, allocation_api="dra", image_mirror="mirror.example:5000/nvidia",
                             image_pull_secrets=["regcred"])
    docs = charts.render(gpu_operator_chart("v26.7.0"), values, "helm3", args=DRA_API)
    assert not charts.by_kind(docs, upstream.CLUSTER_POLICY_KIND)
    (cluster,) = charts.by_kind(docs, upstream.GPUCLUSTER_KIND)
    assert cluster["apiVersion"] == upstream.GPUCLUSTER_API_VERSION
    assert cluster["metadata"]["name"] == upstream.GPUCLUSTER_NAME
    dra = cluster["spec"][upstream.CHART_DRA_DRIVER_KEY]
    # the DRA driver image comes from the mirror like every other image
    assert dra["repository"] == "mirror.example:5000/nvidia/nvidia"
    assert dra["image"] == upstream.DRA_DRIVER_IMAGE
    assert dra["imagePullSecrets"] == ["regcred"]
    assert bool(charts.by_kind(docs, "NVIDIADriver")) is plan["driver_enabled"]


@pytest.mark.needs_shared
def test_real_chart_refuses_dra_on_a_cluster_without_deviceclasses():
    # why the role checks resource.k8s.io/v1 before Helm runs: the chart fails on such a cluster
    values = operator_values(HOST_DRIVERS, allocation_api="dra")
    with pytest.raises(subprocess.CalledProcessError) as err:
        charts.render(gpu_operator_chart("v26.7.0"), values, "helm3")
    assert "requires a Kubernetes cluster that supports Dynamic Resource Allocation" in err.value.stderr


@pytest.mark.needs_shared
def test_real_chart_refuses_both_crs():
    # the refusal check_allocation_values anticipates, as the chart words it
    values = {"clusterPolicy": {"deployCR": True}, "gpuCluster": {"deployCR": True}}
    with pytest.raises(subprocess.CalledProcessError) as err:
        charts.render(gpu_operator_chart("v26.7.0"), values, "helm3", args=DRA_API)
    assert "cannot both be true" in err.value.stderr


@pytest.mark.needs_shared
def test_image_list_of_the_dra_stack_and_its_mirror():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.chart_images import images, public
    listed = images(charts.render(gpu_operator_chart("v26.7.0"), operator_values(OPERATOR_DRIVER, allocation_api="dra"),
                                  "helm3", args=DRA_API))
    names = dict((i["image"], i["sources"]) for i in listed)
    assert names["nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0"] == ["GPUCluster/gpu-cluster spec.draDriver"]
    assert "NVIDIADriver/default spec.driver (node OS ubuntu22.04)" in names["nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"]
    assert any(i.startswith("nvcr.io/nvidia/k8s/dcgm-exporter:") for i in names)
    mirror = "mirror.example:5000/nvidia"
    mirrored = images(charts.render(gpu_operator_chart("v26.7.0"), operator_values(
        OPERATOR_DRIVER, allocation_api="dra", image_mirror=mirror), "helm3", args=DRA_API))
    assert mirrored and public(mirrored, mirror) == []


@pytest.mark.needs_shared
def test_every_dra_key_exists_in_the_real_values_yaml():
    import yaml
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.values import leaf_items
    from kit.paths import GPU_OPERATOR, need
    with open(need(GPU_OPERATOR + "/values.yaml")) as fh:
        chart = yaml.safe_load(fh)
    for plan in (HOST_DRIVERS, OPERATOR_DRIVER):
        for path, _value in leaf_items(operator_values(plan, allocation_api="dra")):
            node = chart
            for key in path:
                assert isinstance(node, dict) and key in node, ".".join(path)
                node = node[key]
