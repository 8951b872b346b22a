# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hand-over checks: ids, results and the runner.

Each check is a function check(ctx) -> Result registered under its fixed id. A check
that needs a capability the site does not use says SKIP with the reason; one that
cannot run (an API error, a missing object) says FAIL with what it saw. Objects a
check creates are recorded in ctx.created and removed by the runner afterwards,
also when the check failed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

# The hand-over checks, in protocol order (ids are fixed: reports and AWX read them).
CHECK_IDS = (
    "operator-healthy", "gpus-visible", "cuda-test", "wrong-node-excluded", "quota-enforced",
    "sharing-verified", "queues-fair", "monitoring-alert", "update-rehearsed", "tenant-isolation",
    "registry-policy", "audit-trail", "gpu-access-by-request", "runbooks",
)
TITLES = {
    "operator-healthy": "GPU Operator healthy",
    "gpus-visible": "GPUs visible on every GPU node",
    "cuda-test": "CUDA test workload runs",
    "wrong-node-excluded": "GPU pods never land on a node without the GPU",
    "quota-enforced": "Team quota enforced",
    "sharing-verified": "Sharing mode as configured",
    "queues-fair": "Queues share fairly, gangs start whole",
    "monitoring-alert": "Metrics present, a GPU failure fires the alarm",
    "update-rehearsed": "Operator upgrade and rollback rehearsed",
    "tenant-isolation": "Teams isolated on the network",
    "registry-policy": "Team pods only run images from the allowed registries",
    "audit-trail": "Job submission and secret access are in the audit log",
    "runbooks": "Runbooks exist and are linked from the alerts",
    "gpu-access-by-request": "GPUs only through a resource request",
}

CHECKS = {}


def check(check_id):
    def register(fn):
        CHECKS[check_id] = fn
        return fn
    return register


class Result(object):
    def __init__(self, check_id, status, summary, evidence=None):
        self.id = check_id
        self.status = status
        self.summary = summary
        self.evidence = list(evidence or [])
        self.seconds = 0.0

    def to_dict(self):
        return dict(id=self.id, title=TITLES[self.id], status=self.status, summary=self.summary,
                    evidence=self.evidence, seconds=round(self.seconds, 2))


class Context(object):
    """What the checks share: the API, the parameters, objects to clean up."""

    def __init__(self, kube, params, clock=time.monotonic, sleep=time.sleep):
        self.kube = kube
        self.params = params
        self.clock = clock
        self.sleep = sleep
        self.created = []  # (apiVersion, kind, name, namespace), removed after every check
        self.at_end = []   # the same, removed after the last check (the test namespace)

    def nodes(self):
        """{name: Node} from one LIST: a check that reads every GPU node makes one request, not one per node."""
        return dict((n["metadata"]["name"], n) for n in self.kube.list("v1", "Node")[0])

    def track(self, obj):
        meta = obj.get("metadata") or {}
        self.created.append((obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")))

    def track_at_end(self, obj):
        meta = obj.get("metadata") or {}
        self.at_end.append((obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")))

    def cleanup(self, final=False):
        leftovers = []
        if final:
            self.created.extend(self.at_end)
            del self.at_end[:]
        while self.created:
            api_version, kind, name, namespace = self.created.pop()
            try:
                self.kube.delete(api_version, kind, name, namespace, propagation="Foreground")
            except ApiError as err:
                leftovers.append(str(err))
        return leftovers


def validate_ids(ids):
    unknown = [i for i in ids if i not in CHECK_IDS]
    if unknown:
        raise DomainError("acceptance_checks names unknown checks %s; the checks are: %s"
                          % (", ".join(unknown), ", ".join(CHECK_IDS)))


def run(ctx, ids, checks=None):
    """Run the checks in protocol order; never raises for a failing check."""
    validate_ids(ids)
    checks = CHECKS if checks is None else checks
    results = []
    for check_id in CHECK_IDS:
        if check_id not in ids:
            continue
        started = ctx.clock()
        try:
            fn = checks.get(check_id)
            result = fn(ctx) if fn else Result(check_id, FAIL, "this collection has no implementation of the check yet")
        except ApiError as err:
            result = Result(check_id, FAIL, "the check could not finish: %s" % err)
        except DomainError as err:
            result = Result(check_id, FAIL, err.msg)
        finally:
            leftovers = ctx.cleanup()
        if leftovers:
            result.evidence.append("cleanup failed: %s" % "; ".join(leftovers))
        result.seconds = ctx.clock() - started
        results.append(result)
    leftovers = ctx.cleanup(final=True)
    if leftovers and results:
        results[-1].evidence.append("cleanup failed: %s" % "; ".join(leftovers))
    return results
