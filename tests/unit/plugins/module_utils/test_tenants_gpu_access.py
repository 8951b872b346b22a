"""The GPU access policy of a team: rendering, and the rendered policy in the simulator's CEL admission."""
import copy
import itertools

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import gpu_access as tenants_gpu_access
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.apply import comparable, plan_update


VAP = "validatingadmissionpolicies.admissionregistration.k8s.io"
VAPB = "validatingadmissionpolicybindings.admissionregistration.k8s.io"
NAMES = itertools.count()
CUDA = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"


def objects_of(team, **kw):
    return [o for o in tenants.render_team(team, tenants.default_settings(**kw))
            if o["metadata"]["name"].startswith(tenants_gpu_access.POLICY_PREFIX)]


def test_every_team_gets_a_policy_and_binding_unless_the_site_turns_it_off():
    objs = objects_of({"name": "team-a"})
    assert [o["kind"] for o in objs] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert objs[1]["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    assert objs[1]["spec"]["validationActions"] == ["Deny"]
    assert objects_of({"name": "team-a"}, gpu_access_policy=False) == []


def test_a_rerun_against_the_defaulted_live_object_changes_nothing():
    for obj in objects_of({"name": "team-a"}):
        live = copy.deepcopy(obj)
        live["metadata"].update(uid="u", resourceVersion="7")
        match = live["spec"].get("matchConstraints") or live["spec"]["matchResources"]
        match.update(namespaceSelector=match.get("namespaceSelector", {}), objectSelector={})
        assert plan_update(obj, live) == (None, [], False) and comparable(obj) == comparable(live)


@pytest.fixture
def store():
    pytest.importorskip("celpy")
    from kit.fake_store import FakeStore
    s = FakeStore(namespaces=())
    for ns in ("team-a", "other"):
        s.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}}, admit=False)
    for obj in objects_of({"name": "team-a"}):
        s.create(VAP if obj["kind"] == "ValidatingAdmissionPolicy" else VAPB, obj)
    return s


def container(name="main", env=None, limits=None, mounts=None):
    c = {"name": name, "image": CUDA}
    if env:
        c["env"] = [dict(e) for e in env]
    if limits:
        c["resources"] = {"limits": dict(limits)}
    if mounts:
        c["volumeMounts"] = [{"name": m, "mountPath": "/dev/x"} for m in mounts]
    return c


def pod(ns, *containers, **spec):
    body = {"containers": list(containers)}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p%d" % next(NAMES), "namespace": ns},
            "spec": body}


def refusal(store, obj):
    from simcluster.errors import ApiError
    with pytest.raises(ApiError) as exc:
        store.create("pods", obj)
    assert exc.value.code == 403
    return exc.value.message


ALL = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]


def test_the_variable_without_a_request_is_refused_naming_container_and_rule(store):
    bad = pod("team-a", container("main", env=ALL), runtimeClassName="nvidia")
    assert refusal(store, bad) == (
        "pods \"%s\" is forbidden: ValidatingAdmissionPolicy 'skaffon-gpu-access-team-a' with binding "
        "'skaffon-gpu-access-team-a' denied request: container main sets NVIDIA_VISIBLE_DEVICES (only void/none "
        "grant nothing; the device plugin names the GPUs it allocated): in namespace team-a GPUs come only "
        "through a resource request (nvidia.com/gpu or nvidia.com/mig-<profile> in resources.limits, or a "
        "ResourceClaim in resources.claims)"
        % bad["metadata"]["name"])
    store.create("pods", pod("other", container("main", env=ALL)))  # no policy bound there


@pytest.mark.parametrize("spec, words", [
    ({"initContainers": [container("setup", env=ALL)], "containers": [container("main", limits={"nvidia.com/gpu": "1"})]},
     "container setup sets NVIDIA_VISIBLE_DEVICES"),
    ({"containers": [container("main", env=ALL, limits={"nvidia.com/gpu": "1"})]},
     "container main sets NVIDIA_VISIBLE_DEVICES"),     # a request does not license a wider list
    ({"containers": [container("side", env=[{"name": "NVIDIA_VISIBLE_DEVICES",
                                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])]},
     "container side sets NVIDIA_VISIBLE_DEVICES"),
    ({"containers": [container("tool", env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}])]},
     "container tool sets NVIDIA_DRIVER_CAPABILITIES without requesting a GPU"),
    ({"containers": [container("dev", mounts=["nv"])],
      "volumes": [{"name": "nv", "hostPath": {"path": "/dev/nvidia0"}}]},
     "container dev mounts a host path /dev or /dev/nvidia* without requesting a GPU"),
    ({"containers": [container("dev", mounts=["d"], limits={"nvidia.com/gpu": "0"})],
      "volumes": [{"name": "d", "hostPath": {"path": "/dev"}}]},
     "container dev mounts a host path"),
])
def test_refused(store, spec, words):
    assert words in refusal(store, pod("team-a", **spec))


@pytest.mark.parametrize("spec", [
    {"containers": [container("main", limits={"nvidia.com/gpu": "1"},
                              env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility,video"}])]},
    {"containers": [container("main", limits={"nvidia.com/mig-1g.10gb": "1"}, mounts=["nv"])],
     "volumes": [{"name": "nv", "hostPath": {"path": "/dev/nvidia-caps"}}]},
    {"containers": [container("main", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])]},
    {"containers": [container("main", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}])]},
    {"containers": [container("main")], "volumes": [{"name": "data", "hostPath": {"path": "/data"}}]},
    {"containers": [container("main", env=[{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}])]},
    # DRA mode: a claim in resources.claims is the container's GPU request
    {"containers": [dict(container("main", env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]),
                         resources={"claims": [{"name": "gpu"}]})],
     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]},
])
def test_admitted(store, spec):
    store.create("pods", pod("team-a", **spec))
