"""GitOps export: deterministic files, Argo CD Applications valid against the real CRD, waves in flow order."""

import os

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.filter.gitops import gitops_files, tenants_objects
from kit.paths import UPSTREAM

APP_CRD = os.path.join(UPSTREAM, "argo-cd", "crds", "application-crd.yaml")
SETTINGS = {"repo_url": "https://git.example/platform/gitops.git", "path": "gpu", "revision": "main"}
OPERATOR = {"repo_url": "https://helm.ngc.nvidia.com/nvidia", "chart": "gpu-operator", "version": "v26.7.0",
            "release": "gpu-operator", "namespace": "gpu-operator", "values": {"driver": {"enabled": True}}}
TEAMS = [{"name": "team-a", "quota": {"requests.nvidia.com/gpu": 8}, "groups": {"edit": ["idp-team-a"]}},
         {"name": "team-b", "quota": {"requests.nvidia.com/gpu": 4}}]


def export():
    return gitops_files(SETTINGS, releases={"gpu-operator": OPERATOR},
                        layers={"teams": tenants_objects(TEAMS), "platform": [
                            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}}]},
                        nodes={"gpu-h100-1": {"labels": {"gpu.skaffon.io/accelerator": "h100"},
                                              "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}})


def test_same_inventory_same_bytes_and_one_object_per_file():
    files = export()
    assert files == export()
    teams = [p for p in files if p.startswith("teams/")]
    assert "teams/namespace-cluster-team-a.yaml" in teams
    assert "teams/resourcequota-team-a-tenant-quota.yaml" in teams
    for path in teams:
        docs = [d for d in yaml.safe_load_all(files[path]) if d]
        assert len(docs) == 1, path


def test_applications_follow_the_flow_and_validate_against_the_argo_cd_crd():
    if not os.path.exists(APP_CRD):
        pytest.skip("Argo CD CRD not found: %s" % APP_CRD)
    import jsonschema
    crd = yaml.safe_load(open(APP_CRD))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    files = export()
    apps = sorted(p for p in files if p.startswith("apps/"))
    assert apps == ["apps/00-gpu-platform-platform.yaml", "apps/01-gpu-platform-gpu-operator.yaml",
                    "apps/04-gpu-platform-teams.yaml"]
    for path in apps + ["root.yaml"]:
        app = yaml.safe_load(files[path])
        jsonschema.validate(app, schema)
    operator = yaml.safe_load(files["apps/01-gpu-platform-gpu-operator.yaml"])
    assert operator["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "1"
    assert operator["spec"]["source"]["helm"]["valuesObject"] == {"driver": {"enabled": True}}
    assert operator["spec"]["source"]["targetRevision"] == "v26.7.0"
    assert "ServerSideApply=true" in operator["spec"]["syncPolicy"]["syncOptions"]
    root = yaml.safe_load(files["root.yaml"])
    assert root["spec"]["source"]["path"] == "gpu/apps"


def test_oci_chart_loses_the_scheme_and_nodes_are_documented_patches():
    files = gitops_files(SETTINGS, releases={"gpu-operator": dict(OPERATOR, repo_url="oci://registry.example/nvidia")},
                         nodes={"gpu-h100-1": {"labels": {"a/b": "c"}}})
    app = yaml.safe_load(files["apps/01-gpu-platform-gpu-operator.yaml"])
    assert app["spec"]["source"]["repoURL"] == "registry.example/nvidia"
    assert "kubectl patch node gpu-h100-1" in files["nodes/gpu-h100-1.yaml"]


def test_bad_teams_are_refused_naming_the_field():
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError) as err:
        tenants_objects([{"name": "Team_A"}])
    assert "tenants_list[Team_A].name" in str(err.value)


def test_built_in_kinds_validate_against_the_kubernetes_schemas():
    import kubernetes_validate   # make installs it (simcluster/requirements.txt): missing is a failure
    files = export()
    checked = 0
    for path, text in sorted(files.items()):
        for doc in yaml.safe_load_all(text):
            if doc and not doc["apiVersion"].startswith("argoproj.io/"):
                kubernetes_validate.validate(doc, "1.35.0", strict=True)
                checked += 1
    assert checked >= 10
