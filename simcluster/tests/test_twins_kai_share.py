"""kai_share against the worked cases of KAI's own tests
(pkg/scheduler/plugins/proportion/resource_division/resource_division_test.go)."""
import pytest

from simcluster.twins.kai_share import UNLIMITED, Queue, Share, compute, divide_over_quota, set_resource_share


def q(name, deserved, request, weight=2, max_allowed=UNLIMITED, priority=100, fair=0.0, created=""):
    return Queue(name, priority=priority, created=created or name,
                 shares={"gpu": Share(deserved, max_allowed, weight, request, fair),
                         "cpu": Share(), "memory": Share()})


@pytest.mark.parametrize("total,deserved,req,max_allowed,remaining,share", [
    (2, 3, 2, UNLIMITED, 0, 2),        # gives requested GPUs - no remaining
    (3, 3, 2, UNLIMITED, 1, 2),        # with remaining
    (3, 3, 2, 2, 1, 2),                # doesn't give more than allowed
    (7, 3, 5, UNLIMITED, 4, 3),        # gives up to full quota (weight 0)
    (2, 1.5, 2, UNLIMITED, 0.5, 1.5),  # fraction in deserved
    (2, 0, 2, UNLIMITED, 2, 0),        # nothing if deserved is zero (weight 0)
])
def test_single_queue_within_quota(total, deserved, req, max_allowed, remaining, share):
    queue = q("1", deserved, req, weight=0, max_allowed=max_allowed)
    assert set_resource_share(total, "gpu", [queue]) == remaining
    assert queue.shares["gpu"].fair == share


@pytest.mark.parametrize("total,weight,req,max_allowed,remaining,share", [
    (2, 1, 5, UNLIMITED, 0, 5),
    (3, 1, 5, UNLIMITED, 1, 5),
    (2, 1, 5, 4, 1, 4),
    (2, 0, 5, UNLIMITED, 2, 3),
    (2, 1, 4.5, UNLIMITED, 0.5, 4.5),
    (0.5, 1, 5, UNLIMITED, 0, 3.5),     # gives remainder fraction
])
def test_single_queue_over_quota(total, weight, req, max_allowed, remaining, share):
    queue = q("1", 3, req, weight=weight, max_allowed=max_allowed, fair=3)
    assert divide_over_quota(total, "gpu", [queue]) == remaining
    assert queue.shares["gpu"].fair == share


@pytest.mark.parametrize("case", [
    dict(total=15, remaining=3, share={"1": 6, "2": 6}),
    dict(total=12, remaining=0, share={"1": 6, "2": 6}),
    # the done-when: quotas 2 and 2, weights 1 and 3, 8 GPUs, both ask 6 -> 3 and 5
    dict(total=8, remaining=0, weights={"1": 1, "2": 3}, share={"1": 3, "2": 5}),
    dict(total=12, max_allowed={"1": 5}, remaining=1, share={"1": 5, "2": 6}),
    dict(total=11, weights={"1": 1, "2": 4}, request={"1": 10, "2": 10}, remaining=0, share={"1": 3, "2": 8}),
    dict(total=11, remaining=0, share={"1": 6, "2": 5}),          # remainder to the older queue
    dict(total=4, priority={"1": 1, "2": 2}, remaining=0, share={"1": 2, "2": 2}),
    dict(total=6, priority={"1": 1, "2": 2}, remaining=0, share={"1": 2, "2": 4}),
    dict(total=6, weights={"1": 100, "2": 1}, priority={"1": 1, "2": 2}, remaining=0, share={"1": 2, "2": 4}),
])
def test_two_queues(case):
    queues = []
    for name in ("1", "2"):
        queues.append(q(name, 2, case.get("request", {}).get(name, 6), weight=case.get("weights", {}).get(name, 2),
                        max_allowed=case.get("max_allowed", {}).get(name, UNLIMITED),
                        priority=case.get("priority", {}).get(name, 100), created="2025-01-0%s" % name))
    assert set_resource_share(case["total"], "gpu", queues) == case["remaining"]
    assert {x.name: x.shares["gpu"].fair for x in queues} == case["share"]


def test_remainder_with_priorities():
    queues = [q("1", 2, 5, priority=2, created="a"), q("2", 2, 5, priority=2, created="b"),
              q("3", 1, 0, priority=1, created="c")]
    assert set_resource_share(5, "gpu", queues) == 0
    assert [x.shares["gpu"].fair for x in queues] == [3, 2, 0]


def test_hierarchy_children_divide_the_parents_share():
    dept = q("dept", 4, 12, weight=1)
    a, b = q("a", 2, 6, weight=1), q("b", 2, 6, weight=3)
    a.parent = b.parent = "dept"
    dept.children = ["a", "b"]
    other = q("other", 4, 12, weight=1, created="z")
    compute({"dept": dept, "a": a, "b": b, "other": other}, {"gpu": 16, "cpu": 0, "memory": 0})
    assert (dept.shares["gpu"].fair, other.shares["gpu"].fair) == (8, 8)
    assert (a.shares["gpu"].fair, b.shares["gpu"].fair) == (3, 5)
