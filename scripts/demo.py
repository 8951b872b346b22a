#!/usr/bin/env python3
"""`make demo`: the whole platform from the example inventory, then the hand-over protocol.

1. start the simulated cluster that inventories/example describes (tests/clusters/example.yaml:
   two H100 nodes whose hosts have a driver, an L40S node without one, a CPU node);
2. lay out one host root per GPU host from REAL nvidia-smi captures (../shared/fixtures): the demo
   has no SSH hosts, so the detection reads those roots exactly as it reads a real host;
3. run playbooks/site.yml with `-i inventories/example -i <overlay>`: the overlay only says how
   this machine reaches the hosts and where the real chart archives are (../shared, as an
   air-gapped site keeps them); every platform setting is the example inventory's;
4. rehearse the way back: upgrade v26.3.3 -> v26.7.0, roll back, upgrade again;
5. start a real Prometheus (Debian package prometheus) that scrapes the simulated DCGM exporters,
   kube-state-metrics (allowlist from the inventory's kube_prometheus_stack_values) and KAI's queue
   controller, and evaluates the installed PrometheusRule;
6. run playbooks/verify.yml and print the protocol (acceptance.md);
7. run playbooks/workload_acceptance.yml (team-vision trains, team-inference serves; its
   labels-exported step reads that Prometheus) and print the summary of its report (workload-acceptance.md).
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, ".venv", "bin")
# The tests run the demo with their own ansible-playbook command line (a JSON list) and module
# interpreter: the venv's, with the test session's module payload cache and warm interpreters
# (tests/kit/ansible_playbook.py, tests/kit/zygote.py).
ANSIBLE_PLAYBOOK = (json.loads(os.environ["DEMO_ANSIBLE_PLAYBOOK"]) if os.environ.get("DEMO_ANSIBLE_PLAYBOOK")
                    else [os.path.join(BIN, "ansible-playbook")])
MODULE_PYTHON = os.environ.get("DEMO_PYTHON_INTERPRETER") or os.path.join(BIN, "python")
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
FIXTURES = os.path.join(SHARED, "fixtures", "nvidia-smi")
CLUSTER_FILE = os.path.join(REPO, "tests", "clusters", "example.yaml")
CHARTS = os.path.join(SHARED, "upstream", "gpu-operator", "charts")
KAI_CHART = os.path.join(SHARED, "upstream", "kai-scheduler", "charts", "kai-scheduler-v0.17.0.tgz")
KERNEL = "6.8.0-45-generic"
HOSTS = {"gpu-h100-1": "h100", "gpu-h100-2": "h100", "gpu-l40s-1": "l40s"}
FROM, TO = "v26.3.3", "v26.7.0"
CLUSTER = {}      # the simulated cluster's kubeconfig, for the demo's own kubectl calls


def fail(msg):
    sys.stderr.write("demo: %s\n" % msg)
    sys.exit(2)


def write(root, path, text, mode=0o644):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)
    os.chmod(full, mode)


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def host_root_common(root):
    write(root, "/etc/os-release", 'ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n')
    write(root, "/usr/src/linux-headers-%s/Makefile" % KERNEL, "")
    os.makedirs(os.path.join(root, "lib", "modules", KERNEL), exist_ok=True)
    os.symlink("/usr/src/linux-headers-%s" % KERNEL, os.path.join(root, "lib", "modules", KERNEL, "build"))


def h100_with_host_driver(root):
    """H100 host with a working driver: nvidia-smi prints the real H100 capture."""
    host_root_common(root)
    capture = os.path.join(FIXTURES, "h100-80gb-hbm3_mig-enabled__590.48.01__query-gpu.csv")
    write(root, "/usr/bin/nvidia-smi", "#!/bin/sh\ncat '%s'\n" % capture, stat.S_IRWXU)
    write(root, "/proc/modules", fixture("lsmod-grep-nvidia__modules-loaded.txt"))
    write(root, "/proc/driver/nvidia/version",
          fixture("proc-driver-nvidia-version__open-kernel-module_565.57.01_ubuntu24.04.txt"))


def l40s_without_driver(root):
    """L40S host, no driver yet: only the PCI devices (vendor 10de) tell it is a GPU host."""
    host_root_common(root)
    write(root, "/proc/modules", "")
    for idx in range(4):
        dev = "/sys/bus/pci/devices/0000:%02x:00.0/" % (0x41 + idx)
        write(root, dev + "vendor", "0x10de\n")
        write(root, dev + "device", "0x26b9\n")
        write(root, dev + "class", "0x030200\n")


def start_cluster(kubeconfig):
    proc = subprocess.Popen([sys.executable, "-m", "simcluster", "--cluster", CLUSTER_FILE,
                             "--kubeconfig", kubeconfig], cwd=REPO, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("ready "):
        proc.kill()
        fail("simulated cluster did not start (said %r)" % line)
    url = CLUSTER["url"] = line.split()[1]
    print("demo: simulated cluster at %s, kubeconfig %s" % (url, kubeconfig))
    return proc, url


def overlay(work, roots, kubeconfig):
    """How this machine reaches the example's cluster, hosts and charts; nothing about the platform itself."""
    inv = os.path.join(work, "overlay")
    os.makedirs(os.path.join(inv, "group_vars"))
    os.makedirs(os.path.join(inv, "host_vars"))
    with open(os.path.join(inv, "hosts.yml"), "w") as handle:
        yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": dict((h, None) for h in HOSTS)}}}}, handle)
    promtool = shutil.which("promtool")
    settings = {
        "gpu_platform_kubeconfig": kubeconfig,         # the cluster, for every role and playbook
        "ansible_connection": "local", "ansible_become": False,
        "ansible_python_interpreter": MODULE_PYTHON,
        "node_prereqs_prepare_host": False,           # the hosts are captures: nothing to install
        "gpu_operator_chart_source": "archive", "gpu_operator_chart_version": FROM,
        "gpu_operator_chart_ref": os.path.join(CHARTS, "gpu-operator-%s.tgz" % FROM),
        "gpu_operator_helm_binary": os.path.join(BIN, "helm"),
        "gpu_operator_wait_timeout": 180, "gpu_operator_wait_stable_for": 2,
        "queues_chart_source": "archive", "queues_chart_ref": KAI_CHART, "queues_chart_version": "v0.17.0",
        "queues_helm_binary": os.path.join(BIN, "helm"),
        "monitoring_promtool_check": bool(promtool), "monitoring_promtool": promtool or "promtool",
        "acceptance_pod_timeout": 90,
        # where this machine reads the API server's audit log (a site: a copy of --audit-log-path)
        "acceptance_audit_log": CLUSTER["url"] + "/_sim/audit",
    }
    with open(os.path.join(inv, "group_vars", "all.yml"), "w") as handle:
        yaml.safe_dump(settings, handle)
    for host, root in roots.items():
        with open(os.path.join(inv, "host_vars", host + ".yml"), "w") as handle:
            yaml.safe_dump({"node_prereqs_facts_root": root, "node_prereqs_kernel_release": KERNEL,
                            "gpu_node_facts_root": root, "gpu_node_facts_kernel_release": KERNEL}, handle)
    return inv


