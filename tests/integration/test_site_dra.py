"""The third example site end to end: inventories/dra (Dynamic Resource Allocation: the GPU Operator's
GPUCluster stack with NVIDIA's DRA driver, teams with ResourceClaimTemplates and quotas on claims, Kueue
with deviceClassMappings, the MIG layout set on one H100 host) against tests/clusters/dra.yaml.

The committed inventory is used as an operator writes it; a test-only overlay placed after it says only
how this machine reaches the hosts (host roots), the cluster (kubeconfig) and the chart archives
(../shared). site.yml converges, verify.yml passes the hand-over checks that apply in DRA mode and writes
the protocol, site.yml again changes nothing; through the site's own teams a MIG claim runs only where the
slices have the profile and a claim over the team's quota is refused with the API server's message.
"""
import json
import os
import re
import time

import pytest
import yaml

from kit.inventory import KERNEL, _demo
from kit.paths import BIN, CLUSTERS, GPU_OPERATOR_CHARTS as CHARTS, KUEUE_CHART, REPO
from kit.kubectl import apply, claim_pod, kget, kubectl, pod_started, pod_unschedulable, wait_object
from kit.playbook import module_python, run_playbook
from simcluster import testing

INVENTORY = os.path.join(REPO, "inventories", "dra")
CHART = "v26.7.0"           # the first chart with the GPUCluster stack
GPU_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
# the GPU hosts of the inventory as tests/clusters/dra.yaml has them: nvidia-smi capture, GPUs, GPUs in MIG mode
H100, L40S = "h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv", "l40s_no-mig__595.80__query-gpu.csv"
HOSTS = {"gpu-h100-1": (H100, 8, ()), "gpu-h100-2": (H100, 8, ()), "gpu-h100-mig-1": (H100, 2, (0,)),
         "gpu-l40s-1": (L40S, 4, ())}
MIG_NODE = "gpu-h100-mig-1"
DRA_EXPORTER = "nvidia-dcgm-exporter-dra"      # the GPUCluster's DCGM exporter: DaemonSet, pods' app, job
CHECKS = ("operator-healthy", "gpus-visible", "cuda-test", "wrong-node-excluded", "quota-enforced",
          "sharing-verified", "queues-fair", "monitoring-alert", "update-rehearsed", "tenant-isolation",
          "registry-policy", "audit-trail", "gpu-access-by-request", "runbooks")

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


def host_with_driver(root, capture, count, mig_gpus):
    """A GPU host with its own driver (the GPUCluster stack installs none): nvidia-smi prints the real
    capture's row once per GPU, with the GPU's index, UUID, bus id and MIG mode."""
    demo = _demo()
    demo.host_root_common(root)
    header, row = [line for line in demo.fixture(capture).splitlines() if line.strip()][:2]
    names = [c.strip() for c in header.split(", ")]
    rows = [header]
    for idx in range(count):
        cells = dict(zip(names, row.split(", ")))
        mig = "Enabled" if idx in mig_gpus else ("Disabled" if cells["mig.mode.current"] != "[N/A]" else "[N/A]")
        cells.update({"index": str(idx), "count": str(count), "uuid": "GPU-%08d-0000-0000-0000-%012d" % (idx, idx),
                      "pci.bus_id": "00000000:%02X:00.0" % (0x41 + idx), "mig.mode.current": mig,
                      "mig.mode.pending": mig})
        rows.append(", ".join(cells[n] for n in names))
    demo.write(root, "/usr/share/nvidia-smi/query-gpu.csv", "\n".join(rows) + "\n")
    demo.write(root, "/usr/bin/nvidia-smi", "#!/bin/sh\ncat '%s'\n" % os.path.join(
        root, "usr", "share", "nvidia-smi", "query-gpu.csv"), 0o700)
    demo.write(root, "/proc/modules", demo.fixture("lsmod-grep-nvidia__modules-loaded.txt"))
    demo.write(root, "/proc/driver/nvidia/version",
               demo.fixture("proc-driver-nvidia-version__open-kernel-module_565.57.01_ubuntu24.04.txt"))
    return root


