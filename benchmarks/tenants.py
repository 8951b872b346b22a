#!/usr/bin/env python3
"""Tenant onboarding speed: playbooks/tenants.yml against a naive one-task-per-object playbook.

    .venv/bin/python benchmarks/tenants.py [--teams 100] [--big 1000] [--naive-teams N]

Each scenario gets a fresh simulated cluster (tests/clusters/default.yaml). A team is what a
platform team typically gives (7 objects): Namespace, ResourceQuota, LimitRange, the default-deny,
same-namespace and DNS NetworkPolicies and one RoleBinding. Prints wall time and API requests
by verb (from /_sim/stats; discovery GETs are listed apart) for the first run, the re-run and
check mode of both playbooks, the ratios, and the first run for --big teams. The naive playbook
loops kubernetes.core.k8s (state: present) over the same rendered objects. With --naive-teams
smaller than --teams the naive figures are measured on fewer teams and scaled linearly (said
so in the output). Nothing is asserted; the targets are printed next to the figures.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, ".venv", "bin")
COLLECTIONS = os.path.join(REPO, "build", "collections")
sys.path.insert(0, REPO)
sys.path.insert(0, COLLECTIONS)

NAIVE = """\
- name: Naive onboarding, one task run per object
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Apply one object
      kubernetes.core.k8s:
        state: present
        definition: "{{ item }}"
      loop: "{{ objects }}"
      loop_control:
        label: "{{ item.kind }} {{ item.metadata.name }}"
"""
WRITES = ("create", "update", "patch", "delete")


def teams(n):
    return [{"name": "bench-%04d" % i, "description": "benchmark team %d" % i,
             "quota": {"requests.cpu": "16", "requests.memory": "64Gi", "pods": "100"},
             "limit_range": {"default": {"cpu": "1", "memory": "2Gi"},
                             "default_request": {"cpu": "250m", "memory": "512Mi"}},
             "groups": {"edit": ["idp-bench-%04d" % i]}} for i in range(n)]


def env_for(sim):
    env = dict(sim.env)
    env.update(ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_PYTHON_INTERPRETER=os.path.join(BIN, "python"),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.null", ANSIBLE_NOCOLOR="1")
    # the simulator's environment names no cluster (simcluster/testing.py): give both playbooks
    # its kubeconfig the way kubernetes.core reads it when no module option is set
    env["K8S_AUTH_KUBECONFIG"] = sim.env.kubeconfig
    return env


def verbs_of(stats):
    """Requests by verb from /_sim/stats; discovery and OpenAPI requests counted apart."""
    verbs = {}
    for resource, by_verb in stats["by_resource"].items():
        for verb, n in by_verb.items():
            key = "discovery" if resource in ("discovery", "openapi", "nonresource") else verb
            verbs[key] = verbs.get(key, 0) + n
    return verbs


def play(sim, playbook, varfile, check=False):
    sim.reset_stats()
    cmd = [os.path.join(BIN, "ansible-playbook"), playbook, "-i", "localhost,", "-c", "local", "-e", "@" + varfile]
    if check:
        cmd.append("--check")
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env_for(sim), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit("%s failed:\n%s\n%s" % (playbook, proc.stdout[-3000:], proc.stderr[-3000:]))
    stats = sim.stats()
    return {"seconds": elapsed, "verbs": verbs_of(stats), "lists_by_kind": dict(
        (r, v.get("list", 0)) for r, v in stats["by_resource"].items() if v.get("list"))}


def scenario(label, n, kind, scale=1.0):
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
    from simcluster import testing
    work = tempfile.mkdtemp(prefix="bench-tenants-")
    team_list = teams(n)
    varfile = os.path.join(work, "vars.json")
    if kind == "role":
        playbook = os.path.join(REPO, "playbooks", "tenants.yml")
        data = {"tenants_list": team_list}
    else:
        playbook = os.path.join(work, "naive.yml")
        with open(playbook, "w", encoding="utf-8") as fh:
            fh.write(NAIVE)
        data = {"objects": tenants.render_all(team_list, tenants.default_settings())}
    with open(varfile, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    objects = len(tenants.render_all(team_list, tenants.default_settings()))
    sim = testing.start("default.yaml", os.path.join(work, "sim"))
    try:
        runs = {"first run": play(sim, playbook, varfile)}
        if label != "big":
            runs["re-run"] = play(sim, playbook, varfile)
            runs["check mode"] = play(sim, playbook, varfile, check=True)
    finally:
        sim.stop()
    if scale != 1.0:
        for run in runs.values():
            run["seconds"] *= scale
            run["verbs"] = dict((k, int(round(v * scale)) if k != "discovery" else v) for k, v in run["verbs"].items())
    return objects, runs


def fmt_verbs(verbs):
    return " ".join("%s=%d" % (k, verbs[k]) for k in sorted(verbs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--big", type=int, default=1000, help="teams for the large first run (0 = skip)")
    parser.add_argument("--naive-teams", type=int, default=None, help="measure the naive loop on fewer teams")
    args = parser.parse_args()
    naive_n = args.naive_teams or args.teams
    objects, role = scenario("role", args.teams, "role")
    _, naive = scenario("naive", naive_n, "naive", scale=float(args.teams) / naive_n)
    print("Tenant onboarding, %d teams (%d objects), fresh simulated cluster per playbook" % (args.teams, objects))
    if naive_n != args.teams:
        print("(naive figures measured on %d teams and scaled x%.1f)" % (naive_n, float(args.teams) / naive_n))
    print("%-11s | %-8s %-46s | %-9s %-40s | %s" % ("run", "tenants", "requests", "naive", "requests", "naive/tenants"))
    for run in ("first run", "re-run", "check mode"):
        r, n = role[run], naive[run]
        print("%-11s | %7.2fs %-46s | %8.2fs %-40s | %6.1fx time, %5.1fx requests"
              % (run, r["seconds"], fmt_verbs(r["verbs"]), n["seconds"], fmt_verbs(n["verbs"]),
                 n["seconds"] / r["seconds"], float(sum(n["verbs"].values())) / max(1, sum(r["verbs"].values()))))
    rerun = role["re-run"]
    print("re-run LISTs by kind (tenants): %s; writes: %d"
          % (json.dumps(rerun["lists_by_kind"], sort_keys=True), sum(rerun["verbs"].get(v, 0) for v in WRITES)))
    print("targets: first run >= 50x faster than naive (%.1fx); re-run <= 1 LIST per kind and 0 writes"
          % (naive["first run"]["seconds"] / role["first run"]["seconds"]))
    if args.big:
        big_objects, big = scenario("big", args.big, "role")
        b = big["first run"]
        print("first run, %d teams (%d objects): %.2fs, %s (target < 60 s)"
              % (args.big, big_objects, b["seconds"], fmt_verbs(b["verbs"])))


if __name__ == "__main__":
    main()
