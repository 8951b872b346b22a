# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hand-over checks of the security checklist's policies: registry-policy and audit-trail.

registry-policy: in a team namespace that has a registry policy, a pod with an image from a
foreign registry is refused by the ValidatingAdmissionPolicy (dry run: nothing is created),
the refusal names the image, and the platform's own test image is admitted.

audit-trail: a suspended Job (no pod starts) and a Secret created in a team namespace, the
Secret read back; then the audit log must hold the Job's create (with its request, so the
image is on record) and the Secret's get at level Metadata, and the Secret's value nowhere.
The log is read from `audit_log`: a file on the control node (the kube-apiserver's
--audit-log-path, copied from the control plane) or an http(s) URL serving the same JSON
lines (the simulated cluster's /_sim/audit). Without one the check says SKIP: on a managed
cluster the provider's audit log is the record and this collection does not read it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import uuid

from ansible.module_utils.urls import open_url

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import upstream
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.runner import FAIL, PASS, SKIP, Result, check
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError

FOREIGN_IMAGE = "registry-policy-probe.invalid/acceptance/foreign:1"
VAP_KIND = "ValidatingAdmissionPolicy"
POLICY_PREFIX = "skaffon-registries-"      # tenants_registry.POLICY_PREFIX (kept apart: the check reads the cluster)
SMALL = {"cpu": "10m", "memory": "16Mi"}   # a team quota on cpu/memory needs them stated
AUDIT_WAIT = 30                            # seconds a log backend may take to write an event


def _pod(ctx, name, namespace, image):
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.checks import test_pod
    pod = test_pod(ctx, name, SMALL, image=image)
    pod["metadata"]["namespace"] = namespace
    pod["spec"]["containers"][0]["resources"]["requests"] = dict(SMALL)
    pod["spec"].pop("tolerations", None)
    return pod


def _dry_run(ctx, pod):
    """None when admitted, else the ApiError."""
    try:
        ctx.kube.create(pod, dry_run=True)
    except ApiError as err:
        return err
    return None


@check("registry-policy")
def registry_policy(ctx):
    teams = [t for t in ctx.params.get("registry_policy") or [] if t.get("registries")]
    if not teams:
        return Result("registry-policy", SKIP, "no team has a registry policy (tenants_allowed_registries and every "
                      "team's images.registries are empty): images come from anywhere")
    team = sorted(teams, key=lambda t: bool(t.get("require_digest")))[0]   # one that admits tags, if any
    ns, allowed = team["namespace"], team["registries"]
    evidence = ["namespace %s: allowed registries %s%s" % (ns, ", ".join(allowed),
                                                           ", digests only" if team.get("require_digest") else "")]
    name = POLICY_PREFIX + ns
    policy = ctx.kube.get(upstream.VAP_API_VERSION, VAP_KIND, name)
    binding = ctx.kube.get(upstream.VAP_API_VERSION, VAP_KIND + "Binding", name)
    evidence.append("%s %s: %s; binding: %s"
                    % (VAP_KIND, name, "present" if policy else "missing", "present" if binding else "missing"))
    err = _dry_run(ctx, _pod(ctx, "acceptance-foreign-image", ns, FOREIGN_IMAGE))
    if err is None:
        return Result("registry-policy", FAIL, "a pod with the foreign image %s was admitted in %s%s" % (
            FOREIGN_IMAGE, ns, "" if policy and binding else " (the registry policy or its binding is missing: "
                                                             "run the tenants role)"), evidence)
    evidence.append("dry-run pod with %s: HTTP %s: %s" % (FOREIGN_IMAGE, err.status, err.message))
    if err.status != 403 or VAP_KIND not in (err.message or "") or FOREIGN_IMAGE not in (err.message or ""):
        return Result("registry-policy", FAIL, "refused, but not by the registry policy naming the image", evidence)
    if not team.get("require_digest"):
        own = ctx.params["cuda_image"]
        err = _dry_run(ctx, _pod(ctx, "acceptance-allowed-image", ns, own))
        evidence.append("dry-run pod with the platform's image %s: %s" % (
            own, "admitted" if err is None else "HTTP %s: %s" % (err.status, err.message)))
        if err is not None and VAP_KIND in (err.message or ""):
            return Result("registry-policy", FAIL, "the registry policy refuses the platform's own image %s: "
                          "mirror it or allow its registry (acceptance_cuda_image)" % own, evidence)
    return Result("registry-policy", PASS, "%s refuses a pod with %s, naming it" % (ns, FOREIGN_IMAGE), evidence)


# -- audit-trail -----------------------------------------------------------------------------------------

def read_audit_log(source, validate_certs=True):
    """The events of the log at `source` (a path or an http(s) URL of JSON lines)."""
    if source.startswith(("http://", "https://")):
        try:
            text = open_url(source, timeout=15, validate_certs=validate_certs).read().decode("utf-8", "replace")
        except Exception as exc:   # URLError, HTTPError, timeouts: one message naming the URL
            raise ApiError("GET", "audit log", source, status=getattr(exc, "code", None), message=str(exc),
                           url=source)
    else:
        with open(source, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    events = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events, text


def _find(events, verb, resource, namespace, name):
    for event in events:
        ref = event.get("objectRef") or {}
        if (event.get("verb") == verb and ref.get("resource") == resource and ref.get("namespace") == namespace
                and ref.get("name") == name and event.get("stage") == "ResponseComplete"):
            return event
    return None


@check("audit-trail")
def audit_trail(ctx):
    source = ctx.params.get("audit_log")
    if not source:
        return Result("audit-trail", SKIP, "no audit log reachable (acceptance_audit_log unset): on a self-managed "
                      "control plane point it at a copy of kube-apiserver's --audit-log-path (docs/audit.md); on a "
                      "managed cluster the provider's audit log is the record")
    teams = ctx.params.get("teams") or []
    if not teams:
        return Result("audit-trail", SKIP, "no team in tenants_list: the policy audits job submission in team "
                      "namespaces")
    ns = teams[0]
    suffix = uuid.uuid4().hex[:8]
    name = "acceptance-audit-%s" % suffix
    marker = "audit-marker-%s" % uuid.uuid4().hex
    container = {"name": "job", "image": ctx.params["cuda_image"],
                 "resources": {"requests": dict(SMALL), "limits": dict(SMALL)}}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": ns,
                        "labels": {upstream.LABEL_MANAGED_BY: upstream.MANAGED_BY, upstream.LABEL_ACCEPTANCE: name}},
           "spec": {"suspend": True, "backoffLimit": 0, "ttlSecondsAfterFinished": 60,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": name, "namespace": ns,
                           "labels": {upstream.LABEL_MANAGED_BY: upstream.MANAGED_BY}},
              "stringData": {"token": marker}}
    ctx.kube.create(job)
    ctx.track(job)
    ctx.kube.create(secret)
    ctx.track(secret)
    ctx.kube.get("v1", "Secret", name, ns)
    evidence = ["in %s: created the suspended Job %s and the Secret %s, read the Secret; log %s" % (
        ns, name, name, source)]
    deadline = ctx.clock() + AUDIT_WAIT
    while True:
        events, text = read_audit_log(source, ctx.params.get("audit_log_validate_certs", True))
        submitted = _find(events, "create", "jobs", ns, name)
        read = _find(events, "get", "secrets", ns, name)
        if (submitted and read) or ctx.clock() >= deadline:
            break
        ctx.sleep(1)
    evidence.append("%d event(s) in the log" % len(events))
    failed = []
    if submitted:
        job_spec = (submitted.get("requestObject") or {}).get("spec") or {}
        pod_spec = (job_spec.get("template") or {}).get("spec") or {}
        images = [c.get("image") for c in pod_spec.get("containers") or []]
        evidence.append("Job create: level %s, HTTP %s%s" % (
            submitted.get("level"), (submitted.get("responseStatus") or {}).get("code"),
            ", image %s on record" % ", ".join(images) if images else ", no request body (image not on record)"))
    else:
        failed.append("the Job submission is not in the log")
    if read:
        evidence.append("Secret get: level %s" % read.get("level"))
        if read.get("level") != "Metadata" or "responseObject" in read:
            failed.append("the Secret read is logged at level %s: secrets must be logged at Metadata only" %
                          read.get("level"))
    else:
        failed.append("the Secret read is not in the log")
    if marker in text:
        failed.append("the Secret's value is in the audit log")
    else:
        evidence.append("the Secret's value is not in the log")
    if failed:
        return Result("audit-trail", FAIL, "; ".join(failed), evidence)
    return Result("audit-trail", PASS, "a job submission and a secret read in %s are in the audit log (the secret "
                  "at Metadata, its value absent)" % ns, evidence)