def write_overlay(base, kubeconfig, roots):
    """How this machine reaches the hosts, the cluster and the charts; nothing about the platform."""
    inv = os.path.join(str(base), "overlay")
    for sub in ("group_vars", "host_vars"):
        os.makedirs(os.path.join(inv, sub))
    dump = lambda path, data: open(os.path.join(inv, path), "w").write("---\n" + yaml.safe_dump(data))  # noqa: E731
    dump("hosts.yml", {"all": {"children": {"gpu_nodes": {"hosts": dict((h, None) for h in HOSTS)}}}})
    dump("group_vars/all.yml", {
        "gpu_platform_kubeconfig": kubeconfig,
        "ansible_python_interpreter": module_python(),
        # the chart archive of NVIDIA's repository, on this machine
        "gpu_operator_chart_source": "archive",
        "gpu_operator_chart_ref": os.path.join(CHARTS, "gpu-operator-%s.tgz" % CHART),
        "gpu_operator_helm_binary": os.path.join(BIN, "helm"),
        "gpu_operator_wait_timeout": 180, "gpu_operator_wait_stable_for": 2,
        "queues_chart_source": "archive", "queues_chart_ref": KUEUE_CHART,
        "queues_helm_binary": os.path.join(BIN, "helm"), "queues_wait_timeout": 120,
        "monitoring_promtool_check": False,        # promtool is test_monitoring's business
        "acceptance_pod_timeout": 90,
    })
    # the hosts are laid-out roots on this machine: local connection, nothing to install
    dump("group_vars/gpu_nodes.yml", {"ansible_connection": "local", "ansible_become": False,
                                      "node_prereqs_prepare_host": False})
    for host, root in roots.items():
        dump("host_vars/%s.yml" % host, {"node_prereqs_facts_root": root, "node_prereqs_kernel_release": KERNEL,
                                         "gpu_node_facts_root": root, "gpu_node_facts_kernel_release": KERNEL})
    return inv


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("dra-site")
    # tests/clusters/dra.yaml names its CRDs and mig-parted config relative to itself
    sim = testing.start(os.path.join(CLUSTERS, "dra.yaml"), str(base / "run"))
    try:
        roots = dict((host, host_with_driver(str(base / "hosts" / host), *spec)) for host, spec in HOSTS.items())
        inventories = [INVENTORY, write_overlay(base, sim.kubeconfig, roots)]
        # the site's monitoring stack has its namespace (Prometheus itself runs on this machine)
        kubectl(sim, "create", "namespace", "monitoring")

        def play(name, **kw):
            return run_playbook(os.path.join(REPO, "playbooks", name), dict(sim.env), inventory=inventories, **kw)

        started = time.time()
        first = play("site.yml")
        yield {"sim": sim, "play": play, "first": first, "base": base, "seconds": time.time() - started}
    finally:
        sim.stop()