def kget(env, *args):
    out = subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", CLUSTER["kubeconfig"], "get", *args,
                          "-o", "json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def site_stack_values():
    """The example inventory's kube_prometheus_stack_values (group_vars/all/*.yml): what the site
    gives kube-prometheus-stack, which the demo plays for kube-state-metrics."""
    folder = os.path.join(REPO, "inventories", "example", "group_vars", "all")
    for name in sorted(os.listdir(folder)):
        if name.endswith((".yml", ".yaml")):
            with open(os.path.join(folder, name)) as handle:
                values = (yaml.safe_load(handle) or {}).get("kube_prometheus_stack_values")
            if values is not None:
                return values
    return {}


def start_prometheus(work, env, sim_url):
    """A real Prometheus scraping each GPU node's simulated DCGM exporter, kube-state-metrics
    (which a site gets from kube-prometheus-stack; the demo runs its pod with the inventory's
    allowlist) and KAI's queue controller, with the installed rules."""
    sys.path.insert(0, os.path.join(REPO, "tests"))      # the test kit (tests/kit/prometheus.py)
    # the test suite's runner (loopback, temp data dir) and its scrape config of the simulated cluster
    from kit.prometheus import BINARY, KSM_SELECTOR, Prometheus, kube_state_metrics_deployment, scrape_config
    if BINARY is None:
        # make demo installs it (scripts/system_deps.sh); run by hand, stop before the checks, with the fix
        fail("no prometheus binary (Debian package prometheus), which the monitoring-alert check needs: "
             "run `make demo`, or `apt-get install -y prometheus` as root")
    rules = kget(env, "prometheusrules", "-A")["items"]
    groups = [g for r in rules for g in r["spec"]["groups"]]
    for group in groups:
        group["interval"] = "1s"
    subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", CLUSTER["kubeconfig"], "apply", "-f", "-"],
                   env=env, check=True, capture_output=True, text=True,
                   input=json.dumps(kube_state_metrics_deployment("monitoring", labels_allowlist=(
                       site_stack_values().get("kube-state-metrics") or {}).get("metricLabelsAllowlist"))))
    Prometheus.wait(lambda: [p for p in kget(env, "pods", "-n", "monitoring", "-l", KSM_SELECTOR)["items"]
                             if p["status"].get("phase") == "Running"], 60, "kube-state-metrics Running")
    config = scrape_config(sim_url, kget(env, "pods", "-A")["items"])
    exporters = [c for c in config["scrape_configs"] if c["job_name"].startswith("dcgm-")]
    prom = Prometheus(os.path.join(work, "prometheus"), config, groups)
    prom.wait(lambda: len(prom.query('up{job="nvidia-dcgm-exporter"} == 1')) == len(exporters), 60,
              "every exporter scraped")
    prom.wait(lambda: prom.query('up{job="kube-state-metrics"} == 1'), 60, "kube-state-metrics scraped")
    kai = [c for c in config["scrape_configs"] if c["job_name"] == "queue-controller"]
    if kai:
        prom.wait(lambda: prom.query('up{job="queue-controller"} == 1'), 60, "KAI's queue controller scraped")
    print("demo: Prometheus at %s scrapes %d DCGM exporters, kube-state-metrics%s" % (
        prom.url, len(exporters), " and KAI's queue controller" if kai else ""))
    return prom


