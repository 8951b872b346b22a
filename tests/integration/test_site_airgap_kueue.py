"""The second example site end to end: inventories/airgap-kueue (air-gapped, operator namespace
nvidia-gpu-operator, Kueue with a cohort, every driver from the operator, MIG mixed on the H100
pool, label prefix gpu.example.org/) against tests/clusters/airgap-kueue.yaml.

The committed inventory is used as an operator writes it; a test-only overlay placed after it
(`-i inventories/airgap-kueue -i <overlay>`, as scripts/demo.py overlays inventories/example)
says only how this machine reaches the hosts (host roots), the cluster (kubeconfig) and the
chart archives (../shared). No credential comes from the environment: the environment and
~/.kube/config name a second simulated cluster (the decoy), which must see no request at all.
"""
import json
import os
import re

import pytest
import yaml

from kit.kubectl import kget
from kit.inventory import KERNEL, _demo
from kit.paths import BIN, GPU_OPERATOR_CHARTS as CHARTS, KUEUE_CHART, REPO
from kit.playbook import module_python, run_playbook
from simcluster import testing

INVENTORY = os.path.join(REPO, "inventories", "airgap-kueue")
FROM, TO = "v26.3.3", "v26.7.0"
OPERATOR_NS = "nvidia-gpu-operator"
MIRROR = "registry.airgap.example:5000/"
PREFIX = "gpu.example.org/"
# the GPU hosts of the inventory: model, PCI device id (lspci 10de:xxxx), GPUs
HOSTS = {"gpu-h100-m1": ("0x2330", 4), "gpu-h100-m2": ("0x2330", 4), "gpu-l40s-b1": ("0x26b9", 4)}
L40S_NODE = "gpu-l40s-b1.airgap.example"
CHECKS = ("operator-healthy", "gpus-visible", "cuda-test", "wrong-node-excluded", "quota-enforced",
          "sharing-verified", "queues-fair", "monitoring-alert", "update-rehearsed", "tenant-isolation",
          "registry-policy", "audit-trail", "gpu-access-by-request", "runbooks")

pytestmark = [pytest.mark.cluster("airgap-kueue.yaml"), pytest.mark.slow, pytest.mark.needs_shared]


def host_without_driver(root, device_id, count):
    """A GPU host before the operator's driver: only its PCI devices (vendor 10de) say it has GPUs
    (scripts/demo.py's l40s_without_driver, with the host's device id and GPU count)."""
    demo = _demo()
    demo.host_root_common(root)
    demo.write(root, "/proc/modules", "")
    for idx in range(count):
        dev = "/sys/bus/pci/devices/0000:%02x:00.0/" % (0x41 + idx)
        demo.write(root, dev + "vendor", "0x10de\n")
        demo.write(root, dev + "device", device_id + "\n")
        demo.write(root, dev + "class", "0x030200\n")
    # no nvidia-smi on a host without driver: the detection must find none
    assert not os.path.exists(os.path.join(root, "usr", "bin", "nvidia-smi"))
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
        "gpu_operator_chart_ref": os.path.join(CHARTS, "gpu-operator-%s.tgz" % FROM),
        "gpu_operator_helm_binary": os.path.join(BIN, "helm"),
        "gpu_operator_wait_timeout": 180, "gpu_operator_wait_stable_for": 2,
        "queues_chart_ref": KUEUE_CHART, "queues_helm_binary": os.path.join(BIN, "helm"),
        "queues_wait_timeout": 120,
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
def site(simcluster, tmp_path_factory):
    base = tmp_path_factory.mktemp("airgap-kueue")
    roots = dict((host, host_without_driver(str(base / "hosts" / host), dev, n)) for host, (dev, n) in HOSTS.items())
    inventories = [INVENTORY, write_overlay(base, simcluster.kubeconfig, roots)]
    # The operator's machine also knows another cluster: its ~/.kube/config, KUBECONFIG and
    # K8S_AUTH_KUBECONFIG all name the decoy. Only the inventory's gpu_platform_kubeconfig may count.
    decoy = testing.start("no-gpu.yaml", str(base / "decoy"))
    env = dict(simcluster.env)          # a plain dict: run_playbook adds no cluster inventory
    env["HOME"] = testing.decoy_home(str(base / "home"), decoy.url)
    env["KUBECONFIG"] = env["K8S_AUTH_KUBECONFIG"] = decoy.kubeconfig
    decoy.reset_stats()
    # the site's monitoring stack has its namespace (Prometheus itself runs on this machine)
    simcluster.run(os.path.join(BIN, "kubectl"), "create", "namespace", "observability")

    def play(name, **kw):
        return run_playbook(os.path.join(REPO, "playbooks", name), env, inventory=inventories, **kw)

    try:
        first = play("site.yml")
        yield {"sim": simcluster, "play": play, "first": first, "base": base, "decoy": decoy}
    finally:
        decoy.stop()


