"""cluster_policy_wait: thin module over ClusterPolicyWaiter (auth options, check mode, failure)."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.modules import cluster_policy_wait as mod


class Exit(Exception):
    pass


class FakeModule(object):
    def __init__(self, check_mode=False, **params):
        self.check_mode = check_mode
        self.params = dict(name="cluster-policy", timeout=5, stable_for=0, accept_reasons=["Reconciled"],
                           operator_namespace="gpu-operator", wait_operator=True)
        self.params.update(params)
        self.result = None

    def exit_json(self, **kw):
        self.result = dict(kw, failed=False)
        raise Exit()

    def fail_json(self, **kw):
        self.result = dict(kw, failed=True)
        raise Exit()


class FakeWaiter(object):
    calls = []

    def __init__(self, client, name, accept_reasons, operator_namespace=None, check_operator=False):
        FakeWaiter.calls.append((name, tuple(accept_reasons), operator_namespace, check_operator))

    def current(self):
        return {"status": {"state": "ready", "conditions": [{"type": "Ready", "status": "True", "reason": "NoGPUNodes"}]}}

    def wait(self, timeout, stable_for=0):
        return False, self.current(), {"state": "ready", "reason": "NoGPUNodes"}, float(timeout)

    def diagnostics(self, obj, summary):
        return ["ClusterPolicy state=ready reason=NoGPUNodes", "hint: no GPU"], {"daemonsets": [], "pods": []}


class Client(object):
    client = object()


@pytest.fixture(autouse=True)
def fake_waiter(monkeypatch):
    FakeWaiter.calls = []
    monkeypatch.setattr(mod, "ClusterPolicyWaiter", FakeWaiter)


def test_argspec_has_kubernetes_core_auth_and_reason_choices():
    spec = mod.argspec()
    for key in ("kubeconfig", "context", "host", "api_key", "validate_certs"):
        assert key in spec
    assert spec["accept_reasons"]["choices"] == ["Reconciled", "NoGPUNodes", "NFDLabelsMissing"]
    assert spec["accept_reasons"]["default"] == ["Reconciled"]


def test_check_mode_reads_once_and_never_fails():
    module = FakeModule(check_mode=True)
    with pytest.raises(Exit):
        mod.run(module, Client())
    assert module.result["failed"] is False and module.result["ready"] is False  # NoGPUNodes not accepted
    assert module.result["waited"] == 0.0 and module.result["changed"] is False


def test_timeout_fails_with_diagnostics():
    module = FakeModule(timeout=7)
    with pytest.raises(Exit):
        mod.run(module, Client())
    res = module.result
    assert res["failed"] and res["ready"] is False and res["waited"] == 7.0
    assert res["msg"].startswith("ClusterPolicy cluster-policy not ready after 7s: ClusterPolicy state=ready")
    assert res["diagnostics"][1] == "hint: no GPU"
    assert FakeWaiter.calls[0] == ("cluster-policy", ("Reconciled",), "gpu-operator", True)
