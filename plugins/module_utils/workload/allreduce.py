# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The step nccl-allreduce: NVIDIA nccl-tests all_reduce_perf across the pool's nodes, as a gang.

The benchmark is the role's rendered Indexed Job (one pod per node with all of its GPUs, the
launcher at completion index 0 running mpirun) with its headless Service, submitted through
the team's queue like any gang. The launcher's log is read by workload/nccl.py.

nccl-tests prints one figure for the whole ring: a degraded node, or a broken link between two
nodes, lowers the ring and nothing says where. On a low (or wrong) result the step finds the
place as people do by hand, with runs pinned to two nodes each (required node affinity on
kubernetes.io/hostname), a pair running at the speed of its slower end:
1. disjoint pairs over all nodes, at the same time (an odd node out is paired with the first
   node afterwards);
2. every node of a bad pair is run again with a node of a good pair (at the same time where
   their nodes differ);
3. a node whose pairs are all bad is named; a bad pair whose two nodes are good with others is
   named as a pair (their path through the fabric); when no pair is good, no single node can
   be told apart and the step says so.
That is at most about 1.5 x nodes runs in a few rounds instead of nodes x (nodes - 1) / 2 for all
pairs; the pairs of a round fit where the whole gang fit (the same nodes, the same GPUs).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import nccl, objects
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.queue import admit, start
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.runner import FAIL, PASS, Result, step

HOSTNAME_LABEL = "kubernetes.io/hostname"
PROGRAM = "all_reduce_perf"
# env variables a launcher script may read for the node count (rewritten for a pair run)
NODE_COUNT_ENV = ("NNODES", "NUM_NODES", "N_NODES", "NODE_COUNT")
_NP = re.compile(r"(?<![\w-])(-np|--np|-n)(\s+|=)(\d+)\b")
# a launcher script that writes the hostfile itself: `for i in $(seq 0 N-1)` over <job>-$i.<service>
_SEQ = re.compile(r"\bseq 0 (\d+)\b")


def _rows(parsed):
    out = []
    for row in parsed.get("rows") or []:
        oop, inp = row.get("out_of_place") or {}, row.get("in_place") or {}
        out.append({"size": row.get("size"), "type": row.get("type"), "redop": row.get("redop"),
                    "time_us": oop.get("time_us"), "algbw_gbps": oop.get("algbw"),
                    "busbw_gbps": oop.get("busbw"), "in_place_busbw_gbps": inp.get("busbw"),
                    "wrong": oop.get("wrong"), "in_place_wrong": inp.get("wrong")})
    return out


def _wrong(parsed):
    """Wrong results: #wrong elements in the table, or out-of-bounds values in its summary."""
    return bool(parsed.get("wrong_total")) or bool(parsed.get("out_of_bounds"))


class Run(object):
    def __init__(self, label, nodes=None):
        self.label = label
        self.nodes = list(nodes or [])
        self.parsed = None
        self.problem = None
        self.evidence = []
        self.figures = {}
        self.sub = None

    @property
    def avg(self):
        return (self.parsed or {}).get("avg_busbw")

    def describe(self):
        if self.problem:
            return "%s on %s: %s" % (self.label, ", ".join(self.nodes) or "no node", self.problem)
        parsed = self.parsed or {}
        what = "avg busbw %s GB/s" % self.avg
        if parsed.get("wrong_total"):
            what += ", %s wrong elements" % parsed["wrong_total"]
        elif parsed.get("errors"):
            what += ", %s" % parsed["errors"][0]
        return "%s on %s: %s" % (self.label, ", ".join(self.nodes), what)


def benchmark(ctx, objs, label):
    """Submit the benchmark Job (+ Service), wait for its launcher, read and remove it."""
    return benchmarks(ctx, [(objs, label)])[0]


def benchmarks(ctx, runs):
    """Several benchmarks at once ([(objs, label)], on disjoint nodes): all submitted, then each
    waited for, read, and removed at the end."""
    started = []
    try:
        for objs, label in runs:
            run = Run(label)
            started.append(run)
            run.sub = start(ctx, objs, "nccl")
        for run in started:
            _finish(ctx, run)
        return started
    finally:
        for objs, _label in runs:
            for body in objs:
                if body["kind"] == "Job":
                    objects.remove(ctx, body, int(ctx.params.get("pod_timeout") or 300))


