"""What a container sees of the node's GPUs (simcluster/twins/nvidia_runtime.py): with the NVIDIA
container toolkit's defaults NVIDIA_VISIBLE_DEVICES=all without a request gets every GPU; with the
platform's settings (toolkit env in the ClusterPolicy, or the host's config.toml) none."""
import pytest

from kit.dcgm import running, samples
from simcluster.twins import nvidia_runtime as nr
from simcluster.twins.testkit import TwinCluster, pod

from simcluster import dcgm

CUDA_IMAGE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
NODE = {"name": "gpu-1", "gpus": {"count": 4}, "host_toolkit": False, "default_runtime": "runc"}
HOST = dict(NODE, host_toolkit=True, default_runtime="nvidia")
BY_REQUEST = [{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
              {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}]


def policy(cdi=True, toolkit_env=None, plugin_env=None):
    spec = {"cdi": {"enabled": cdi}, "toolkit": {"enabled": True, "env": toolkit_env or []},
            "devicePlugin": {"env": plugin_env or []}}
    return {"metadata": {"name": "cluster-policy"}, "spec": spec}


def stealer(klass="nvidia", env="all", gpus=None, privileged=False):
    c = {"name": "main", "image": CUDA_IMAGE, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": env}]}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if privileged:
        c["securityContext"] = {"privileged": True}
    spec = {"containers": [c]}
    if klass:
        spec["runtimeClassName"] = klass
    return {"metadata": {"name": "p"}, "spec": spec}, c


@pytest.mark.parametrize("facts,pol,klass,seen", [
    (NODE, policy(), "nvidia", 4),                  # CDI (chart default): the nvidia RuntimeClass honours it
    (NODE, policy(), None, 0),                      # CDI: runc, no hook reads the variable
    (NODE, policy(cdi=False), None, 4),             # no CDI: nvidia is the default runtime
    (HOST, None, None, 4),                          # host toolkit, default config.toml
    (NODE, policy(toolkit_env=BY_REQUEST), "nvidia", 0),
    (NODE, policy(cdi=False, toolkit_env=BY_REQUEST,
                  plugin_env=[{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]), None, 0),
    (dict(HOST, host_toolkit_config={nr.ACCEPT_ENVVAR: False, nr.ACCEPT_MOUNTS: True}), None, None, 0),
])
def test_the_variable_without_a_request(facts, pol, klass, seen):
    p, c = stealer(klass)
    assert nr.visible(facts, pol, p, c)[0] == seen


def test_requests_still_work_with_the_platform_settings_and_privileged_pods_keep_the_variable():
    no_cdi = policy(cdi=False, toolkit_env=BY_REQUEST,
                    plugin_env=[{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}])
    p, c = stealer(None, env="", gpus=1)
    c["env"] = []
    assert nr.visible(NODE, no_cdi, p, c, nr.cuda_image_env(CUDA_IMAGE))[0] == 1
    assert nr.visible(NODE, policy(toolkit_env=BY_REQUEST), p, c)[0] == 1
    # the toolkit ignores the variable but the plugin still passes it: no GPU for requests either
    wrong = policy(cdi=False, toolkit_env=BY_REQUEST)
    assert nr.visible(NODE, wrong, p, c)[0] == 0
    p, c = stealer("nvidia", privileged=True)
    assert nr.visible(NODE, policy(toolkit_env=BY_REQUEST), p, c)[0] == 4
    # with the defaults, a pod asking for one GPU and setting the variable sees all four
    p, c = stealer(None, gpus=1)
    assert nr.visible(HOST, None, p, c)[0] == 4


@pytest.mark.parametrize("toolkit_env,log", [(None, "Test PASSED"), (BY_REQUEST, "no CUDA-capable device")])
def test_cuda_sample_with_the_variable_and_no_request(toolkit_env, log):
    with TwinCluster("default.yaml") as c:
        c.install_operator(**({"toolkit": {"enabled": True, "env": toolkit_env}} if toolkit_env else {}))
        c.wait(lambda: c.allocatable("gpu-l40s-1") == "4")
        body = pod("steal", image=CUDA_IMAGE, restartPolicy="Never", runtimeClassName="nvidia",
                   nodeSelector={"kubernetes.io/hostname": "gpu-l40s-1"})
        body["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        c.store.create("pods", body)
        c.wait(lambda: (c.pod("default", "steal").get("status") or {}).get("phase") in ("Succeeded", "Failed"))
        assert log in c.logs("default", "steal", "main")


class _Store:
    def __init__(self, pods, pol):
        self.objs = {"pods": pods, "clusterpolicies.nvidia.com": [pol]}

    def list(self, resource, namespace):
        return list(self.objs.get(resource, []))

    def get(self, resource, namespace, name):
        return None


@pytest.mark.parametrize("toolkit_env,busy", [(None, 4), (BY_REQUEST, 0)])
def test_dcgm_shows_the_gpus_busy_without_a_pod(toolkit_env, busy):
    steal = running("steal", "team-a", "gpu-1", image=CUDA_IMAGE)
    steal["spec"]["runtimeClassName"] = "nvidia"
    steal["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    exp_pod = running("nvidia-dcgm-exporter-x", "gpu-operator", "gpu-1", {"app": "nvidia-dcgm-exporter"})
    node = {"name": "gpu-1", "host_driver": "550.54.15",
            "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 4, "memory_mib": 81559, "mig_capable": True}}
    exp = dcgm.Exporter(_Store([exp_pod, steal], policy(toolkit_env=toolkit_env)), {"nodes": [node], "faults": {}})
    util = samples(exp.metrics("gpu-1"), "DCGM_FI_DEV_GPU_UTIL")
    assert len([v for labels, v in util if v > 0 and labels["pod"] == ""]) == busy
    assert all(labels["pod"] == "" for labels, _ in util)  # pod-resources knows no allocation
