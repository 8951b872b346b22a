# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workload acceptance: step ids, results and the runner.

Each step is a function step(ctx) -> Result registered under its fixed id. A step
measures one thing the guide's minimal test asks for and returns its figures (numbers
or short strings, by name) next to the evidence. A step whose input step failed or was
skipped is not run: it says SKIP "needs <id>, which failed". Steps share what they
found through ctx.state (the training Job of step 1 is the one of steps 4 and 5).
Objects a step creates are recorded with ctx.track and removed after the last step,
also when a step failed: later steps may still use them (the training Job lives from
the queue step to the checkpoint step).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.validation import dns_label_error, label_value_error

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

# The steps, in run order (ids are fixed: the report and junit.xml read them).
STEP_IDS = (
    "queued-job", "data-staged", "nccl-allreduce", "training-window", "checkpoint-restore",
    "labels-exported", "cost-baseline", "inference-serving",
)
TITLES = {
    "queued-job": "Training job admitted through the team's queue",
    "data-staged": "Dataset sample and base weights staged",
    "nccl-allreduce": "All-reduce bus bandwidth across the nodes (nccl-tests)",
    "training-window": "Training throughput over a fixed window",
    "checkpoint-restore": "Checkpoint written, pod deleted, training resumed",
    "labels-exported": "GPU, queue and cost series carry the workload labels",
    "cost-baseline": "Cost per accepted unit against the baseline",
    "inference-serving": "Serving under load, a rollout loses no request",
}
# A step is only meaningful when the steps it reads from passed.
NEEDS = {
    "training-window": ("queued-job",),
    "checkpoint-restore": ("training-window",),
    "labels-exported": ("queued-job",),
    "cost-baseline": ("training-window",),
}
# The label every object of one run carries: cleanup and the metrics steps select by it.
RUN_LABEL = "skaffon.io/acceptance-run"

STEPS = {}


def step(step_id):
    if step_id not in STEP_IDS:
        raise ValueError("unknown workload acceptance step %r" % step_id)

    def register(fn):
        STEPS[step_id] = fn
        return fn
    return register


class Result(object):
    def __init__(self, step_id, status, summary, evidence=None, figures=None):
        self.id = step_id
        self.status = status
        self.summary = summary
        self.evidence = list(evidence or [])
        self.figures = dict(figures or {})
        self.seconds = 0.0

    def to_dict(self):
        return dict(id=self.id, title=TITLES[self.id], status=self.status, summary=self.summary,
                    evidence=self.evidence, figures=self.figures, seconds=round(self.seconds, 2))


def default_run_id(now=None):
    """A label value from the time: sortable, DNS-1123 and short (wla-20261202-071500)."""
    return time.strftime("wla-%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))


class Context(object):
    """What the steps share: the API, the parameters, state between steps, objects to clean up.

    clock is wall time (unix seconds): the programs' log lines carry unix times and the
    recovery time is measured from a delete this process did to a line a pod printed."""

    def __init__(self, kube, params, clock=time.time, sleep=time.sleep, run_label=None):
        self.kube = kube
        self.params = params
        self.clock = clock
        self.sleep = sleep
        self.run_label = run_label or params.get("run_id") or default_run_id()
        self.state = {}
        self.created = []  # (apiVersion, kind, name, namespace), removed after the last step
        self.changed = False  # something was created (the module's `changed`)

    def track(self, obj):
        meta = obj.get("metadata") or {}
        key = (obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        self.changed = True
        if key not in self.created:
            self.created.append(key)

    def untrack(self, obj):
        """A step that removed an object itself (and waited for it) takes it off the list."""
        meta = obj.get("metadata") or {}
        key = (obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        if key in self.created:
            self.created.remove(key)

    def cleanup(self, final=True):
        """Delete what was tracked, newest first; returns the errors (the run goes on)."""
        leftovers = []
        if not final:
            return leftovers
        while self.created:
            api_version, kind, name, namespace = self.created.pop()
            try:
                self.kube.delete(api_version, kind, name, namespace, propagation="Foreground")
            except ApiError as err:
                if err.status != 404:
                    leftovers.append(str(err))
        return leftovers


def validate_params(params):
    """The inputs every step relies on, checked before anything is created."""
    problems = [p for p in (dns_label_error("namespace", params.get("namespace")),
                            params.get("run_id") and label_value_error("run_id", params["run_id"], allow_empty=False))
                if p]
    if problems:
        raise DomainError("; ".join(problems))


def validate_ids(ids):
    unknown = [i for i in ids if i not in STEP_IDS]
    if unknown:
        raise DomainError("workload_acceptance names unknown steps %s; the steps are: %s"
                          % (", ".join(unknown), ", ".join(STEP_IDS)))


def run(ctx, ids, steps=None):
    """Run the steps in STEP_IDS order; never raises for a failing step."""
    validate_ids(ids)
    steps = STEPS if steps is None else steps
    results = []
    by_id = {}
    try:
        for step_id in STEP_IDS:
            if step_id not in ids:
                continue
            started = ctx.clock()
            blocked = [need for need in NEEDS.get(step_id, ()) if need in by_id and by_id[need].status != PASS]
            if blocked:
                result = Result(step_id, SKIP, "needs %s, which %s" % (
                    blocked[0], "failed" if by_id[blocked[0]].status == FAIL else "was skipped"))
            else:
                try:
                    fn = steps.get(step_id)
                    result = fn(ctx) if fn else Result(step_id, FAIL, "this collection has no implementation of the step yet")
                except ApiError as err:
                    result = Result(step_id, FAIL, "the step could not finish: %s" % err)
                except DomainError as err:
                    result = Result(step_id, FAIL, err.msg)
            result.seconds = ctx.clock() - started
            results.append(result)
            by_id[step_id] = result
    finally:
        leftovers = ctx.cleanup(final=True)
    if leftovers and results:
        results[-1].evidence.append("cleanup failed: %s" % "; ".join(leftovers))
    return results
