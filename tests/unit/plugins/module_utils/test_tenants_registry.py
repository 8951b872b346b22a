"""The registry policy of a team: validation, rendering, and the rendered policy in the simulator's CEL admission."""
import copy
import itertools

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import registry as tenants_registry
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.apply import comparable, plan_update


MIRROR = "registry.airgap.example:5000/mirror"
VAP = "validatingadmissionpolicies.admissionregistration.k8s.io"
VAPB = "validatingadmissionpolicybindings.admissionregistration.k8s.io"
NAMES = itertools.count()
DIGEST = "@sha256:" + "0123456789abcdef" * 4


def settings(**kw):
    return tenants.default_settings(allowed_registries=[MIRROR], **kw)


def objects_of(team, **kw):
    return [o for o in tenants.render_team(team, settings(**kw))
            if o["metadata"]["name"].startswith(tenants_registry.POLICY_PREFIX)]


def test_site_list_renders_one_policy_and_binding_per_team_namespace():
    objs = objects_of({"name": "team-a"})
    assert [o["kind"] for o in objs] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    assert {o["metadata"]["name"] for o in objs} == {"skaffon-registries-team-a"}
    binding = objs[1]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    assert objs[0]["metadata"]["labels"][tenants.TEAM_LABEL] == "team-a"
    assert "metadata" in objs[0] and "namespace" not in objs[0]["metadata"]


def test_empty_lists_render_no_policy_and_the_team_list_overrides_the_site():
    assert not [o for o in tenants.render_team({"name": "team-a"}, tenants.default_settings())
                if o["metadata"]["name"].startswith(tenants_registry.POLICY_PREFIX)]
    assert objects_of({"name": "team-a", "images": {"registries": []}}) == []
    spec = objects_of({"name": "team-a", "images": {"registries": ["nvcr.io/nvidia"]}})[0]["spec"]
    assert "'nvcr.io/nvidia/'" in spec["variables"][1]["expression"] and MIRROR not in str(spec)


@pytest.mark.parametrize("value, fix", [
    ("https://nvcr.io", "no scheme: write nvcr.io"),
    ("nvcr.io/", "no trailing '/'"),
    ("nvcr.io/nvidia/cuda:12", "no tag or digest"),
    ("library", "must be a host"),
])
def test_bad_prefixes_are_named_with_the_fix(value, fix):
    problems = tenants.validate([{"name": "team-a", "images": {"registries": [value]}}], tenants.default_settings())
    assert len(problems) == 1 and problems[0].startswith('tenants_list[team-a].images.registries[0] = "%s"' % value)
    assert fix in problems[0]
    site = tenants.validate([], tenants.default_settings(allowed_registries=[value]))
    assert site[0].startswith('tenants_allowed_registries[0] = "%s": ' % value) and fix in site[0]


def test_unknown_images_keys_and_non_bool_digest_flag():
    problems = tenants.validate([{"name": "t", "images": {"mirrors": [], "require_digest": "yes"}}],
                                tenants.default_settings())
    assert any("images.mirrors" in p and "unknown key" in p for p in problems)
    assert any("images.require_digest" in p and "true or false" in p for p in problems)


def test_a_rerun_against_the_defaulted_live_object_changes_nothing():
    for obj in objects_of({"name": "team-a", "images": {"require_digest": True}}):
        live = copy.deepcopy(obj)
        live["metadata"].update(uid="u", resourceVersion="7")
        match = live["spec"].get("matchConstraints") or live["spec"]["matchResources"]
        match.update(namespaceSelector=match.get("namespaceSelector", {}), objectSelector={})
        assert comparable(obj) == comparable(live)
        assert plan_update(obj, live) == (None, [], False)


# -- the rendered policy in the simulator's admission (real CEL) -------------------------------------------

@pytest.fixture
def store():
    pytest.importorskip("celpy")
    from kit.fake_store import FakeStore
    s = FakeStore(namespaces=())
    for ns in ("team-a", "team-prod", "other"):
        s.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}}, admit=False)
    for team in ({"name": "team-a"}, {"name": "team-prod", "images": {"require_digest": True}}):
        for obj in objects_of(team):
            s.create(VAP if obj["kind"] == "ValidatingAdmissionPolicy" else VAPB, obj)
    return s


def pod(ns, *images, **extra):
    containers = [{"name": "c%d" % i, "image": image} for i, image in enumerate(images)]
    spec = {"containers": containers}
    spec.update(extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p%d" % next(NAMES), "namespace": ns}, "spec": spec}


def refusal(store, obj):
    from simcluster.errors import ApiError
    with pytest.raises(ApiError) as exc:
        store.create("pods", obj)
    assert exc.value.code == 403
    return exc.value.message


def test_images_from_the_mirror_pass_a_foreign_one_is_refused_naming_image_and_registries(store):
    store.create("pods", pod("team-a", MIRROR + "/nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"))
    foreign = pod("team-a", MIRROR + "/ok:1", "docker.io/library/busybox:1.36")
    name = foreign["metadata"]["name"]
    message = refusal(store, foreign)
    assert message == (
        "pods \"%s\" is forbidden: ValidatingAdmissionPolicy 'skaffon-registries-team-a' with binding "
        "'skaffon-registries-team-a' denied request: image docker.io/library/busybox:1.36 is not from a registry "
        "allowed in namespace team-a (allowed: %s); use an image from there, named with its registry" % (name, MIRROR))


@pytest.mark.parametrize("image", [
    "busybox",                                          # a short name: docker.io or a search list
    MIRROR + "-old/x:1",                                # the prefix must end at a '/'
    "registry.airgap.example:5000/mirrorx/y:1",
    "registry.airgap.example:50001/mirror/y:1",
])
def test_lookalikes_and_short_names_are_refused(store, image):
    assert "image %s is not from a registry allowed" % image in refusal(store, pod("team-a", image))


def test_init_and_ephemeral_containers_are_checked_too(store):
    init = [{"name": "i", "image": "quay.io/evil/init:1"}]
    assert "image quay.io/evil/init:1" in refusal(store, pod("team-a", MIRROR + "/ok:1", initContainers=init))


def test_production_namespace_needs_digests_other_namespaces_are_not_bound(store):
    assert "is not pinned by digest: namespace team-prod admits only images named <image>@sha256:<digest>" in \
        refusal(store, pod("team-prod", MIRROR + "/model-server:2.1"))
    store.create("pods", pod("team-prod", MIRROR + "/model-server" + DIGEST))
    store.create("pods", pod("other", "docker.io/library/busybox:1.36"))
