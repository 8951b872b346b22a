"""Job templates of a DRA cluster: claim-gpu-job, claim-mig-job, claim-node-gpus-job instead of the templates that
request nvidia.com/gpu; rendered with Ansible's own filters, each file a ResourceClaimTemplate and the Job using it."""
import copy
import os

import jinja2
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters

from ansible_collections.skaffon.gpu_platform.plugins.filter.platform_design import FilterModule
from kit.paths import REPO

FILTERS = FilterModule().filters()
POOLS = {"pool_h100": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8, "teams": ["team-a", "team-b"]}}
INVENTORY = {"pool_h100": {"hosts": ["h1", "h2"], "labels": {"accelerator": "h100", "workload": "training"},
                           "taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]}}
TENANTS = [{"name": "team-a", "quota": {"requests.nvidia.com/gpu": 8}},
           {"name": "team-b", "quota": {"requests.nvidia.com/mig-1g.10gb": 14}}]


def design(backend="none"):
    req = {"queue_backend": backend, "allocation_api": "dra", "kubernetes_version": "1.34", "dra_experimental": True}
    out = copy.deepcopy(FILTERS["platform_design"](POOLS, tenants=TENANTS, requirements=req, inventory=INVENTORY))
    assert out["allocation_api"]["api"] == "dra"
    return out


def jobs(d):
    return dict(((j["team"], j["template"]), j["job"]) for j in FILTERS["platform_job_templates"](d))


def render(template, job):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(REPO, "docs", "templates")),
                             trim_blocks=True)
    env.filters.update(CoreFilters().filters())
    return [d for d in yaml.safe_load_all(env.get_template(template + ".yaml.j2").render(job=job)) if d]


def test_dra_cluster_gets_claim_templates_and_no_extended_resource_templates():
    found = jobs(design())
    assert sorted(t for team, t in found if team == "team-a") == [
        "checkpoint-pvc", "claim-gpu-job", "claim-node-gpus-job", "data-stage-job"]
    assert sorted(t for team, t in found if team == "team-b") == ["checkpoint-pvc", "claim-mig-job", "data-stage-job"]
    mig = found[("team-b", "claim-mig-job")]["claim"]
    assert mig["device_class"] == "mig.nvidia.com" and mig["profile"] == "1g.10gb"
    assert mig["selectors"] == ["device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"]
    assert found[("team-a", "claim-node-gpus-job")]["claim"]["allocation_mode"] == "All"


def test_rendered_files_hold_the_template_and_the_job_that_uses_it():
    found = jobs(design())
    rct, job = render("claim-mig-job", found[("team-b", "claim-mig-job")])
    assert rct["kind"] == "ResourceClaimTemplate" and rct["apiVersion"] == "resource.k8s.io/v1"
    request = rct["spec"]["spec"]["devices"]["requests"][0]
    assert request == {"name": "mig", "exactly": {
        "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "mig", "resourceClaimTemplateName": "team-b-mig"}]
    container = pod["containers"][0]
    assert container["resources"]["claims"] == [{"name": "mig"}]
    assert not [r for r in container["resources"]["limits"] if r.startswith("nvidia.com/")]
    rct, job = render("claim-node-gpus-job", found[("team-a", "claim-node-gpus-job")])
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"] == {"deviceClassName": "gpu.nvidia.com",
                                                                        "allocationMode": "All"}
    rct, job = render("claim-gpu-job", found[("team-a", "claim-gpu-job")])
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    assert job["metadata"]["name"] == "team-a-claim-gpu"


def test_queue_backends_get_the_node_gpus_as_an_exact_count():
    for backend in ("kai", "kueue"):
        claim = jobs(design(backend))[("team-a", "claim-node-gpus-job")]["claim"]
        assert (claim["allocation_mode"], claim["count"]) == ("ExactCount", 8)
        text = render("claim-node-gpus-job", jobs(design(backend))[("team-a", "claim-node-gpus-job")])
        assert text[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 8


def test_rendered_claim_templates_pass_the_api_validation():
    from simcluster.validation import resource as api
    found = jobs(design())
    for key in (("team-a", "claim-gpu-job"), ("team-a", "claim-node-gpus-job"), ("team-b", "claim-mig-job")):
        rct = render(key[1], found[key])[0]
        assert api.validate_claim_template(rct, None) == [], rct