def test_site_builds_the_platform_from_the_inventory(site):
    sim, first = site["sim"], site["first"]
    assert first.rc == 0, first
    policy = kget(sim, "clusterpolicy", "cluster-policy")
    assert policy["status"]["state"] == "ready", policy["status"]
    assert policy["status"]["namespace"] == OPERATOR_NS
    assert policy["spec"]["driver"]["enabled"] is True and policy["spec"]["toolkit"]["enabled"] is True
    assert policy["spec"]["mig"]["strategy"] == "mixed"
    # every operand and the operator itself from the mirror
    pods = kget(sim, "pods", "-n", OPERATOR_NS)["items"]
    images = set(c["image"] for p in pods for c in p["spec"].get("initContainers", []) + p["spec"]["containers"])
    assert images and all(i.startswith(MIRROR) for i in images), sorted(images)
    assert any("nvidia-driver-daemonset" in p["metadata"]["name"] for p in pods)
    # pool labels under the site's prefix; MIG mixed resources on the H100 pool
    h100 = kget(sim, "node", "gpu-h100-m1")
    labels = h100["metadata"]["labels"]
    assert labels[PREFIX + "accelerator"] == "h100" and labels[PREFIX + "workload"] == "interactive"
    assert not [k for k in labels if k.startswith("gpu.skaffon.io/")], labels
    assert {"key": PREFIX + "workload", "value": "interactive", "effect": "NoSchedule"} in h100["spec"]["taints"]
    assert labels["nvidia.com/mig.config"] == "all-balanced" and labels["nvidia.com/mig.config.state"] == "success"
    alloc = h100["status"]["allocatable"]
    assert (alloc.get("nvidia.com/mig-1g.10gb"), alloc.get("nvidia.com/mig-2g.20gb"),
            alloc.get("nvidia.com/mig-3g.40gb")) == ("8", "4", "4"), alloc
    assert kget(sim, "node", L40S_NODE)["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    # Kueue: the flavor selects the pool by the site's prefix; two queues in one cohort that may borrow
    flavor = kget(sim, "resourceflavor", "l40s-pcie-batch")
    assert flavor["spec"]["nodeLabels"][PREFIX + "accelerator"] == "l40s"
    for team in ("team-genomics", "team-climate"):
        cq = kget(sim, "clusterqueue", team)
        assert cq["spec"]["cohortName"] == "research"
        gpu = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
        assert (gpu["name"], gpu["nominalQuota"], gpu["borrowingLimit"]) == ("nvidia.com/gpu", 2, 2), gpu
        assert kget(sim, "localqueue", team, "-n", team)["spec"]["clusterQueue"] == team
    images = [c["image"] for c in kget(sim, "deployment", "kueue-controller-manager", "-n", "kueue-system")[
        "spec"]["template"]["spec"]["containers"]]
    assert all(i.startswith(MIRROR) for i in images), images
    assert kget(sim, "clusterqueue", "team-notebooks") is None        # MIG slices without a queue


@pytest.fixture(scope="module")
def verified(site):
    """Rehearse the operator upgrade and its way back (update-rehearsed), then the hand-over checks
    with a real Prometheus scraping the simulated DCGM exporters."""
    assert site["first"].rc == 0, site["first"]
    upgrade = {"gpu_operator_chart_version": TO,
               "gpu_operator_chart_ref": os.path.join(CHARTS, "gpu-operator-%s.tgz" % TO)}
    for name, extra in (("gpu_operator_upgrade.yml", upgrade), ("gpu_operator_rollback.yml", None)):
        res = site["play"](name, extra_vars=extra)
        assert res.rc == 0, (name, res)
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


def start_prometheus(sim, base):
    """scripts/demo.py's Prometheus: each GPU node's simulated exporter and kube-state-metrics
    (the site's monitoring stack brings it; here its pod in the site's monitoring namespace)."""
    from kit.prometheus import BINARY, KSM_IMAGE, KSM_SELECTOR, Prometheus, kube_state_metrics_deployment, scrape_config
    if BINARY is None:
        return None
    groups = [g for r in kget(sim, "prometheusrules", "-A")["items"] for g in r["spec"]["groups"]]
    for group in groups:
        group["interval"] = "1s"
    sim.run(os.path.join(BIN, "kubectl"), "apply", "-f", "-",
            # air-gapped: the site mirrors the monitoring stack's images too (path layout)
            input=json.dumps(kube_state_metrics_deployment("observability", MIRROR + "mirror/" + KSM_IMAGE.split("/", 1)[1])))
    Prometheus.wait(lambda: [p for p in kget(sim, "pods", "-n", "observability", "-l", KSM_SELECTOR)["items"]
                             if p["status"].get("phase") == "Running"], 60, "kube-state-metrics Running")
    config = scrape_config(sim.url, kget(sim, "pods", "-A")["items"])
    exporters = [c for c in config["scrape_configs"] if c["job_name"].startswith("dcgm-")]
    prom = Prometheus(str(base / "prometheus"), config, groups)
    prom.wait(lambda: len(prom.query('up{job="nvidia-dcgm-exporter"} == 1')) == len(exporters), 60,
              "every exporter scraped")
    prom.wait(lambda: prom.query('up{job="kube-state-metrics"} == 1'), 60, "kube-state-metrics scraped")
    return prom


def test_verify_every_hand_over_check_passes(verified):
    res, protocol, with_prometheus = verified
    rows = dict((r[1], r[2]) for r in re.findall(
        r"^\| (\d+) \| `([a-z-]+)` .*? \| (PASS|\*\*FAIL\*\*|SKIP) \|", protocol, flags=re.M))
    assert list(rows) == list(CHECKS), protocol or res
    allowed = {} if with_prometheus else {"monitoring-alert": "**FAIL**"}   # no prometheus binary: no alarm
    allowed["audit-trail"] = "SKIP"     # this site's cluster file keeps no audit log: nothing to read
    bad = dict((c, s) for c, s in rows.items() if s != "PASS" and allowed.get(c) != s)
    assert not bad, "checks not PASS: %s\n%s" % (bad, protocol)
    assert res.rc == 0 or allowed, res


def test_site_again_changes_nothing(site, verified):
    again = site["play"]("site.yml")
    assert again.rc == 0, again
    assert again.changed() == 0, "site.yml again changed: %s" % again.changed_tasks()
    for host in HOSTS:
        assert again.changed(host) == 0, "site.yml again changed on %s: %s" % (host, again.changed_tasks(host))


def test_quota_change_and_nothing_reached_the_decoy(site, verified):
    """The AWX quota job too, then: the decoy named by ~/.kube/config, KUBECONFIG and
    K8S_AUTH_KUBECONFIG got no request at all (not even discovery) from any playbook."""
    quota = site["play"]("quota_increase.yml", extra_vars={
        "quota_team": "team-genomics", "quota_resource": "requests.cpu", "quota_value": 32,
        "quota_ticket": "CHG-1"})
    assert quota.rc == 0 and quota.changed() == 0, (quota, quota.changed_tasks())   # the value it has
    stats = site["decoy"].stats()
    assert stats["total"] == 0 and stats["dry_run"]["total"] == 0, (
        "requests reached the decoy cluster of ~/.kube/config / KUBECONFIG: %s" % stats["by_resource"])
