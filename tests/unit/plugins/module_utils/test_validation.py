"""core/validation.py: one rule for names, labels and booleans, used by every role's validation."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import driver_plan
from ansible_collections.skaffon.gpu_platform.plugins.filter.mig_rollout import mig_rollout_plan
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import validation as v
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gitops import application
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.gpu_operator.values import operator_values
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.queues import objects as queues
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants import objects as tenants

LONG = "t" * 64


@pytest.mark.parametrize("name,ok", [("team-a", True), ("t" * 63, True), (LONG, False), ("Team", False),
                                     ("-a", False), ("", False), (None, False), (7, False)])
def test_dns_label(name, ok):
    assert v.is_dns_label(name) is ok
    message = v.dns_label_error("tenants_list[0].name", name)
    assert (message is None) is ok
    if not ok:
        assert message.startswith("tenants_list[0].name = %r: " % (name,)) and "at most 63" in message


@pytest.mark.parametrize("key,ok", [("gpu.skaffon.io/pool", True), ("pool", True), ("a" * 64, False),
                                    ("Gpu.io/pool", False), ("/pool", False), ("a b", False), ("", False)])
def test_label_key(key, ok):
    assert (v.label_key_problem(key) is None) is ok
    assert (v.label_key_error("labels", key) is None) is ok


def test_label_value_and_subdomain():
    assert v.is_label_value("") and not v.is_label_value("", allow_empty=False)
    assert v.is_label_value("h100_nvlink.1") and not v.is_label_value("x" * 64) and not v.is_label_value("-a")
    assert v.is_dns_subdomain("node-1.example.com") and not v.is_dns_subdomain("a" * 254)
    assert v.dns_subdomain_problem("A_B").startswith("not a DNS-1123 subdomain: use at most 253")
    assert "not a label value" in v.label_value_error("pool", "x" * 64)


@pytest.mark.parametrize("value,expected", [(True, True), ("yes", True), ("Y", True), ("on", True), ("1", True),
                                            (1, True), ("t", True), (False, False), ("no", False), ("n", False),
                                            ("off", False), (0, False), ("false", False), ("maybe", None),
                                            (None, None), (2, None), ([], None)])
def test_to_bool_is_ansibles_spellings(value, expected):
    assert v.to_bool(value) is expected


def test_as_bool_names_variable_value_and_fix():
    assert v.as_bool(None, "x", default=True) is True
    with pytest.raises(DomainError, match=r"^mig_drain must be true or false, got 'maybe'$"):
        v.as_bool("maybe", "mig_drain")


def test_the_same_spellings_everywhere():
    # mig_rollout_plan used to refuse y/n that gpu_operator_values accepted
    plan = mig_rollout_plan({"h": {"mig_profile": "all-disabled", "mig_drain": "n", "mig_allow_whole_pool": "y",
                                   "mig_timeout": 1, "mig_verify_timeout": 1, "mig_eviction_timeout": 1}}, ["h"])
    assert plan["errors"] == []
    assert operator_values({"driver_enabled": True, "toolkit_enabled": True, "nodes": {}},
                           dcgm_hostengine="y")["dcgm"]["enabled"] is True
    assert driver_plan({}, driver_enabled="n")["driver_enabled"] is False
    # a quoted "false" used to be truthy: Argo CD would have pruned
    assert application("x", {"prune": "false"}, 0, {})["spec"]["syncPolicy"]["automated"]["prune"] is False


def test_queue_team_names_over_63_are_refused_like_tenants():
    teams = [{"name": LONG, "queue": {"parent": "d", "gpu": {"quota": 1}}}]
    with pytest.raises(DomainError) as queue_error:
        queues.render("kai", teams, [{"name": "d", "gpu": {"quota": 4}}])
    assert queue_error.value.msg.startswith("tenants_list[0].name = '%s': not a DNS-1123 label" % LONG)
    assert "at most 63" in queue_error.value.msg
    problems = tenants.validate([{"name": LONG}], tenants.default_settings())
    assert any("tenants_list[%s].name" % LONG in p and "at most 63" in p for p in problems)


def test_filters_translate_domain_errors_to_ansible():
    with pytest.raises(AnsibleFilterError, match="driver_enabled"):
        driver_plan({}, driver_enabled="maybe")
