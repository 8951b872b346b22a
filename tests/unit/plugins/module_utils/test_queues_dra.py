"""Queue backends in DRA mode: what Kueue v0.19.2 and KAI v0.17.0 count of a ResourceClaim, the refusals,
and the Kueue Configuration with deviceClassMappings rendered through the real chart."""
import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import dra
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import objects as q
from kit import charts
from kit.paths import KUEUE_CHART

POOLS = {"h100": {"labels": {"gpu.skaffon.io/accelerator": "h100"}, "taints": []}}
GPU_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


def kueue_team(name="team-a", rows=None, templates=None, quota=None, cohort="research"):
    team = {"name": name, "queue": {"cohort": cohort, "flavors": [
        {"name": "h100", "resources": rows or {"nvidia.com/gpu": {"nominal": 2}}}]}}
    if templates is not None:
        team["claim_templates"] = templates
    if quota is not None:
        team["quota"] = quota
    return team


def kai_team(name="team-a", templates=None):
    return {"name": name, "queue": {"parent": "research", "gpu": {"quota": 2}}, "claim_templates": templates or []}


DEPTS = [{"name": "research", "gpu": {"quota": 8}}]


def test_whole_gpu_claims_keep_the_nvidia_com_gpu_rows():
    objs = q.render("kueue", [kueue_team(templates=[{"name": "gpu", "gpus": 1}])], pools=POOLS, allocation_api="dra")
    cq = [o for o in objs if o["kind"] == "ClusterQueue"][0]
    assert cq["spec"]["resourceGroups"][0]["coveredResources"] == ["nvidia.com/gpu"]
    objs = q.render("kai", [kai_team(templates=[{"name": "gpu", "gpus": 2}])], departments=DEPTS,
                    allocation_api="dra")
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Queue"][:2] == ["research", "team-a"]


@pytest.mark.parametrize("backend,team,kw,snippet", [
    ("kai", kai_team(), {"kai_gpu_sharing": True},
     "reservation pod that asks nvidia.com/gpu, which no device plugin serves in DRA mode"),
    ("kai", kai_team(templates=[{"name": "m", "mig_profile": "1g.10gb"}]), {},
     "claims of mig.nvidia.com are never counted, so queue team-a would not limit them"),
    ("kai", kai_team(templates=[{"name": "n", "all_gpus": True}]), {},
     "counts an allocationMode All claim as one GPU"),
    ("kueue", kueue_team(templates=[{"name": "n", "all_gpus": True}]), {},
     "Kueue charges only ExactCount requests"),
    ("kueue", kueue_team(rows={"nvidia.com/mig-1g.10gb": {"nominal": 2}}), {}, "name the row nvidia.com/mig"),
])
def test_what_the_backend_cannot_count_is_refused(backend, team, kw, snippet):
    with pytest.raises(DomainError) as err:
        q.render(backend, [team], departments=DEPTS if backend == "kai" else None, pools=POOLS,
                 allocation_api="dra", **kw)
    assert snippet in err.value.msg
    # the same inventory in device-plugin mode is not refused for the claim reasons
    if backend == "kueue" and "mig" not in snippet:
        q.render(backend, [team], pools=POOLS, **kw)


def test_claim_quota_caps_kueue_borrowing():
    team = kueue_team(rows={"nvidia.com/gpu": {"nominal": 2, "borrowing_limit": 4}}, quota={GPU_KEY: 4})
    with pytest.raises(DomainError) as err:
        q.render("kueue", [team], pools=POOLS, allocation_api="dra")
    assert "above the team's ResourceQuota %s: 4" % GPU_KEY in err.value.msg


def test_kueue_configuration_maps_the_device_classes():
    values = q.chart_values("kueue", allocation_api="dra")
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["resources"]["deviceClassMappings"] == [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
        {"name": "nvidia.com/mig", "deviceClassNames": ["mig.nvidia.com"]}]
    assert config["resources"]["quotaCheckStrategy"] == "IgnoreUndeclared"
    plain = yaml.safe_load(q.chart_values("kueue")["managerConfig"]["controllerManagerConfigYaml"])
    assert plain["resources"] == {"quotaCheckStrategy": "IgnoreUndeclared"}     # no mappings without DRA
    assert "managerConfig" not in q.chart_values("kai", allocation_api="dra")


@pytest.mark.parametrize("allocation_api", ["dra", "device-plugin"])
def test_kueue_chart_renders_the_configuration_into_the_manager_config(allocation_api):
    docs = charts.render(KUEUE_CHART, q.chart_values("kueue", allocation_api=allocation_api), release="kueue",
                         namespace="kueue-system")
    maps = [d for d in docs
            if d.get("kind") == "ConfigMap" and "controller_manager_config.yaml" in (d.get("data") or {})]
    assert maps, [d.get("kind") for d in docs]
    config = yaml.safe_load(maps[0]["data"]["controller_manager_config.yaml"])
    assert config["resources"]["quotaCheckStrategy"] == "IgnoreUndeclared"
    if allocation_api == "dra":
        assert config["resources"]["deviceClassMappings"][0] == {"name": "nvidia.com/gpu",
                                                                 "deviceClassNames": ["gpu.nvidia.com"]}
    # what the chart renders by default, apart from the mappings, is what it renders without them
    plain = [d for d in charts.render(KUEUE_CHART, {}, release="kueue", namespace="kueue-system")
             if d.get("kind") == "ConfigMap" and "controller_manager_config.yaml" in (d.get("data") or {})]
    default = yaml.safe_load(plain[0]["data"]["controller_manager_config.yaml"])
    config.pop("resources")
    assert config == default
    assert dra.claim_quota_resource(GPU_KEY) == "nvidia.com/gpu"
