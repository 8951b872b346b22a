#!/usr/bin/env python3
"""The whole site (playbooks/site.yml, then verify.yml) at 10, 100 and 1000 GPU nodes, 50 teams.

    .venv/bin/python benchmarks/site_scale.py [--nodes 10,100,1000] [--teams 50] [--forks 20]
                                              [--strategy linear] [--no-verify]

For each size a fresh simulated cluster (simcluster) gets half of the GPU nodes as an H100 pool
(4 GPUs each, host driver 550.54.15, MIG all-1g.10gb, strategy single) and half as an L40S pool
(4 GPUs each, no host driver: the operator installs it; time-slicing 4 replicas per GPU), plus one
CPU node. The inventory is written the way operators write one (inventories/example,
inventories/airgap-kueue): hosts.yml with the pools under gpu_nodes, group_vars/all/*.yml (cluster,
operator, time-slicing, MIG batches, Kueue, --teams teams each with a queue, monitoring),
group_vars/<pool>.yml (pool labels, taints, MIG profile). A second inventory placed after it
(`-i site -i overlay`, as tests/integration/test_site_airgap_kueue.py does) says only how this
machine reaches hosts, cluster and charts: the GPU hosts are `ansible_connection: local` and read
a laid-out host root (gpu_node_facts_root, scripts/demo.py's builders, the tests' facts source).
Hosts of one kind share one root: reading it costs each host the same as a root of its own.

site.yml runs twice (first run, re-run), then verify.yml once. Per run: wall time, the time per
phase (a small callback records when each play and task starts; a task's time runs to the next
task's start, so it includes every host and loop item), API requests by verb from the
simulator's /_sim/stats (reset before each run; discovery/openapi apart), the writes
(create/update/patch/delete) and the tasks with the most host/item runs (per-node work).
The Ansible settings (forks, pipelining, strategy, fact cache) are printed with the results.

One table follows with the targets: re-run of site.yml at 1000 GPU nodes and 50 teams <= 60 s with
0 writes, first run <= 10 min, growth 100 -> 1000 nodes at most linear (<= 10x), and the load
average (the machine is shared). All cluster figures are from the simulated cluster. Nothing is
asserted: it is a benchmark, not a test.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(REPO, "tests"), REPO]


def _link_collection():
    """build/collections/ansible_collections/skaffon/gpu_platform -> this checkout, as the test kit makes it."""
    from kit import plugin  # noqa: F401  (importing it makes the link)


_link_collection()
from kit.inventory import KERNEL, _demo  # noqa: E402  (the tests' host-root builders)
from simcluster_scale import rss  # noqa: E402
from tenants import BIN, COLLECTIONS, WRITES, env_for, fmt_verbs, verbs_of  # noqa: E402

SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
CHARTS = os.path.join(SHARED, "upstream", "gpu-operator", "charts")
OPERATOR_VERSION = "v26.3.3"
KUEUE_CHART = os.path.join(SHARED, "upstream", "kueue", "charts", "kueue-0.19.2.tgz")
CRDS = [os.path.join(SHARED, "upstream", "gpu-operator", "crds", "nvidia.com_clusterpolicies.yaml"),
        os.path.join(SHARED, "upstream", "gpu-operator", "crds", "nvidia.com_nvidiadrivers.yaml")] + [
    os.path.join(SHARED, "upstream", "prometheus-operator", "crds", "monitoring.coreos.com_%s.yaml" % k)
    for k in ("prometheusrules", "servicemonitors", "podmonitors")]
H100_POOL, L40S_POOL = "pool_h100_nvlink_training", "pool_l40s_inference"
H100_FLAVOR, L40S_FLAVOR = "h100-nvlink-training", "l40s-pcie-inference"
RERUN_TARGET, FIRST_TARGET = 60.0, 600.0
PHASES = ("host facts", "driver plan", "node labels", "operator", "sharing", "MIG", "teams", "queues",
          "monitoring", "verify", "other")

# Records when each play and task starts (wall clock), the host/item results per task, the
# failures and the recap; written as JSON to SITE_TIMER_OUT when the playbook ends.
CALLBACK = '''
import json, os, time
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "site_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.events, self.failures, self.cur, self.play = [], [], None, ""
        self.t0 = time.time()

    def _open(self, kind, name, path, role):
        now = time.time()
        if self.cur:
            self.cur["seconds"] = now - self.cur.pop("start")
            self.events.append(self.cur)
        self.cur = {"kind": kind, "name": name, "path": path, "role": role, "play": self.play,
                    "start": now, "runs": 0, "changed": 0}

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name()
        self._open("play", self.play, "", "")
        self._write({})

    def v2_playbook_on_task_start(self, task, is_conditional):
        role = task._role.get_name() if task._role else ""
        self._open("task", task.get_name(), task.get_path() or "", role)

    v2_playbook_on_handler_task_start = lambda self, task: self.v2_playbook_on_task_start(task, False)

    def _count(self, result, failed=False):
        if self.cur is None:
            return
        self.cur["runs"] += 1
        if result._result.get("changed"):
            self.cur["changed"] += 1
        if failed and not result._result.get("_ansible_ignore_errors") and len(self.failures) < 20:
            self.failures.append("%s | %s: %s" % (result._host.get_name(), result._task.get_name(),
                                                   str(result._result.get("msg", ""))[:500]))

    def v2_runner_on_ok(self, result):
        if not result._result.get("results"):
            self._count(result)

    def v2_runner_item_on_ok(self, result):
        self._count(result)

    def v2_runner_item_on_failed(self, result):
        self._count(result, True)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._count(result, True)

    def v2_runner_on_unreachable(self, result):
        self._count(result, True)

    def v2_runner_on_skipped(self, result):
        pass

    def v2_playbook_on_stats(self, stats):
        self._open("end", "", "", "")
        self.cur = None
        recap = {}
        for host in sorted(stats.processed):
            for key, n in stats.summarize(host).items():
                recap[key] = recap.get(key, 0) + n
        self._write(recap)

    def _write(self, recap):
        tmp = os.environ["SITE_TIMER_OUT"] + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"events": self.events, "failures": self.failures, "recap": recap,
                       "seconds": time.time() - self.t0}, fh)
        os.replace(tmp, os.environ["SITE_TIMER_OUT"])
'''


def settings(forks, strategy, cache_dir):
    """What a large site puts in ansible.cfg (here as the equivalent ANSIBLE_* variables)."""
    return {"ANSIBLE_FORKS": str(forks), "ANSIBLE_PIPELINING": "True", "ANSIBLE_STRATEGY": strategy,
            "ANSIBLE_GATHERING": "explicit", "ANSIBLE_CACHE_PLUGIN": "ansible.builtin.jsonfile",
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": cache_dir, "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "86400",
            "ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_RETRY_FILES_ENABLED": "False"}


def pools(n):
    h100 = ["h100-%04d" % i for i in range(n - n // 2)]
    l40s = ["l40s-%04d" % i for i in range(n // 2)]
    return h100, l40s


def cluster_file(n, work, team_count):
    """The simulated cluster; its API server writes an audit log with the policy audit_policy.yml renders
    for the site's teams, as the site's kube-apiserver would (verify.yml's audit-trail reads it)."""
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.audit_policy import render, team_names
    h100, l40s = pools(n)
    nodes = [{"name": h, "gpus": {"model": "NVIDIA-H100-80GB-HBM3", "count": 4, "memory_mib": 81559,
                                  "mig_capable": True},
              "host_driver": "550.54.15", "cpu": "128", "memory": "2Ti",
              "labels": {"topology.kubernetes.io/zone": "a"}} for h in h100]
    nodes += [{"name": h, "gpus": {"model": "NVIDIA-L40S", "count": 4, "memory_mib": 46068, "mig_capable": False},
               "host_driver": None, "cpu": "64", "memory": "512Gi",
               "labels": {"topology.kubernetes.io/zone": "b"}} for h in l40s]
    nodes.append({"name": "cpu-1", "cpu": "32", "memory": "128Gi"})
    policy = os.path.join(work, "audit-policy.yaml")
    _dump(policy, render(team_names(teams(team_count))))
    path = os.path.join(work, "cluster-%d.yaml" % n)
    _dump(path, {"crds": CRDS, "nodes": nodes, "audit": {"policy": policy}})
    return path


def teams(count):
    """Teams as tenants.yml takes them; half queue on the H100 (MIG) pool, half on the L40S pool."""
    out = []
    for i in range(count):
        flavor = H100_FLAVOR if i % 2 == 0 else L40S_FLAVOR
        out.append({
            "name": "team-%03d" % i, "description": "benchmark team %d" % i,
            "quota": {"requests.nvidia.com/gpu": 4, "requests.cpu": "32", "requests.memory": "128Gi",
                      "pods": 100},
            "limit_range": {"default": {"cpu": "2", "memory": "8Gi"},
                            "default_request": {"cpu": "500m", "memory": "2Gi"}},
            "groups": {"edit": ["idp-team-%03d" % i], "view": ["idp-auditors"]},
            "network": {"ingress_from_namespaces": ["monitoring"]},
            "queue": {"cohort": "research", "flavors": [{"name": flavor, "resources": {
                "nvidia.com/gpu": {"nominal": 2, "borrowing_limit": 2}}}]}})
    return out


def site_inventory(n, team_count, work):
    """The inventory an operator writes (no path of this machine in it)."""
    inv = os.path.join(work, "site")
    h100, l40s = pools(n)
    _dump(os.path.join(inv, "hosts.yml"), {"all": {
        "hosts": {"localhost": {"ansible_connection": "local"}},
        "children": {"gpu_nodes": {"children": {
            H100_POOL: {"hosts": dict((h, None) for h in h100)},
            L40S_POOL: {"hosts": dict((h, None) for h in l40s)}}}}}})
    _dump(os.path.join(inv, "group_vars", "all", "cluster.yml"), {
        "gpu_platform_kubeconfig": "/etc/gpu-platform/site.kubeconfig",
        "gpu_platform_label_prefix": "gpu.skaffon.io/",
        # with the jsonfile fact cache of settings(): a re-run detects no host the cache holds
        "gpu_platform_host_detection": "cached",
        "gpu_operator_chart_source": "archive", "gpu_operator_chart_version": OPERATOR_VERSION,
        "gpu_operator_mig_strategy": "single",
        # every L40S node gets the time-slicing config: the pool's hosts, not a list to keep in step
        "gpu_operator_time_slicing": {
            "configmap": "time-slicing-config", "configs": {"any": {"replicas": 4}},
            "nodes": "{{ dict(groups['%s'] | default([]) | product(['any'])) }}" % L40S_POOL}})
    _dump(os.path.join(inv, "group_vars", "all", "tenants.yml"), {
        "tenants_allow_overcommit": True,     # Kueue, not the quota, keeps the pools from oversubscription
        "tenants_list": teams(team_count)})
    _dump(os.path.join(inv, "group_vars", "all", "queues.yml"), {
        "tenants_queue_backend": "kueue", "queues_chart_source": "archive", "queues_chart_version": "0.19.2"})
    _dump(os.path.join(inv, "group_vars", "all", "monitoring.yml"), {
        "monitoring_namespace": "monitoring", "monitoring_rule_labels": {"release": "kube-prometheus-stack"},
        "monitoring_service_monitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"},
                                       "interval": "30s", "honor_labels": True},
        "monitoring_dashboard_label": {"grafana_dashboard": "1"}})
    _dump(os.path.join(inv, "group_vars", "gpu_nodes.yml"), {
        "ansible_user": "ops", "node_prereqs_driver_enabled": None, "node_prereqs_toolkit_enabled": None})
    _dump(os.path.join(inv, "group_vars", H100_POOL + ".yml"), {
        "node_prereqs_pool": {"accelerator": "h100", "topology": "nvlink", "fabric": "ib",
                              "workload": "training", "sharing": "mig", "trust": "mixed"},
        "node_prereqs_pool_taints": [{"key": "workload", "value": "training", "effect": "NoSchedule"}],
        "mig_profile": "all-1g.10gb"})
    _dump(os.path.join(inv, "group_vars", L40S_POOL + ".yml"), {
        "node_prereqs_pool": {"accelerator": "l40s", "topology": "pcie", "fabric": "ethernet",
                              "workload": "inference", "sharing": "time-slicing", "trust": "single"},
        "node_prereqs_pool_taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "mig_profile": None})
    return inv


def overlay_inventory(sim, work, roots):
    """How this machine reaches the hosts (local roots), the cluster and the charts."""
    inv = os.path.join(work, "overlay")
    _dump(os.path.join(inv, "hosts.yml"), {"all": {"children": {"gpu_nodes": {"children": {
        H100_POOL: {}, L40S_POOL: {}}}}}})
    _dump(os.path.join(inv, "group_vars", "all.yml"), {
        "gpu_platform_kubeconfig": sim.kubeconfig,
        "ansible_python_interpreter": os.path.join(BIN, "python"),
        "gpu_operator_chart_ref": os.path.join(CHARTS, "gpu-operator-%s.tgz" % OPERATOR_VERSION),
        "gpu_operator_helm_binary": os.path.join(BIN, "helm"),
        "gpu_operator_wait_timeout": 900, "gpu_operator_wait_stable_for": 2,
        "queues_chart_ref": KUEUE_CHART, "queues_helm_binary": os.path.join(BIN, "helm"),
        "queues_wait_timeout": 300, "mig_timeout": 900,
        "monitoring_promtool": "/usr/bin/promtool",
        "acceptance_pod_timeout": 120, "acceptance_audit_log": sim.url + "/_sim/audit",
        # the hand-over report goes to the work directory, not into the checkout
        "acceptance_report_dir": os.path.join(work, "acceptance")})
    _dump(os.path.join(inv, "group_vars", "gpu_nodes.yml"), {
        "ansible_connection": "local", "ansible_become": False, "node_prereqs_prepare_host": False})
    for pool, root in ((H100_POOL, roots["h100"]), (L40S_POOL, roots["l40s"])):
        _dump(os.path.join(inv, "group_vars", pool + ".yml"), {
            "node_prereqs_facts_root": root, "node_prereqs_kernel_release": KERNEL,
            "gpu_node_facts_root": root, "gpu_node_facts_kernel_release": KERNEL})
    return inv


def host_roots(work):
    demo = _demo()
    if not os.path.isdir(demo.FIXTURES):
        raise SystemExit("needs the real nvidia-smi captures at %s (../shared)" % demo.FIXTURES)
    roots = {"h100": os.path.join(work, "roots", "h100"), "l40s": os.path.join(work, "roots", "l40s")}
    demo.h100_with_host_driver(roots["h100"])
    demo.l40s_without_driver(roots["l40s"])
    return roots


def _dump(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("---\n" + yaml.safe_dump(data, default_flow_style=False, sort_keys=False))


def phase_of(event):
    path, play, name = event["path"], event["play"], event["name"]
    rules = (("roles/node_prereqs/tasks/node_object.yml", "node labels"),
             ("roles/node_prereqs/tasks/plan.yml", "driver plan"),
             ("roles/node_prereqs/", "host facts"),
             ("roles/gpu_operator/tasks/time_slicing", "sharing"),
             ("roles/gpu_operator/", "operator"), ("roles/mig/", "MIG"), ("playbooks/mig.yml", "MIG"),
             ("roles/tenants/", "teams"), ("roles/queues/", "queues"), ("roles/monitoring/", "monitoring"),
             ("gpu_operator_monitoring_values.yml", "monitoring"), ("playbooks/monitoring.yml", "monitoring"),
             ("roles/acceptance/", "verify"), ("playbooks/verify.yml", "verify"))
    for key, phase in rules:
        if key in path:
            return phase
    if play.startswith(("Detect host drivers", "Choose the GPU hosts")) or "Gather GPU node facts" in name:
        return "host facts"
    if play.startswith("Summarise reboots") or "driver plan" in name:
        return "driver plan"
    if play.startswith("Install the NVIDIA GPU Operator"):
        return "operator"
    return "other"


def phases(events):
    out = dict((p, 0.0) for p in PHASES)
    pending = 0.0       # a play's start-up (host variables, batches) counts for its first task
    for ev in events:
        if ev["kind"] == "play":
            pending += ev["seconds"]
            continue
        out[phase_of(ev)] += ev["seconds"] + pending
        pending = 0.0
    out["other"] += pending
    return out


def writes_by_resource(stats):
    return dict((res, dict((v, n) for v, n in by.items() if v in WRITES))
                for res, by in stats["by_resource"].items() if any(v in WRITES for v in by))


def extra_vars(n):
    """What the operator types: MIG in batches of a tenth of the H100 pool. mig.yml's `serial` is a play
    keyword, templated before any inventory variable exists: mig_batch_size in group_vars/all leaves
    serial at 1 and the role refuses the mismatch, so it is given with -e (as docs/mig.md does)."""
    return {"mig_batch_size": max(1, len(pools(n)[0]) // 10)}


def play(sim, name, inventories, env, timeout, extra=None):
    out = os.path.join(os.path.dirname(inventories[-1]), "timer-%s-%d.json" % (name, time.time()))
    sim.reset_stats()
    cmd = [os.path.join(BIN, "ansible-playbook"), os.path.join(REPO, "playbooks", name)]
    for inv in inventories:
        cmd += ["-i", inv]
    if extra:
        cmd += ["-e", json.dumps(extra)]
    run_env = dict(env, SITE_TIMER_OUT=out)
    load = os.getloadavg()[0]
    cpu0, sim0 = _children_cpu(), _proc_cpu(sim.proc.pid)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=run_env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:      # the phases so far still say where the time went
        proc = subprocess.CompletedProcess(cmd, -1, exc.stdout or "", "timed out after %d s" % timeout)
    seconds = time.perf_counter() - start
    # CPU seconds do not grow with the other engineers' load as wall time does: ansible-playbook with
    # its forks, modules, helm and promtool (waited-for children), and the simulator apart
    cpu, sim_cpu = _children_cpu() - cpu0, _proc_cpu(sim.proc.pid) - sim0
    stats = sim.stats()
    try:
        with open(out, encoding="utf-8") as fh:
            timer = json.load(fh)
    except (OSError, ValueError):
        timer = {"events": [], "failures": [], "recap": {}}
    tasks = [e for e in timer["events"] if e["kind"] == "task"]
    return {"rc": proc.returncode, "seconds": seconds, "load": (load, os.getloadavg()[0]),
            "cpu": cpu, "sim_cpu": sim_cpu,
            "phases": phases(timer["events"]), "verbs": verbs_of(stats),
            "writes": sum(stats["by_verb"].get(v, 0) for v in WRITES),
            "writes_by_resource": writes_by_resource(stats), "recap": timer["recap"],
            "failures": timer["failures"] or ([str(proc.stdout)[-1500:] + proc.stderr[-1500:]] if proc.returncode else []),
            "slowest": sorted(tasks, key=lambda e: -e["seconds"])[:10],
            "most_runs": sorted(tasks, key=lambda e: -e["runs"])[:5]}


def run_size(n, args, work):
    from simcluster import testing
    wdir = os.path.join(work, "n%d" % n)
    os.makedirs(wdir)
    t0 = time.perf_counter()
    sim = testing.start(cluster_file(n, wdir, args.teams), os.path.join(wdir, "sim"), timeout=300)
    row = {"nodes": n, "teams": args.teams, "start": time.perf_counter() - t0}
    try:
        sim.run(os.path.join(BIN, "kubectl"), "create", "namespace", "monitoring")
        inventories = [site_inventory(n, args.teams, wdir), overlay_inventory(sim, wdir, host_roots(wdir))]
        cb_dir = os.path.join(wdir, "callbacks")
        os.makedirs(cb_dir)
        with open(os.path.join(cb_dir, "site_timer.py"), "w", encoding="utf-8") as fh:
            fh.write(CALLBACK)
        env = env_for(sim)
        for key in ("KUBECONFIG", "K8S_AUTH_KUBECONFIG"):      # the inventory names the cluster
            env.pop(key, None)
        env.update(settings(args.forks, args.strategy, os.path.join(wdir, "facts")))
        env.update(ANSIBLE_CALLBACK_PLUGINS=cb_dir, ANSIBLE_CALLBACKS_ENABLED="site_timer",
                   ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
        row["settings"] = settings(args.forks, args.strategy, "<dir>")
        row["extra_vars"] = extra_vars(n)
        for label in ("first", "rerun"):
            row[label] = play(sim, "site.yml", inventories, env, args.timeout, extra_vars(n))
            report_run(n, label, row[label])
            save(args, row)
            if row[label]["rc"] != 0:
                break
        if not args.no_verify and row.get("rerun", {}).get("rc") == 0:
            row["verify"] = play(sim, "verify.yml", inventories, env, args.timeout)
            report_run(n, "verify", row["verify"])
        row["rss"] = rss(sim.proc.pid)
        save(args, row)
    finally:
        sim.stop()
    return row


def save(args, row):
    """--json: the figures of this size so far (one file per size), for --table."""
    if args.json:
        with open(args.json % row["nodes"] if "%" in args.json else args.json, "w", encoding="utf-8") as fh:
            json.dump(row, fh)


def _children_cpu():
    import resource
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _proc_cpu(pid):
    with open("/proc/%d/stat" % pid, encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report_run(n, label, r):
    """The detail of one run, to stderr as it finishes (the table comes at the end)."""
    say = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    say("# %d nodes, %s: rc=%d %.1fs (CPU: ansible %.1fs, simulator %.1fs) load %.1f-%.1f recap %s" % (
        n, label, r["rc"], r["seconds"], r["cpu"], r["sim_cpu"], r["load"][0], r["load"][1],
        json.dumps(r["recap"], sort_keys=True)))
    say("#   phases: " + ", ".join("%s %.1fs" % (p, s) for p, s in r["phases"].items() if s >= 0.05))
    say("#   requests (simulated): " + fmt_verbs(r["verbs"]) + "; writes %d %s" % (
        r["writes"], json.dumps(r["writes_by_resource"], sort_keys=True) if r["writes"] else ""))
    for ev in r["slowest"]:
        say("#   slow: %6.1fs %5d runs  %s [%s]" % (ev["seconds"], ev["runs"], ev["name"], _short(ev["path"])))
    for ev in r["most_runs"]:
        say("#   runs: %6.1fs %5d runs  %s [%s]" % (ev["seconds"], ev["runs"], ev["name"], _short(ev["path"])))
    for msg in r["failures"][:5]:
        say("#   FAILED: " + msg.replace("\n", " ")[:600])


def _short(path):
    return path.split("/gpu_platform/")[-1].replace(REPO + "/", "")


def table(rows):
    print("site.yml (first run, re-run) and verify.yml on the SIMULATED cluster (simcluster), %d teams" % rows[0]["teams"])
    s = rows[0]["settings"]
    print("Ansible: forks=%s pipelining=%s strategy=%s gathering=%s fact cache=%s; GPU hosts: local connection, "
          "shared host roots" % (s["ANSIBLE_FORKS"], s["ANSIBLE_PIPELINING"], s["ANSIBLE_STRATEGY"],
                                 s["ANSIBLE_GATHERING"], s["ANSIBLE_CACHE_PLUGIN"]))
    print()
    head = ("| GPU nodes | run | wall | CPU ansible / simulator | " + " | ".join(PHASES) +
            " | requests by verb (simulated) | writes | load |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        for label in ("first", "rerun", "verify"):
            run = r.get(label)
            if not run:
                continue
            name = {"first": "site first", "rerun": "site re-run", "verify": "verify"}[label]
            wall = "%.1f s%s" % (run["seconds"], "" if run["rc"] == 0 else " (rc=%d)" % run["rc"])
            print("| %d | %s | %s | %.0f / %.0f s | %s | %s | %d | %.1f-%.1f |" % (
                r["nodes"], name, wall, run["cpu"], run["sim_cpu"],
                " | ".join("%.1f" % run["phases"].get(p, 0.0) for p in PHASES),
                fmt_verbs(run["verbs"]), run["writes"], run["load"][0], run["load"][1]))
    print()
    by = dict((r["nodes"], r) for r in rows)
    big = by.get(max(by))
    n = big["nodes"]
    if n != 1000:
        print("(the targets are for 1000 GPU nodes; the largest size measured here is %d)" % n)
    if "rerun" in big:
        rr = big["rerun"]
        print("target: re-run at %d GPU nodes, %d teams <= %.0f s (2 cores, shared): %s (%.1f s, simulated cluster)"
              % (n, big["teams"], RERUN_TARGET, "met" if rr["seconds"] <= RERUN_TARGET and rr["rc"] == 0 else "NOT met",
                 rr["seconds"]))
        print("target: re-run writes = 0: %s (%d writes%s)" % (
            "met" if rr["writes"] == 0 else "NOT met", rr["writes"],
            ": " + json.dumps(rr["writes_by_resource"], sort_keys=True) if rr["writes"] else ""))
    if "first" in big:
        fr = big["first"]
        print("target: first run at %d GPU nodes <= %.0f min: %s (%.1f s)" % (
            n, FIRST_TARGET / 60, "met" if fr["seconds"] <= FIRST_TARGET and fr["rc"] == 0 else "NOT met",
            fr["seconds"]))
    if 100 in by and 1000 in by:
        for label, name in (("first", "first run"), ("rerun", "re-run"), ("verify", "verify")):
            if label in by[100] and label in by[1000]:
                g = by[1000][label]["seconds"] / max(by[100][label]["seconds"], 1e-9)
                print("target: growth 100 -> 1000 nodes at most linear (<= 10x), %s: %s (%.1fx)"
                      % (name, "met" if g <= 10 else "NOT met", g))
    sizes = sorted(by)
    if len(sizes) >= 2:
        lo, hi = by[sizes[0]], by[sizes[-1]]
        for label, name in (("first", "first run"), ("rerun", "re-run")):
            if label in lo and label in hi and lo[label]["rc"] == 0 and hi[label]["rc"] == 0:
                per_host = (hi[label]["cpu"] - lo[label]["cpu"]) / (hi["nodes"] - lo["nodes"])
                fixed = lo[label]["cpu"] - per_host * lo["nodes"]
                print("CPU per GPU host, %s: %.2f s (+ %.0f s for the rest); at 1000 GPU nodes that is %.0f CPU-s, "
                      "at least %.0f s on 2 idle cores (extrapolated from %d and %d nodes, not measured)"
                      % (name, per_host, fixed, fixed + 1000 * per_host, (fixed + 1000 * per_host) / 2,
                         lo["nodes"], hi["nodes"]))
    print("load average now: %.1f %.1f %.1f (2 cores shared with other work); simulator RSS %s" % (
        os.getloadavg() + (", ".join("%d nodes %.0f MiB" % (r["nodes"], r["rss"] / 2 ** 20)
                                     for r in rows if "rss" in r),)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10,100,1000")
    parser.add_argument("--teams", type=int, default=50)
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--strategy", default="linear", choices=("linear", "free"))
    parser.add_argument("--timeout", type=int, default=3600, help="per playbook run, seconds")
    parser.add_argument("--no-verify", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (inventories, roots)")
    parser.add_argument("--json", help="write each size's figures here (%%d = nodes), e.g. /tmp/site-%%d.json")
    parser.add_argument("--table", nargs="+", metavar="JSON", help="only print the table of saved sizes")
    args = parser.parse_args()
    if args.table:
        rows = []
        for path in args.table:
            with open(path, encoding="utf-8") as fh:
                rows.append(json.load(fh))
        table(sorted(rows, key=lambda r: r["nodes"]))
        return
    missing = [p for p in CRDS + [CHARTS, KUEUE_CHART] if not os.path.exists(p)]
    if missing:
        raise SystemExit("needs ../shared: %s" % ", ".join(missing))
    work = tempfile.mkdtemp(prefix="site-scale-")
    rows = []
    try:
        for n in [int(x) for x in args.nodes.split(",")]:
            rows.append(run_size(n, args, work))
    finally:
        if rows:
            table(rows)
        if args.keep:
            print("work directory: %s" % work, file=sys.stderr)
        else:
            subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    main()
