"""cluster_policy_wait: thin module over cluster_policy.run (auth options, check mode, failure)."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator import cluster_policy as cp
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.modules import cluster_policy_wait as mod
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube


class FakeModule(object):
    def __init__(self, check_mode=False, served=True, **params):
        self.check_mode = check_mode
        self.kube = FakeKube(served=served)
        self.params = dict(name="my-policy", timeout=5, stable_for=0, accept_reasons=["Reconciled"],
                           operator_namespace="gpu-ops", wait_operator=True, expect_nodes=[])
        self.params.update(params)


class FakeWaiter(cp.ClusterPolicyWaiter):   # the class attributes run() reads (stack, result keys)
    calls = []

    def __init__(self, kube, name, accept_reasons, operator_namespace=None, check_operator=False, expect_nodes=()):
        FakeWaiter.calls.append((name, tuple(accept_reasons), operator_namespace, check_operator, tuple(expect_nodes)))
        self.node_reasons = {}

    def current(self):
        return {"status": {"state": "ready", "conditions": [{"type": "Ready", "status": "True", "reason": "NoGPUNodes"}]}}

    def wait(self, timeout, stable_for=0):
        return False, self.current(), {"state": "ready", "reason": "NoGPUNodes", "exists": True}, float(timeout)

    def diagnostics(self, obj, summary):
        return ["ClusterPolicy my-policy state=ready reason=NoGPUNodes", "hint: no GPU"], {"daemonsets": [], "pods": []}


@pytest.fixture(autouse=True)
def reset():
    FakeWaiter.calls = []


def test_argspec_has_shared_options_and_reason_choices():
    spec = mod.argspec()
    assert spec["accept_reasons"]["choices"] == ["Reconciled", "NoGPUNodes", "NFDLabelsMissing"]
    assert spec["accept_reasons"]["default"] == ["Reconciled"]
    assert spec["timeout"] == {"type": "int", "default": 600} and spec["operator_namespace"] == {"type": "str"}
    assert spec["expect_nodes"] == {"type": "list", "elements": "str", "default": []}


def test_check_mode_reads_once_and_never_fails():
    res = cp.run(FakeModule(check_mode=True), FakeWaiter)
    assert res["ready"] is False  # NoGPUNodes not accepted
    assert res["waited"] == 0.0 and res["changed"] is False


def test_timeout_fails_with_diagnostics_naming_the_parameters():
    with pytest.raises(DomainError) as err:
        cp.run(FakeModule(timeout=7, expect_nodes=["gpu-1"]), FakeWaiter)
    res = err.value.details
    assert res["ready"] is False and res["waited"] == 7.0
    assert err.value.msg.startswith("ClusterPolicy my-policy not ready after 7s: ClusterPolicy my-policy state=ready")
    assert res["diagnostics"][1] == "hint: no GPU"
    assert FakeWaiter.calls[0] == ("my-policy", ("Reconciled",), "gpu-ops", True, ("gpu-1",))


def test_missing_crd_fails_in_normal_mode_and_not_in_check_mode():
    assert cp.run(FakeModule(check_mode=True, served=False), FakeWaiter)["ready"] is False
    with pytest.raises(DomainError, match="CRD .clusterpolicies.nvidia.com. is not installed"):
        cp.run(FakeModule(served=False), FakeWaiter)


def test_negative_timeout_is_refused_naming_it():
    with pytest.raises(DomainError, match="timeout must be >= 0 seconds, got -1"):
        cp.run(FakeModule(timeout=-1), FakeWaiter)


def test_bad_node_names_are_refused_before_any_read():
    module = FakeModule(expect_nodes=["gpu-1", "GPU_2"])
    module.kube = None   # any API call would fail
    with pytest.raises(DomainError, match=r"expect_nodes: 'GPU_2' is not a valid node name"):
        cp.run(module, FakeWaiter)
