"""usage_report's arithmetic on a Prometheus matrix (the integration test checks it against a real
Prometheus with backfilled history)."""
import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.monitoring import usage_report as ur
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError


def series(node, pod, ns, values):
    return {"metric": {"node": node, "pod": pod, "namespace": ns}, "values": [[i, str(v)] for i, v in enumerate(values)]}


def test_hours_shares_and_costs():
    util = [series("n1", "a", "t1", [90] * 120 + [0] * 60),       # 60 s samples: 2 h busy, 1 h idle
            series("n2", "b", "t2", [7] * 60),                    # 1 h neither
            series("n2", "c", "t2", [50] * 30)]                   # 0.5 h failed-run (not busy: the pod failed)
    rep = ur.compute(util, {("t2", "c")}, {"n1": "h100", "n2": "l40s"}, {"h100": 4.0}, {"t1": 6},
                     busy_percent=10, idle_percent=5, sample_interval=60)
    t1, t2 = rep["teams"]
    assert (t1["allocated_gpu_hours"], t1["busy_gpu_hours"], t1["idle_gpu_hours"]) == (3.0, 2.0, 1.0)
    assert t1["cost"] == 12.0 and t1["cost_per_unit"] == 2.0 and t1["busy_share"] == 0.6667
    assert (t2["allocated_gpu_hours"], t2["busy_gpu_hours"], t2["failed_run_gpu_hours"], t2["cost"]) == (
        1.5, 0.0, 0.5, None)
    assert rep["rows"][1]["other_gpu_hours"] == 1.0
    md = ur.markdown(rep, "s", "e", "EUR", "model")
    assert "| t1 | 3.0 | 2.0 | 67 % | 0.0 | 1.0 | 0.0 |" in md
    assert "| t2 | 1.5 | 0.0 | 0 % | 1.0 | 0.0 | 0.5 |" in md
    assert "| t1 | 8.00 | 0.00 | 0.00 | 0.00 | 4.00 | 0.00 | 0.00 | 12.00 | 6 | 2.00 |" in md
    assert "| t2 | n/a | 0.00 | 0.00 | 0.00 | n/a | n/a | 0.00 | n/a | n/a | n/a |" in md
    assert ur.csv_text(rep).splitlines()[1] == "t1,h100,3.0,2.0,0.0,1.0,0.0,4.0,8.0,4.0,0.0,12.0"


def test_unknown_node_goes_to_no_pool():
    rep = ur.compute([series("n9", "a", "t1", [90])], set(), {}, sample_interval=3600)
    assert rep["pools"][0]["pool"] == ur.UNKNOWN_POOL
    assert "N/A: Prometheus has no queue backend metrics" in ur.markdown(rep, "s", "e")


def test_priced_report_names_the_pools_without_a_price():
    util = [series("n1", "a", "t1", [90]), series("n9", "b", "t1", [90]), series("n2", "c", "t2", [90])]
    rep = ur.compute(util, set(), {"n1": "h100", "n2": "l40s"}, {"h100": 4.0}, sample_interval=3600)
    assert rep["unpriced"] == [{"pool": ur.UNKNOWN_POOL, "nodes": ["n9"]}, {"pool": "l40s", "nodes": ["n2"]}]
    md = ur.markdown(rep, "s", "e")
    assert "No price for pool (no pool label) (nodes n9): no cost for its GPU hours. The nodes carry no pool " \
           "label (usage_report_pool_label)." in md
    assert "No price for pool l40s (nodes n2): no cost for its GPU hours. Add it to usage_report_prices." in md
    assert ur.compute(util, set(), {}, sample_interval=3600)["unpriced"] == []   # no prices: nothing to say


@pytest.mark.parametrize("args, setting", [
    ((0, {}, {}, 10, 5, 15), "usage_report_end"),
    ((3600, {"h100": "4"}, {}, 10, 5, 15), "usage_report_prices"),
    ((3600, {}, {"t": 0}, 10, 5, 15), "usage_report_units"),
    ((3600, {}, {}, 5, 10, 15), "usage_report_busy_percent"),
    ((3600, {}, {}, 10, 5, 0), "usage_report_sample_interval"),
])
def test_refusals(args, setting):
    with pytest.raises(DomainError) as err:
        ur.validate(*args)
    assert err.value.msg.startswith(setting)