def test_site_builds_the_dra_platform_from_the_inventory(site):
    sim, first = site["sim"], site["first"]
    assert first.rc == 0, "\n".join(first.failure_messages())
    print("site.yml: %.0f s" % site["seconds"])
    # the GPUCluster stack, no ClusterPolicy (the chart refuses both), no device plugin resources
    gpu_cluster = kget(sim, "gpuclusters.nvidia.com", "-A")["items"]
    assert len(gpu_cluster) == 1 and gpu_cluster[0]["status"]["state"] == "ready", gpu_cluster
    assert not (kget(sim, "clusterpolicy") or {"items": []})["items"]
    for host in HOSTS:
        assert "nvidia.com/gpu" not in kget(sim, "node", host)["status"].get("allocatable", {}), host
    # the driver's slices: whole GPUs per node, the MIG node's MIG devices by profile
    slices = kget(sim, "resourceslices")["items"]
    by_node = {}
    for s in slices:
        by_node.setdefault(s["spec"]["nodeName"], []).extend(s["spec"].get("devices") or [])
    types = dict((n, sorted(d["attributes"]["type"]["string"] for d in devs)) for n, devs in by_node.items())
    assert types["gpu-h100-1"] == ["gpu"] * 8 and types["gpu-l40s-1"] == ["gpu"] * 4, types
    assert types[MIG_NODE] == ["gpu"] + ["mig"] * 4, types
    # teams: claim templates, quotas on claims; Kueue with the DeviceClass mappings
    rct = kget(sim, "resourceclaimtemplate", "mig-1g.10gb", "-n", "team-notebooks")
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert kget(sim, "resourcequota", "tenant-quota", "-n", "team-vision")["spec"]["hard"][GPU_KEY] == "12"
    assert kget(sim, "resourceclaimtemplate", "h100x8", "-n", "team-nlp") is not None
    cq = kget(sim, "clusterqueue", "team-vision")
    assert cq["spec"]["cohortName"] == "research"
    gpu = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert (gpu["name"], gpu["nominalQuota"], gpu["borrowingLimit"]) == ("nvidia.com/gpu", 8, 4), gpu
    mig = kget(sim, "clusterqueue", "team-notebooks")["spec"]["resourceGroups"][0]
    assert mig["coveredResources"] == ["nvidia.com/mig"], mig
    config = kget(sim, "configmap", "kueue-manager-config", "-n", "kueue-system")
    assert "deviceClassMappings" in config["data"]["controller_manager_config.yaml"], config["data"]


def test_the_teams_mig_claim_runs_where_the_slices_have_it_and_waits_elsewhere(site):
    """team-notebooks' own template: on the MIG node it runs, pinned to a whole-GPU node it stays Pending."""
    sim = site["sim"]
    assert site["first"].rc == 0
    tolerate = [{"key": "gpu.skaffon.io/workload", "operator": "Exists", "effect": "NoSchedule"}]
    for pod in (claim_pod("mig-anywhere", "team-notebooks", "mig-1g.10gb", tolerations=tolerate),
                claim_pod("mig-wrong", "team-notebooks", "mig-1g.10gb", node="gpu-h100-1", tolerations=tolerate)):
        apply(sim, pod)
    try:
        ran = wait_object(sim, pod_started, "pod", "mig-anywhere", "-n", "team-notebooks")
        assert ran["spec"]["nodeName"] == MIG_NODE, ran["status"]
        waiting = wait_object(sim, pod_unschedulable, "pod", "mig-wrong", "-n", "team-notebooks")
        cond = [c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled"][0]
        assert cond["reason"] == "Unschedulable" and not waiting["spec"].get("nodeName"), cond
    finally:
        kubectl(sim, "delete", "pod", "-n", "team-notebooks", "mig-anywhere", "mig-wrong", "--wait=true")


def test_a_claim_over_the_teams_quota_is_refused_with_the_real_message(site):
    sim = site["sim"]
    assert site["first"].rc == 0
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "too-many", "namespace": "team-vision"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 13}}]}}}
    res = kubectl(sim, "create", "-f", "-", input=json.dumps(claim), check=False)
    assert res.returncode != 0
    assert 'resourceclaims.resource.k8s.io "too-many" is forbidden: exceeded quota: tenant-quota' in res.stderr, \
        res.stderr
    assert "requested: %s=13" % GPU_KEY in res.stderr, res.stderr


