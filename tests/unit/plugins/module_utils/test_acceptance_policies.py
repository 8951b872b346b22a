"""registry-policy and audit-trail against an in-process simulated API server (real admission, real CEL,
the audit log from the example's policy): PASS with the controls on, FAIL naming the cause with them off."""
import os

import pytest
import yaml

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import runner as acceptance
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance import policies as acceptance_policies
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants
from ansible_collections.skaffon.gpu_platform.plugins.module_utils import audit_policy
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.acceptance.inputs import registry_policies
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import Kube

pytest.importorskip("celpy")
pytest.importorskip("kubernetes")

MIRROR = "registry.airgap.example:5000/mirror"
CUDA = MIRROR + "/nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"
TEAM = "team-vision"


@pytest.fixture
def cluster(tmp_path):
    from kubernetes.dynamic import DynamicClient

    from simcluster import audit
    from simcluster.testing import InProcess
    policy = audit_policy.render([TEAM])
    with InProcess() as srv:
        srv.server.audit = audit.AuditLog(audit.validate_policy(policy), str(tmp_path / "audit.log"))
        kube = Kube(DynamicClient(srv.api_client()), retry_seconds=1)
        settings = tenants.default_settings(allowed_registries=[MIRROR])
        for obj in tenants.render_team({"name": TEAM}, settings):
            kube.create(obj)
        yield srv, kube, tmp_path / "audit.log"


def run(kube, check_id, **params):
    base = dict(test_namespace="gpu-acceptance", cuda_image=CUDA, pod_timeout=5, tolerations=[], teams=[TEAM],
                registry_policy=registry_policies([{"name": TEAM}], [MIRROR]))
    base.update(params)
    ctx = acceptance.Context(kube, base, clock=iter(range(100000)).__next__, sleep=lambda s: None)
    return acceptance.run(ctx, [check_id], acceptance.CHECKS)[0]


def test_registry_policy_passes_then_fails_naming_the_cause_when_the_binding_is_gone(cluster):
    srv, kube = cluster[:2]
    res = run(kube, "registry-policy")
    assert res.status == "PASS", res.evidence
    assert any("image %s is not from a registry allowed in namespace %s (allowed: %s)"
               % (acceptance_policies.FOREIGN_IMAGE, TEAM, MIRROR) in e for e in res.evidence), res.evidence
    assert any("the platform's image %s: admitted" % CUDA in e for e in res.evidence)
    kube.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "skaffon-registries-" + TEAM)
    off = run(kube, "registry-policy")
    assert off.status == "FAIL"
    assert off.summary == ("a pod with the foreign image %s was admitted in %s (the registry policy or its binding "
                           "is missing: run the tenants role)" % (acceptance_policies.FOREIGN_IMAGE, TEAM))


def test_registry_policy_fails_when_it_refuses_the_platforms_own_image(cluster):
    srv, kube = cluster[:2]
    res = run(kube, "registry-policy", cuda_image="nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0")
    assert res.status == "FAIL" and "refuses the platform's own image nvcr.io/nvidia" in res.summary


def test_registry_policy_skips_without_allowed_registries(cluster):
    srv, kube = cluster[:2]
    res = run(kube, "registry-policy", registry_policy=registry_policies([{"name": TEAM}], []))
    assert res.status == "SKIP" and "tenants_allowed_registries" in res.summary


def test_audit_trail_passes_from_the_log_file_and_the_url(cluster):
    srv, kube, log = cluster
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-acceptance"}})
    for source in (str(log), srv.url + "/_sim/audit"):
        res = run(kube, "audit-trail", audit_log=source)
        assert res.status == "PASS", (res.summary, res.evidence)
        assert any(e.startswith("Job create: level Request, HTTP 201, image %s on record" % CUDA)
                   for e in res.evidence), res.evidence
        assert "Secret get: level Metadata" in res.evidence
        assert "the Secret's value is not in the log" in res.evidence
    # the check removed what it created
    assert kube.list("batch/v1", "Job", namespace=TEAM)[0] == []


def test_audit_trail_fails_when_the_policy_logs_nothing_and_when_it_logs_secret_content(cluster):
    from simcluster import audit
    srv, kube, log = cluster
    srv.server.audit = audit.AuditLog({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                       "rules": [{"level": "None"}]})
    res = run(kube, "audit-trail", audit_log=srv.url + "/_sim/audit")
    assert res.status == "FAIL"
    assert res.summary == "the Job submission is not in the log; the Secret read is not in the log"
    srv.server.audit = audit.AuditLog({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                       "rules": [{"level": "RequestResponse"}]})
    res = run(kube, "audit-trail", audit_log=srv.url + "/_sim/audit")
    assert res.status == "FAIL"
    assert "the Secret read is logged at level RequestResponse: secrets must be logged at Metadata only" in res.summary
    assert "the Secret's value is in the audit log" in res.summary


def test_audit_trail_skips_without_a_log():
    res = run(None, "audit-trail")
    assert res.status == "SKIP" and "acceptance_audit_log unset" in res.summary


def test_the_example_clusters_audit_policy_is_the_one_the_playbook_renders_for_the_example():
    repo = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
    with open(os.path.join(repo, "inventories", "example", "group_vars", "all", "tenants.yml")) as fh:
        teams = yaml.safe_load(fh)["tenants_list"]
    with open(os.path.join(repo, "tests", "clusters", "audit", "example-policy.yaml")) as fh:
        shipped = yaml.safe_load(fh)
    assert shipped == audit_policy.render(audit_policy.team_names(teams))