def workload_acceptance(inventory, env, report, prometheus_url=None):
    """playbooks/workload_acceptance.yml with the example inventory (and the Prometheus the demo
    started, for labels-exported); prints the report's summary (the header and the table of the
    steps). Returns the playbook's rc."""
    print("\ndemo: === the workload acceptance (playbooks/workload_acceptance.yml) ===", flush=True)
    step = time.monotonic()
    extra = ["-e", "workload_acceptance_report_dir=%s" % report]
    if prometheus_url:
        extra += ["-e", "workload_acceptance_prometheus_url=%s" % prometheus_url]
    rc = subprocess.call([*ANSIBLE_PLAYBOOK, *inventory,
                          os.path.join(REPO, "playbooks", "workload_acceptance.yml"), *extra], cwd=REPO, env=env)
    path = os.path.join(report, "workload-acceptance.md")
    if os.path.exists(path):
        with open(path) as handle:
            text = handle.read()
        print("\n" + text.split("\n## ", 1)[0])      # up to the first step's section
    print("demo: workload acceptance %s in %.0f s" % ("passed" if rc == 0 else "FAILED (rc %d)" % rc,
                                                     time.monotonic() - step), flush=True)
    return rc


def main():
    for path in (FIXTURES, CHARTS, KAI_CHART):
        if not os.path.exists(path):
            fail("%s not found (../shared next to the repo)" % path)
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="gpu-platform-demo-")
    roots = {}
    for host, kind in HOSTS.items():
        roots[host] = os.path.join(work, "hosts", host)
        (h100_with_host_driver if kind == "h100" else l40s_without_driver)(roots[host])
    kubeconfig = CLUSTER["kubeconfig"] = os.path.join(work, "kubeconfig")
    proc, sim_url = start_cluster(kubeconfig)
    # The playbooks reach the cluster through the overlay inventory's gpu_platform_kubeconfig, as at a
    # site; the environment names no cluster (a stray KUBECONFIG of this machine must not be used).
    env = dict(((k, v) for k, v in os.environ.items() if k != "KUBECONFIG" and not k.startswith("K8S_AUTH_")),
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "build", "collections"),
               ANSIBLE_PYTHON_INTERPRETER=MODULE_PYTHON, ANSIBLE_DISPLAY_SKIPPED_HOSTS="false")
    inventory = ["-i", os.path.join(REPO, "inventories", "example"), "-i", overlay(work, roots, kubeconfig)]
    # kube-prometheus-stack's namespace: Prometheus itself runs on this machine (step 5)
    subprocess.run([os.path.join(BIN, "kubectl"), "--kubeconfig", kubeconfig, "create", "namespace", "monitoring"],
                   env=env, check=True,
                   capture_output=True)
    report = os.path.join(work, "acceptance")
    upgrade = ["-e", "gpu_operator_chart_version=%s" % TO,
               "-e", "gpu_operator_chart_ref=%s" % os.path.join(CHARTS, "gpu-operator-%s.tgz" % TO)]
    steps = [
        ("the platform from the example inventory", "site.yml", []),
        ("rehearsal: upgrade the GPU Operator to %s" % TO, "gpu_operator_upgrade.yml", upgrade),
        ("rehearsal: roll back", "gpu_operator_rollback.yml", []),
        ("upgrade to %s again" % TO, "gpu_operator_upgrade.yml", upgrade),
    ]
    prom = None
    rc = 0
    try:
        for title, playbook, extra in steps:
            print("\ndemo: === %s (playbooks/%s) ===" % (title, playbook), flush=True)
            step = time.monotonic()
            rc = subprocess.call([*ANSIBLE_PLAYBOOK, *inventory,
                                  os.path.join(REPO, "playbooks", playbook), *extra, *sys.argv[1:]],
                                 cwd=REPO, env=env)
            if rc:
                fail("playbooks/%s failed (rc %d)" % (playbook, rc))
            print("demo: %s took %.0f s" % (playbook, time.monotonic() - step), flush=True)
        if os.environ.get("DEMO_IDEMPOTENCE"):   # the tests: site.yml in check mode, then again: changed=0
            for title, args in (("site.yml in check mode", ["--check", "--diff"]), ("site.yml again", [])):
                print("\ndemo: === %s ===" % title, flush=True)
                # the inventory now pins the version the rehearsal upgraded to
                out = subprocess.run([*ANSIBLE_PLAYBOOK, *inventory,
                                      os.path.join(REPO, "playbooks", "site.yml"), *upgrade, *args], cwd=REPO, env=env,
                                     capture_output=True, text=True)
                changed = sum(int(n) for n in re.findall(r"\schanged=(\d+)", out.stdout.split("PLAY RECAP")[-1]))
                print("demo: %s: rc %d, changed=%d" % (title, out.returncode, changed), flush=True)
                task = None
                for line in out.stdout.splitlines():   # name what changed, for the reader
                    if line.startswith("TASK ["):
                        task = line.strip("* ")
                    elif line.startswith("changed:") and task:
                        print("demo:   changed: %s %s" % (task, line.split("]")[0] + "]"), flush=True)
                if out.returncode:
                    print(out.stdout[-4000:])
                    fail("%s failed" % title)
            # the hand-over checks in check mode: what needs no test pod, nothing written
            print("\ndemo: === verify.yml in check mode ===", flush=True)
            out = subprocess.run([*ANSIBLE_PLAYBOOK, *inventory,
                                  os.path.join(REPO, "playbooks", "verify.yml"), "--check",
                                  "-e", "acceptance_report_dir=%s" % report], cwd=REPO, env=env,
                                 capture_output=True, text=True)
            print("demo: verify.yml in check mode: rc %d, protocol written: %s" % (
                out.returncode, os.path.exists(os.path.join(report, "acceptance.md"))), flush=True)
            if out.returncode:
                print(out.stdout[-4000:])
                fail("verify.yml in check mode failed")
        prom = start_prometheus(work, env, sim_url)
        print("\ndemo: === the hand-over checks (playbooks/verify.yml) ===", flush=True)
        extra = ["-e", "acceptance_report_dir=%s" % report]
        if prom is not None:
            extra += ["-e", "acceptance_prometheus_url=%s" % prom.url]
        rc = subprocess.call([*ANSIBLE_PLAYBOOK, *inventory,
                              os.path.join(REPO, "playbooks", "verify.yml"), *extra], cwd=REPO, env=env)
        protocol = os.path.join(report, "acceptance.md")
        if os.path.exists(protocol):
            with open(protocol) as handle:
                print("\n" + handle.read())
        print("demo: %s in %.0f s" % ("every check passed" if rc == 0 else "checks FAILED (rc %d)" % rc,
                                      time.monotonic() - started))
        rc = workload_acceptance(inventory, env, os.path.join(work, "workload-acceptance"),
                                 prom.url if prom is not None else None) or rc
    finally:
        if prom is not None:
            prom.stop()
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