def start_prometheus(sim, base):
    """A Prometheus on this machine scraping each GPU node's simulated DCGM exporter and
    kube-state-metrics (the site's monitoring stack brings it; here its pod in namespace monitoring)."""
    from kit.prometheus import (BINARY, DCGM_APP, KSM_IMAGE, KSM_SELECTOR, Prometheus, kube_state_metrics_deployment,
                                scrape_config)
    if BINARY is None:
        return None
    groups = [g for r in kget(sim, "prometheusrules", "-A")["items"] for g in r["spec"]["groups"]]
    for group in groups:
        group["interval"] = "1s"
    kubectl(sim, "apply", "-f", "-", input=json.dumps(kube_state_metrics_deployment("monitoring", KSM_IMAGE)))
    Prometheus.wait(lambda: [p for p in kget(sim, "pods", "-n", "monitoring", "-l", KSM_SELECTOR)["items"]
                             if p["status"].get("phase") == "Running"], 60, "kube-state-metrics Running")
    # kit.prometheus knows the ClusterPolicy's exporter (app nvidia-dcgm-exporter); the GPUCluster's is
    # nvidia-dcgm-exporter-dra, and its ServiceMonitor (jobLabel app) gives its targets that job
    pods = kget(sim, "pods", "-A")["items"]
    for pod in pods:
        if pod["metadata"].get("labels", {}).get("app") == DRA_EXPORTER:
            pod["metadata"]["labels"]["app"] = DCGM_APP
    config = scrape_config(sim.url, pods)
    exporters = [c for c in config["scrape_configs"] if c["job_name"].startswith("dcgm-")]
    for c in exporters:
        c["static_configs"][0]["labels"].update(job=DRA_EXPORTER, container=DRA_EXPORTER)
    assert len(exporters) == len(HOSTS), [c["job_name"] for c in exporters]
    prom = Prometheus(str(base / "prometheus"), config, groups)
    prom.wait(lambda: len(prom.query('up{job="%s"} == 1' % DRA_EXPORTER)) == len(exporters), 60,
              "every exporter scraped")
    prom.wait(lambda: prom.query('up{job="kube-state-metrics"} == 1'), 60, "kube-state-metrics scraped")
    return prom


@pytest.fixture(scope="module")
def verified(site):
    """The hand-over checks with a real Prometheus scraping the simulated DCGM exporters."""
    assert site["first"].rc == 0, site["first"]
    report = site["base"] / "acceptance"
    extra = {"acceptance_report_dir": str(report)}
    prom = start_prometheus(site["sim"], site["base"])
    if prom is not None:
        extra["acceptance_prometheus_url"] = prom.url
    try:
        res = site["play"]("verify.yml", extra_vars=extra)
    finally:
        if prom is not None:
            prom.stop()
    protocol = (report / "acceptance.md").read_text() if (report / "acceptance.md").exists() else ""
    return res, protocol, prom is not None


def test_verify_every_hand_over_check_that_applies_passes(verified):
    res, protocol, with_prometheus = verified
    rows = dict((r[1], (r[2], r[3])) for r in re.findall(
        r"^\| (\d+) \| `([a-z-]+)` .*? \| (PASS|\*\*FAIL\*\*|SKIP) \| (.*)$", protocol, flags=re.M))
    assert list(rows) == list(CHECKS), protocol or res
    status = dict((c, s) for c, (s, _) in rows.items())
    allowed = {} if with_prometheus else {"monitoring-alert": "**FAIL**"}   # no prometheus binary: no alarm
    allowed["audit-trail"] = "SKIP"     # this cluster file keeps no audit log: nothing to read
    # the GPUCluster stack starts with chart v26.7.0: no earlier chart to rehearse an upgrade from
    allowed["update-rehearsed"] = "SKIP"
    # the fairness probe asks nvidia.com/gpu: in DRA mode it says so instead of running
    allowed["queues-fair"] = "SKIP"
    assert "no device plugin serves next to the GPUCluster stack" in rows["queues-fair"][1], rows["queues-fair"]
    bad = dict((c, s) for c, s in status.items() if s != "PASS" and allowed.get(c) != s)
    assert not bad, "checks not PASS: %s\n%s" % (bad, protocol)
    assert res.rc == 0 or allowed, res
    # the DRA forms of the GPU checks
    for check, words in (("gpus-visible", "ResourceSlices"), ("cuda-test", "ResourceClaim"),
                         ("wrong-node-excluded", "MIG profile"), ("quota-enforced", "exceeded quota")):
        assert words in rows[check][1], (check, rows[check])


def test_site_again_changes_nothing(site, verified):
    started = time.time()
    again = site["play"]("site.yml")
    print("site.yml again: %.0f s" % (time.time() - started))
    assert again.rc == 0, "\n".join(again.failure_messages())
    assert again.changed() == 0, "site.yml again changed: %s" % again.changed_tasks()
    for host in HOSTS:
        assert again.changed(host) == 0, "site.yml again changed on %s: %s" % (host, again.changed_tasks(host))