def _finish(ctx, run):
    timeout = int(ctx.params.get("benchmark_timeout") or 900)
    sub = admit(ctx, run.sub)
    run.evidence.extend(sub.evidence)
    run.nodes = sub.nodes
    if sub.problem:
        run.problem = sub.problem
        return
    pods = {}
    # every node seen: a failed launcher makes the Job controller delete the workers
    seen_nodes = set(sub.nodes)

    def launcher_done():
        found = objects.pods_of(ctx, sub.namespace, sub.name, sub.uid)
        seen_nodes.update(objects.node_of(p) for p in found if objects.node_of(p))
        launchers = [p for p in found if objects.index_of(p) in (0, None)]
        if launchers:
            pods["launcher"] = launchers[0]
        job = ctx.kube.get("batch/v1", "Job", sub.name, sub.namespace)
        launcher = pods.get("launcher")
        if launcher is not None and objects.phase_of(launcher) in ("Succeeded", "Failed"):
            return objects.phase_of(launcher)
        return objects.job_finished(job) if job else "gone"

    outcome = objects.until(ctx, launcher_done, timeout, watch=("v1", "Pod", sub.namespace))
    launcher = pods.get("launcher")
    run.nodes = sorted(seen_nodes)
    text = objects.log_of(ctx, launcher) if launcher is not None else ""
    if outcome is None:
        run.problem = "the launcher did not finish within %d s" % timeout
        return
    run.parsed = nccl.parse(text)
    if not run.parsed.get("rows"):
        said = [e for e in run.parsed.get("errors") or [] if not e.startswith("no result rows")]
        said = said[:1] or [line.strip() for line in text.splitlines() if line.strip()][:2]
        run.problem = "the launcher pod %s ended %s without a result table%s" % (
            objects.name_of(launcher) if launcher else "(none)", outcome,
            (": " + " | ".join(said)) if said else "")


def pair_objects(objs, pair, number):
    """The benchmark objects for two nodes: the same Job and Service, renamed, pinned, sized 2."""
    job = objects.pick(objs, "Job", "nccl")
    old = objects.name_of(job)
    size = objects.job_size(job)
    new = "%s-pair%d" % (old[:50], number)
    out = []
    for body in objs:
        body = copy.deepcopy(body)
        if body["kind"] == "Service":
            if objects.name_of(body) == ((job["spec"].get("template") or {}).get("spec") or {}).get("subdomain"):
                body["metadata"]["name"] = new
            selector = (body.get("spec") or {}).get("selector") or {}
            for key, value in list(selector.items()):
                if value == old:
                    selector[key] = new
        elif body["kind"] == "Job":
            body["metadata"]["name"] = new
            annotations = body["metadata"].get("annotations") or {}
            if annotations.get(upstream.KAI_BATCH_MIN_MEMBER):
                annotations[upstream.KAI_BATCH_MIN_MEMBER] = "2"
            spec = body["spec"]
            spec["parallelism"] = spec["completions"] = 2
            pod_spec = spec.setdefault("template", {}).setdefault("spec", {})
            if pod_spec.get("subdomain") == old:
                pod_spec["subdomain"] = new
            for labels in (spec["template"].get("metadata") or {}).get("labels") or {}, body["metadata"].get("labels") or {}:
                for key, value in list(labels.items()):
                    if value == old:
                        labels[key] = new
            _rename_in_pod_affinity(pod_spec, old, new)
            _pin(pod_spec, pair)
            for container in (pod_spec.get("initContainers") or []) + (pod_spec.get("containers") or []):
                _resize(container, size, old, new)
        out.append(body)
    return out


