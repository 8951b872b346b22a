"""playbooks/gitops_export.yml from an inventory shaped like inventories/example (group_vars per pool)."""
import json
import os

import pytest
import yaml

from kit.gpu_operator import plan_for
from kit.paths import BIN, REPO, UPSTREAM as SHARED
from kit.playbook import run_playbook

PLAYBOOK = os.path.join(REPO, "playbooks", "gitops_export.yml")
pytestmark = [pytest.mark.slow]

TEAMS = [
    {"name": "team-a", "quota": {"requests.nvidia.com/gpu": 8}, "groups": {"admin": ["idp-a-leads"]},
     "network": {"ingress_from_namespaces": ["monitoring"]},
     "queue": {"parent": "research", "gpu": {"quota": 2, "over_quota_weight": 1}}},
    {"name": "team-b", "quota": {"requests.nvidia.com/gpu": 4},
     "queue": {"parent": "research", "gpu": {"quota": 2, "over_quota_weight": 3}}},
]


CRDS = {}


def crd_schemas(*dirs):
    """{apiVersion: {kind: openAPIV3Schema}} of the CRDs in ../shared/upstream."""
    out = {}
    for directory in dirs:
        for name in sorted(os.listdir(directory)):
            for crd in yaml.safe_load_all(open(os.path.join(directory, name))):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                for version in crd["spec"]["versions"]:
                    out.setdefault("%s/%s" % (crd["spec"]["group"], version["name"]), {})[
                        crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return out


def write_inventory(root, teams):
    gv = root / "group_vars"
    gv.mkdir(parents=True, exist_ok=True)
    (root / "hosts.yml").write_text(yaml.safe_dump({"all": {
        "hosts": {"localhost": {"ansible_connection": "local"}},
        "children": {"gpu_nodes": {"children": {
            "pool_h100": {"hosts": {"gpu-h100-1": {}}},
            "pool_l40s": {"hosts": {"gpu-l40s-1": {}}}}}}}}))
    (gv / "all.yml").write_text(yaml.safe_dump({
        "gpu_operator_chart_version": "v26.7.0",
        "gpu_operator_chart_repo_url": "https://mirror.example/helm/nvidia",
        "gpu_operator_image_mirror": "mirror.example:5000/nvidia",
        "gpu_operator_driver_plan": {"driver_enabled": True, "toolkit_enabled": True, "errors": [], "warnings": [],
                                     "node_labels": {"gpu-h100-1": {"nvidia.com/gpu.deploy.driver": "false"}}},
        "gpu_operator_time_slicing": {"configs": {"l40s": {"replicas": 4}}, "nodes": {"gpu-l40s-1": "l40s"}},
        "gitops_repo_url": "https://git.example/platform/gitops.git",
        "tenants_queue_backend": "kai", "queues_chart_version": "v0.17.0",
        "queues_departments": [{"name": "research", "gpu": {"quota": 4}}],
        "gitops_repo_path": "clusters/prod-gpu",
        "tenants_list": teams}))
    (gv / "pool_h100.yml").write_text(yaml.safe_dump({
        "mig_profile": "all-1g.10gb", "node_prereqs_pool": {"accelerator": "h100", "trust": "mixed"},
        "node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}]}))
    (gv / "pool_l40s.yml").write_text(yaml.safe_dump({"node_prereqs_pool": {"accelerator": "l40s"}}))
    return str(root)


def export(inv, out, **kw):
    # as on a CI runner that only renders for Argo CD: no helm on the control host (not in PATH)
    env = dict(os.environ, PATH=os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                                if p and not os.path.exists(os.path.join(p, "helm"))))
    return run_playbook(PLAYBOOK, env, inventory=inv, extra_vars={"gitops_export_dir": str(out)}, **kw)


def test_export_is_deterministic_complete_and_prunes(tmp_path):
    inv = write_inventory(tmp_path / "inv", TEAMS)
    out = tmp_path / "gitops"
    first = export(inv, out)
    assert first.rc == 0, first
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.yaml"))
    assert "root.yaml" in files and "apps/01-gpu-platform-gpu-operator.yaml" in files
    assert "platform/configmap-gpu-operator-time-slicing-config.yaml" in files
    assert "teams/networkpolicy-team-a-tenant-default-deny.yaml" in files
    assert "nodes/gpu-h100-1.yaml" in files
    assert "apps/02-gpu-platform-queue-backend.yaml" in files and "queues/queue-cluster-team-a.yaml" in files
    assert "apps/05-gpu-platform-monitoring.yaml" in files
    assert any(f.startswith("monitoring/prometheusrule-monitoring-") for f in files), files
    kai = yaml.safe_load((out / "apps" / "02-gpu-platform-queue-backend.yaml").read_text())
    assert kai["spec"]["source"]["repoURL"] == "ghcr.io/kai-scheduler/kai-scheduler"
    assert kai["spec"]["source"]["chart"] == "kai-scheduler" and kai["spec"]["source"]["targetRevision"] == "v0.17.0"
    node = yaml.safe_load((out / "nodes" / "gpu-h100-1.yaml").read_text())
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    assert node["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] == "false"
    assert node["metadata"]["labels"]["gpu.skaffon.io/accelerator"] == "h100"
    assert node["spec"]["taints"] == [{"key": "gpu.skaffon.io/workload", "value": "training", "effect": "NoSchedule"}]
    app = yaml.safe_load((out / "apps" / "01-gpu-platform-gpu-operator.yaml").read_text())
    values = app["spec"]["source"]["helm"]["valuesObject"]
    assert values["devicePlugin"]["config"]["name"] == "time-slicing-config"
    assert values["operator"]["repository"].startswith("mirror.example:5000/nvidia")
    snapshot = dict((f, (out / f).read_bytes()) for f in files)

    again = export(inv, out)
    assert again.rc == 0 and again.changed() == 0, again
    assert dict((f, (out / f).read_bytes()) for f in files) == snapshot

    (out / "README.md").write_text("kept: not generated")
    write_inventory(tmp_path / "inv", TEAMS[:1])
    check = export(inv, out, check=True)
    assert check.rc == 0 and check.changed() == 1
    assert (out / "teams" / "namespace-cluster-team-b.yaml").exists()  # check mode removed nothing
    pruned = export(inv, out)
    assert pruned.rc == 0, pruned
    assert not (out / "teams" / "namespace-cluster-team-b.yaml").exists()
    assert (out / "README.md").exists()


@pytest.mark.needs_shared
def test_export_validates_against_the_crds_and_kubernetes_schemas(tmp_path):
    import kubernetes_validate   # make installs it (simcluster/requirements.txt): missing is a failure
    import jsonschema
    crd_path = os.path.join(SHARED, "argo-cd", "crds", "application-crd.yaml")
    inv = write_inventory(tmp_path / "inv", TEAMS)
    out = tmp_path / "gitops"
    assert export(inv, out).rc == 0
    schema = yaml.safe_load(open(crd_path))["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    CRDS.update(crd_schemas(os.path.join(SHARED, "kai-scheduler", "crds"),
                            os.path.join(SHARED, "prometheus-operator", "crds")))
    kinds = set()
    for path in out.rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            kinds.add(doc["kind"])
            if doc["apiVersion"].startswith("argoproj.io/"):
                jsonschema.validate(doc, schema)
            elif doc["apiVersion"] in CRDS:
                jsonschema.Draft7Validator(CRDS[doc["apiVersion"]][doc["kind"]]).validate(doc)   # Go regexes: no metaschema check
            else:
                kubernetes_validate.validate(doc, "1.35.0", strict=True)
    assert {"Application", "Namespace", "ResourceQuota", "NetworkPolicy", "RoleBinding", "ConfigMap", "Node",
            "Queue", "PrometheusRule"} <= kinds


# --- The Application deploys what the install deploys ------------------------------------------------
# One inventory shaped like inventories/example (the H100 pool tainted workload=training, the L40S pool
# nvidia.com/gpu=present), time-slicing on the L40S, the DCGM exporter values of roles/monitoring, a
# mirror: gpu_operator.yml installs the real chart into the simulated cluster, then the export and the
# image list are rendered from the same inventory. Argo CD reads the chart from the site's Helm
# repository, so the export is told that source (-e); the values do not depend on it.

GPU_OPERATOR = os.path.join(REPO, "playbooks", "gpu_operator.yml")
IMAGES = os.path.join(REPO, "playbooks", "images.yml")
MIRROR = "mirror.example:5000/nvidia"
TIME_SLICING = {"configs": {"l40s": {"replicas": 4}}, "nodes": {"gpu-l40s-1": "l40s"}}
PROMETHEUS_CRDS = [os.path.join(SHARED, "prometheus-operator", "crds", "monitoring.coreos.com_%s.yaml" % name)
                   for name in ("prometheusrules", "servicemonitors")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(sim, inventory, the values the release got from gpu_operator.yml)."""
    from kit.pool_inventory import cluster_file, write_inventory     # (this module has a write_inventory)
    from simcluster import testing
    work = tmp_path_factory.mktemp("gitops-same-values")
    spec_path = cluster_file(str(work / "cluster.yaml"))
    spec = yaml.safe_load(open(spec_path))
    spec["crds"] += PROMETHEUS_CRDS          # the monitoring role checks them before the operator gets its values
    open(spec_path, "w").write(yaml.safe_dump(spec))
    sim = testing.start(spec_path, str(work / "run"))
    try:
        kubectl, helm = os.path.join(BIN, "kubectl"), os.path.join(BIN, "helm3")
        sim.run(kubectl, "create", "namespace", "monitoring")
        inv = write_inventory(work / "inv", sim, all_vars={
            "gpu_operator_driver_plan": plan_for(spec["nodes"]),
            "gpu_operator_time_slicing": TIME_SLICING,
            "gpu_operator_image_mirror": MIRROR,
            "monitoring_namespace": "monitoring",
            "monitoring_promtool_check": False,
            "gitops_repo_url": "https://git.example/platform/gitops.git",
        })
        res = run_playbook(GPU_OPERATOR, sim.env, inventory=inv)
        assert res.rc == 0, res
        got = sim.run(helm, "get", "values", "gpu-operator", "-n", "gpu-operator", "-o", "json")
        yield sim, inv, json.loads(got.stdout)
    finally:
        sim.stop()


@pytest.mark.needs_shared
def test_exported_application_values_are_the_values_helm_got(installed, tmp_path):
    sim, inv, helm_values = installed
    # what the values must carry for this inventory, or the comparison below proves little
    tolerations = helm_values["daemonsets"]["tolerations"]
    assert {"key": "gpu.skaffon.io/workload", "operator": "Equal", "value": "training",
            "effect": "NoSchedule"} in tolerations, tolerations
    assert helm_values["operator"]["upgradeCRD"] is False
    assert helm_values["devicePlugin"]["config"]["name"] == "time-slicing-config"
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in helm_values["dcgmExporter"]["config"]["data"]

    out = tmp_path / "gitops"
    sim.reset_stats()
    res = run_playbook(PLAYBOOK, sim.env, inventory=inv, extra_vars={
        "gitops_export_dir": str(out), "gpu_operator_chart_source": "repo", "gpu_operator_chart_ref": "gpu-operator"})
    assert res.rc == 0, res
    assert sim.stats()["total"] == 0, sim.stats()          # the export reads nothing from the cluster
    app = yaml.safe_load((out / "apps" / "01-gpu-platform-gpu-operator.yaml").read_text())
    assert app["spec"]["source"]["helm"]["valuesObject"] == helm_values


@pytest.mark.needs_shared
def test_image_list_is_rendered_from_the_values_helm_got(installed, tmp_path):
    sim, inv, helm_values = installed
    out = tmp_path / "images"
    res = run_playbook(IMAGES, sim.env, inventory=inv, extra_vars={"images_output_dir": str(out)})
    assert res.rc == 0, res
    assert yaml.safe_load((out / "gpu-operator-values-mirror.yaml").read_text()) == helm_values
    upstream = yaml.safe_load((out / "gpu-operator-values-upstream.yaml").read_text())
    assert MIRROR not in json.dumps(upstream)                           # the same values, without the mirror
    assert upstream["daemonsets"]["tolerations"] == helm_values["daemonsets"]["tolerations"]
    assert upstream["dcgmExporter"]["config"] == helm_values["dcgmExporter"]["config"]
    pairs = dict(line.split(" ") for line in (out / "images.txt").read_text().splitlines())
    assert all(dest.startswith(MIRROR + "/") for dest in pairs.values()), pairs
