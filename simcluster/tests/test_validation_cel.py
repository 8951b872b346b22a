"""Real CEL (cel-python): CRD x-kubernetes-validations and ValidatingAdmissionPolicies."""
import pytest

from simcluster.errors import ApiError
from simcluster.validation import cel

from kit.fake_store import FakeStore

VAP = "validatingadmissionpolicies.admissionregistration.k8s.io"
VAPB = "validatingadmissionpolicybindings.admissionregistration.k8s.io"
LABEL = "kai.scheduler/queue"


def rule(text, message="m", **kw):
    v = {"rule": text, "message": message}
    v.update(kw)
    (transition, fn, msg), = cel.compile_rules([v])
    return transition, fn, msg


def test_rules_of_the_real_crds_evaluate():
    _, fn, _ = rule("self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)")
    assert fn([{"key": "a", "operator": "Exists"}], cel.MISSING) is None
    assert fn([{"key": "a", "operator": "Exists", "value": "v"}], cel.MISSING) == ""
    _, fn, _ = rule("!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
                    " self.borrowWithinCohort.policy != 'Never')")
    assert fn({"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
              cel.MISSING) == ""
    assert fn({"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}},
              cel.MISSING) is None


def test_transition_rule_and_message_expression():
    transition, fn, _ = rule("self == oldSelf", "field is immutable")
    assert transition is True
    assert fn("a", "a") is None and fn("a", "b") == ""
    _, fn, _ = rule("self.x <= self.y", messageExpression="'x ' + string(self.x) + ' above ' + string(self.y)")
    assert fn({"x": 3, "y": 2}, cel.MISSING) == "x 3 above 2"


def policy(expression, reason=None, failure="Fail", **match):
    v = {"expression": expression,
         "messageExpression": "'queue ' + object.metadata.labels['%s'] + ' is not ' + request.namespace" % LABEL}
    if reason:
        v["reason"] = reason
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "queue-owner"},
            "spec": {"failurePolicy": failure, "validations": [v], "matchConstraints": {"resourceRules": [
                {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["*"], "scope": "Namespaced"}]}}}


def binding(namespaces, actions=("Deny",)):
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "queue-owner"},
            "spec": {"policyName": "queue-owner", "validationActions": list(actions),
                     "matchResources": {"namespaceSelector": {"matchExpressions": [
                         {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]}}}}


def pod(ns, queue=None, name="p"):
    labels = {LABEL: queue} if queue else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def store():
    s = FakeStore(namespaces=())
    for ns in ("team-a", "team-b", "other"):
        s.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}},
                 admit=False)
    return s


EXPR = ("!has(object.metadata.labels) || !('%s' in object.metadata.labels) || "
        "object.metadata.labels['%s'] == request.namespace") % (LABEL, LABEL)


def test_policy_refuses_another_teams_queue_with_the_servers_message(store):
    store.create(VAP, policy(EXPR, reason="Forbidden"))
    store.create(VAPB, binding(["team-a", "team-b"]))
    store.create("pods", pod("team-a", "team-a", "ok"))
    store.create("pods", pod("team-a", None, "nolabel"))
    with pytest.raises(ApiError) as exc:
        store.create("pods", pod("team-a", "team-b", "steal"))
    assert exc.value.code == 403
    assert exc.value.message == ('pods "steal" is forbidden: ValidatingAdmissionPolicy \'queue-owner\' with '
                                 'binding \'queue-owner\' denied request: queue team-b is not team-a')
    store.create("pods", pod("other", "team-b", "unbound-namespace"))   # binding does not select it


def test_default_reason_is_invalid_422_and_warn_only_binding_admits(store):
    store.create(VAP, policy(EXPR))
    store.create(VAPB, binding(["team-a"], actions=("Warn",)))
    store.create("pods", pod("team-a", "team-b", "warned"))
    b = store.get(VAPB, None, "queue-owner")
    b["spec"]["validationActions"] = ["Deny"]
    store.update(VAPB, b)
    with pytest.raises(ApiError) as exc:
        store.create("pods", pod("team-a", "team-b", "denied"))
    assert exc.value.code == 422


def test_failure_policy_on_an_erring_expression(store):
    store.create(VAP, policy("object.spec.nosuchfield == 1", failure="Ignore"))
    store.create(VAPB, binding(["team-a"]))
    store.create("pods", pod("team-a", None, "ignored"))
    p = store.get(VAP, None, "queue-owner")
    p["spec"]["failurePolicy"] = "Fail"
    store.update(VAP, p)
    with pytest.raises(ApiError) as exc:
        store.create("pods", pod("team-a", None, "failed"))
    assert "resulted in error" in exc.value.message
