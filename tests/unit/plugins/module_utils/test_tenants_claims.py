"""tenants in DRA mode: ResourceClaimTemplates per team and the quota on claims as Kubernetes 1.34 counts them
(pkg/quota/v1/evaluator/core/resource_claims.go: count/resourceclaims.resource.k8s.io and
<class>.deviceclass.resource.k8s.io/devices, allocationMode All charged AllocationResultsMaxSize = 32)."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import claims
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.apply import TenantsApply, plan_update
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube

DRA = tenants.default_settings(allocation_api="dra")
PLUGIN = tenants.default_settings()
GPU_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_KEY = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"


def device(name, kind, product="NVIDIA H100 80GB HBM3", profile=None):
    attrs = {"type": {"string": kind}, "productName": {"string": product}}
    if profile:
        attrs["profile"] = {"string": profile}
    return {"name": name, "attributes": attrs}


def node_slice(node, devices):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node + "-gpu.nvidia.com"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def device_class(name):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": {}}


SLICES = [node_slice("h100-a", [device("gpu-0", "gpu"), device("gpu-1", "gpu")]),
          node_slice("h100-mig", [device("gpu-0-mig-1g10gb-19-0", "mig", profile="1g.10gb"),
                                  device("gpu-0-mig-3g40gb-9-4", "mig", profile="3g.40gb")])]
CLUSTER = {"dra": claims.slice_facts([device_class("gpu.nvidia.com"), device_class("mig.nvidia.com")], SLICES)}


def rcts(team, settings=None):
    return dict((o["metadata"]["name"], o) for o in tenants.render_team(team, settings or DRA)
                if o["kind"] == "ResourceClaimTemplate")


def test_default_template_is_one_whole_gpu_and_quota_counts_claims():
    team = {"name": "team-a", "quota": {GPU_KEY: 2, "count/resourceclaims.resource.k8s.io": 4}}
    assert tenants.validate([team], DRA, CLUSTER) == []
    objs = tenants.render_team(team, DRA)
    quota = [o for o in objs if o["kind"] == "ResourceQuota"][0]
    assert quota["spec"]["hard"] == {GPU_KEY: "2", "count/resourceclaims.resource.k8s.io": "4"}
    gpu = rcts(team)["gpu"]
    assert gpu["apiVersion"] == "resource.k8s.io/v1" and gpu["metadata"]["namespace"] == "team-a"
    assert gpu["spec"] == {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}}
    assert gpu["metadata"]["labels"]["gpu-platform.skaffon.io/team"] == "team-a"


def test_mig_profile_by_attribute_and_all_gpus_of_a_node():
    team = {"name": "team-b", "quota": {GPU_KEY: 32, MIG_KEY: 4}, "claim_templates": [
        {"name": "mig-1g.10gb", "mig_profile": "1g.10gb"},
        {"name": "node-gpus", "all_gpus": True},
        {"name": "h100x2", "gpus": 2, "product": "NVIDIA H100 80GB HBM3"}]}
    assert tenants.validate([team], dict(DRA, allow_overcommit=True), CLUSTER) == []
    found = rcts(team)
    mig = found["mig-1g.10gb"]["spec"]["spec"]["devices"]["requests"][0]
    assert mig == {"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount",
                                              "count": 1, "selectors": [{"cel": {
                                                  "expression": "device.attributes['gpu.nvidia.com'].profile == "
                                                                "'1g.10gb'"}}]}}
    assert found["node-gpus"]["spec"]["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}
    sel = found["h100x2"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert sel["count"] == 2 and "productName == 'NVIDIA H100 80GB HBM3'" in sel["selectors"][0]["cel"]["expression"]
    assert claims.charge({"all_gpus": True}) == (GPU_KEY, 32)


@pytest.mark.parametrize("team,snippet", [
    ({"name": "t", "quota": {"requests.nvidia.com/gpu": 4}},
     "in DRA mode (tenants_allocation_api: dra) no device plugin runs and no pod requests nvidia.com/gpu"),
    ({"name": "t", "quota": {"requests.nvidia.com/mig-1g.10gb": 4}}, "use gpu.nvidia.com.deviceclass.resource.k8s.io"),
    ({"name": "t", "quota": {"requests." + GPU_KEY: 4}}, "no requests. prefix"),
    ({"name": "t", "quota": {GPU_KEY: "1.5"}}, "whole units"),
    ({"name": "t", "quota": {GPU_KEY: 8}, "claim_templates": [{"name": "all", "all_gpus": True}]},
     "charged 32 devices (AllocationResultsMaxSize, the worst case) whatever the node has, above the team's quota "
     "gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 8"),
    ({"name": "t", "quota": {GPU_KEY: 1}, "claim_templates": [{"name": "two", "gpus": 2}]},
     "raise quota['gpu.nvidia.com.deviceclass.resource.k8s.io/devices'] to at least 2"),
    ({"name": "t", "claim_templates": [{"name": "m", "mig_profile": "2g.20gb"}]},
     "no ResourceSlice of the cluster publishes a MIG device with profile 2g.20gb (published: 1g.10gb, 3g.40gb)"),
    ({"name": "t", "claim_templates": [{"name": "m", "gpus": 1, "mig_profile": "1g.10gb"}]}, "set exactly one of"),
    ({"name": "t", "claim_templates": [{"name": "Bad_Name", "gpus": 1}]}, "DNS-1123 subdomain"),
    ({"name": "t", "claim_templates": [{"name": "g", "gpus": 1, "count": 2}]}, "unknown key"),
    ({"name": "t", "claim_templates": [{"name": "g", "gpus": 1, "product": "NVIDIA B200"}]},
     "no device of the cluster's ResourceSlices has productName \"NVIDIA B200\""),
])
def test_dra_refusals_name_the_fix(team, snippet):
    problems = tenants.validate([team], DRA, CLUSTER)
    assert any(snippet in p for p in problems), problems


def test_claim_keys_and_templates_refused_in_device_plugin_mode():
    team = {"name": "t", "quota": {GPU_KEY: 2}, "claim_templates": [{"name": "gpu", "gpus": 1}]}
    problems = tenants.validate([team], PLUGIN, None)
    assert any("a quota on ResourceClaims limits nothing while GPUs come from the device plugin" in p
               for p in problems)
    assert any("ResourceClaimTemplates are for DRA mode only" in p for p in problems)
    assert not [o for o in tenants.render_team({"name": "t"}, PLUGIN) if o["kind"] == "ResourceClaimTemplate"]


def test_overcommit_against_published_gpus():
    teams = [{"name": "a", "quota": {GPU_KEY: 2}}, {"name": "b", "quota": {GPU_KEY: 1}}]
    problems = tenants.validate(teams, DRA, CLUSTER)
    assert any("add up to 3 (a=2, b=1) but the cluster's ResourceSlices publish 2 GPUs" in p for p in problems)
    assert tenants.validate(teams, dict(DRA, allow_overcommit=True), CLUSTER) == []


def test_mig_only_team_gets_no_whole_gpu_template():
    assert rcts({"name": "m", "quota": {GPU_KEY: 0, MIG_KEY: 3}}) == {}


def test_changed_template_is_replaced_spec_immutable():
    team = {"name": "team-a"}
    live = rcts(team)["gpu"]
    desired = rcts(dict(team, claim_templates=[{"name": "gpu", "gpus": 2}]))["gpu"]
    assert plan_update(live, live)[0] is None
    patch, fields, replace = plan_update(desired, live)
    assert replace and fields == ["spec"]


def run(kube, teams, check=False):
    return TenantsApply(kube, {"tenants": teams, "allocation_api": "dra"}, check_mode=check).run()


def test_apply_reads_slices_once_and_rerun_is_unchanged():
    kube = FakeKube([device_class("gpu.nvidia.com"), device_class("mig.nvidia.com")] + SLICES)
    team = {"name": "team-a", "quota": {GPU_KEY: 2}, "claim_templates": [
        {"name": "gpu", "gpus": 1}, {"name": "mig-3g.40gb", "mig_profile": "3g.40gb"}]}
    first = run(kube, [team])
    assert first["summary"]["ResourceClaimTemplate"]["created"] == 2
    assert ("ResourceClaimTemplate", "team-a", "mig-3g.40gb") in kube.objects
    kube.calls = []
    again = run(kube, [team])
    assert not again["changed"]
    assert sorted(c.kind for c in kube.calls if c.verb == "LIST") == sorted(
        ["DeviceClass", "ResourceSlice"] + [k for k, dummy in tenants.kinds(DRA)])
    kube.calls = []
    run(kube, [dict(team, claim_templates=[{"name": "gpu", "gpus": 1}])])
    assert [(c.verb, c.name) for c in kube.writes()] == [("DELETE", "mig-3g.40gb")]


def test_dra_mode_needs_resource_api():
    kube = FakeKube(served=["Namespace", "ResourceQuota"])
    with pytest.raises(DomainError) as err:
        run(kube, [{"name": "team-a"}])
    assert "the cluster does not serve resource.k8s.io/v1 (Kubernetes serves DRA from 1.34)" in str(err.value)


def test_rendered_templates_pass_the_api_validation_and_its_defaults_change_nothing():
    """The simulator's port of pkg/apis/resource/validation: no field error, and the server's defaulting
    leaves the spec as rendered (so a re-run compares equal)."""
    import copy as _copy
    from simcluster.validation import resource as api
    team = {"name": "team-b", "quota": {GPU_KEY: 32, MIG_KEY: 4}, "claim_templates": [
        {"name": "mig-1g.10gb", "mig_profile": "1g.10gb"}, {"name": "node-gpus", "all_gpus": True},
        {"name": "h100x2", "gpus": 2, "product": "NVIDIA H100 80GB HBM3"}]}
    for obj in rcts(team).values():
        assert api.validate_claim_template(obj, None) == [], obj
        defaulted = _copy.deepcopy(obj)
        api.default("resourceclaimtemplates.resource.k8s.io", defaulted)
        assert defaulted["spec"] == obj["spec"]