def _rename_in_pod_affinity(pod_spec, old, new):
    """The gang's one-pod-per-node rule selects its own pods by the Job's name (job-name label): the
    copy's pods must repel each other, not the original's, or both land on one node and measure NVLink."""
    affinity = pod_spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind) or {}
        terms = list(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [w.get("podAffinityTerm") or {} for w in rules.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        for term in terms:
            selector = term.get("labelSelector") or {}
            for key, value in list((selector.get("matchLabels") or {}).items()):
                if value == old:
                    selector["matchLabels"][key] = new
            for expr in selector.get("matchExpressions") or []:
                expr["values"] = [new if v == old else v for v in expr.get("values") or []]


def _pin(pod_spec, pair):
    """Required node affinity on the two hostnames, added to every existing term (terms are ORed)."""
    expression = {"key": HOSTNAME_LABEL, "operator": "In", "values": list(pair)}
    required = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term.setdefault("matchExpressions", []).append(dict(expression))
    required["nodeSelectorTerms"] = terms


def _resize(container, size, old, new):
    """The launcher's view of the run for 2 nodes instead of `size`: mpirun's process count (its
    -np/-n before the program: all_reduce_perf's own -n is its iteration count), the hosts of a
    hostfile the script writes (seq 0 N-1, <job>-$i.<service>), a node-count variable."""
    def scaled(count):
        per_node = count // size if size and count % size == 0 else None
        return per_node * 2 if per_node else count

    def scale(match):
        return "%s%s%d" % (match.group(1), match.group(2), scaled(int(match.group(3))))

    def hosts(match):
        return "seq 0 1" if int(match.group(1)) == size - 1 else match.group(0)
    renamed = re.compile(r"(?<![\w-])%s(?![\w])" % re.escape(old))

    def rewrite(text):
        cut = text.find(PROGRAM)
        head, tail = (text[:cut], text[cut:]) if cut >= 0 else (text, "")
        return renamed.sub(new, _SEQ.sub(hosts, _NP.sub(scale, head) + tail))
    for key in ("command", "args"):
        parts = container.get(key)
        if not parts:
            continue
        out, before_program = [], True
        for number, part in enumerate(parts):
            if not isinstance(part, str):
                out.append(part)
                continue
            if before_program and number and parts[number - 1] in ("-np", "--np", "-n") and part.isdigit():
                part = str(scaled(int(part)))
            before_program = before_program and PROGRAM not in part
            out.append(rewrite(part) if before_program or PROGRAM in part else renamed.sub(new, part))
        container[key] = out
    for env in container.get("env") or []:
        if env.get("name") in NODE_COUNT_ENV and env.get("value") == str(size):
            env["value"] = "2"


def first_round(nodes):
    pairs = [tuple(nodes[i:i + 2]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and len(nodes) > 1:
        pairs.append((nodes[-1], nodes[0]))
    return pairs


def rounds(pairs):
    """The pairs in rounds of disjoint nodes (a node takes part in one run at a time), in order."""
    out = []
    for pair in pairs:
        for group in out:
            if not any(set(pair) & set(other) for other in group):
                group.append(pair)
                break
        else:
            out.append([pair])
    return out


def locate(ctx, objs, nodes, is_bad, evidence):
    """(bad nodes, bad pairs, runs) by pair runs; see the module docstring."""
    runs = []
    verdict = {}

    def pair_runs(pairs):
        pairs = [p for p in pairs if frozenset(p) not in verdict]   # the odd node's pair may come round again
        for group in rounds(pairs):
            batch = [(pair_objects(objs, pair, len(runs) + number + 1), "pair %s+%s" % pair)
                     for number, pair in enumerate(group)]
            for pair, run in zip(group, benchmarks(ctx, batch)):
                runs.append(run)
                evidence.append(run.describe())
                verdict[frozenset(pair)] = bool(run.problem) or is_bad(run)

    pair_runs(first_round(nodes))
    good = sorted(set(n for pair, bad in verdict.items() if not bad for n in pair))
    suspects = sorted(set(n for pair, bad in verdict.items() if bad for n in pair) - set(good))
    if not good:
        return None, [], runs
    second = [(node, good[number % len(good)]) for number, node in enumerate(suspects)]
    pair_runs(second)
    bad_nodes = [node for node, partner in second if verdict[frozenset((node, partner))]]
    bad_pairs = [tuple(sorted(pair)) for pair, bad in verdict.items()
                 if bad and not any(n in bad_nodes for n in pair)]
    return bad_nodes, bad_pairs, runs


@step("nccl-allreduce")
def nccl_allreduce(ctx):
    objs = objects.prepare(ctx, (ctx.params.get("manifests") or {}).get("nccl"), "nccl")
    expected = ctx.params.get("expected_busbw_gbps")
    fraction = float(ctx.params.get("min_busbw_fraction") or 0.8)
    run = benchmark(ctx, objs, "all nodes")
    evidence = list(run.evidence)
    parsed = run.parsed or {}
    figures = {"avg_busbw_gbps": run.avg, "expected_busbw_gbps": expected, "min_busbw_fraction": fraction,
               "rows": _rows(parsed), "nodes": run.nodes, "ranks": len(parsed.get("ranks") or []),
               "wrong_total": parsed.get("wrong_total")}
    if run.problem:
        return Result("nccl-allreduce", FAIL, "nccl-tests did not complete: %s" % run.problem, evidence, figures)
    evidence.append(run.describe())
    if parsed.get("rows") and all((row.get("out_of_place") or {}).get("wrong") in (None, "N/A") for row in parsed["rows"]):
        evidence.append("nccl-tests checked no result (-c 0): wrong results cannot show in this run")
    ctx.state["nccl"] = {"nodes": run.nodes, "avg_busbw_gbps": run.avg}
    nodes = run.nodes
    if _wrong(parsed):
        cause = ("%s wrong elements" % parsed["wrong_total"]) if parsed.get("wrong_total") else (
            "%s out-of-bounds values" % parsed["out_of_bounds"])
        bad_nodes, bad_pairs, _runs = (locate(ctx, objs, nodes, lambda r: _wrong(r.parsed or {}), evidence)
                                       if len(nodes) > 2 else (None, [], []))
        where = _where(bad_nodes, bad_pairs, nodes, "wrong")
        figures["bad_nodes"] = bad_nodes or []
        return Result("nccl-allreduce", FAIL, "wrong results from all_reduce_perf (%s) on the nodes %s%s" % (
            cause, ", ".join(nodes), where), evidence, figures)
    if parsed.get("errors"):
        # the run itself failed (NCCL WARN, a test failure, a cut log): what nccl-tests said, not a figure
        evidence.extend("nccl-tests: %s" % error for error in parsed["errors"][1:5])
        return Result("nccl-allreduce", FAIL, "all_reduce_perf failed on the nodes %s: %s" % (
            ", ".join(nodes), parsed["errors"][0]), evidence, figures)
    if expected is None:
        return Result("nccl-allreduce", PASS, "avg bus bandwidth %s GB/s over %d nodes (no expected figure for the "
                      "pool's fabric: not compared)" % (run.avg, len(nodes)), evidence, figures)
    threshold = float(expected) * fraction
    if run.avg is None or run.avg < threshold:
        bad_nodes, bad_pairs = None, []
        if len(nodes) > 2:
            bad_nodes, bad_pairs, _runs = locate(
                ctx, objs, nodes, lambda r: r.avg is None or r.avg < threshold, evidence)
        figures["bad_nodes"] = bad_nodes or []
        return Result("nccl-allreduce", FAIL, "avg bus bandwidth %s GB/s is below %.1f GB/s (%s x expected %s GB/s) "
                      "on the nodes %s%s" % (run.avg, threshold, fraction, expected, ", ".join(nodes),
                                             _where(bad_nodes, bad_pairs, nodes, "slow")), evidence, figures)
    return Result("nccl-allreduce", PASS, "avg bus bandwidth %s GB/s over %d nodes (expected %s GB/s, at least %.1f)"
                  % (run.avg, len(nodes), expected, threshold), evidence, figures)


def _where(bad_nodes, bad_pairs, nodes, what):
    if len(nodes) <= 2:
        return ": two nodes, pair runs cannot tell them apart"
    if bad_nodes is None:
        return ": every pair of nodes is bad too, so it is not one node (the fabric, or all of them)"
    parts = []
    if bad_nodes:
        plural = len(bad_nodes) > 1
        if what == "slow":
            parts.append("slow node%s %s (every pair with %s is slow)" % (
                "s" if plural else "", ", ".join(bad_nodes), "them" if plural else "it"))
        else:
            parts.append("node%s %s give%s wrong results (every pair with %s does)" % (
                "s" if plural else "", ", ".join(bad_nodes), "" if plural else "s", "them" if plural else "it"))
    if bad_pairs:
        parts.append("bad node pair%s %s (each node is good with others)" % (
            "s" if len(bad_pairs) > 1 else "", ", ".join("%s+%s" % p for p in bad_pairs)))
    if not parts:
        return ": every pair run was good (an intermittent problem, or one of more than two nodes together)"
    return "; " + "; ".join(parts)
