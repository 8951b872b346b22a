"""Fair share the way KAI's proportion plugin computes it (pure functions).

A reading of kai-scheduler/KAI-Scheduler pkg/scheduler/plugins/proportion
(resource_division.go, resource_share.go, proportion.go): per resource and per
level of the queue tree,
1. every queue gets min(quota, requestable) where requestable = min(request,
   limit) and quota -1 means the whole amount;
2. the rest goes by queue priority (highest first); within one priority in
   rounds by overQuotaWeight among unsatisfied queues, floored to whole
   units; the floored remainders go one unit at a time to the largest
   remainder, ties to the older queue, then by uid;
3. a child level divides its parent's fair share the same way.
kValue/historical usage is not modelled (usage 0, which leaves the weights as
they are).
"""

import math

UNLIMITED = -1.0
RESOURCES = ("gpu", "cpu", "memory")


class Share:
    __slots__ = ("deserved", "fair", "max_allowed", "weight", "allocated", "allocated_np", "request")

    def __init__(self, deserved=0.0, max_allowed=UNLIMITED, weight=0.0, request=0.0, fair=0.0):
        self.deserved = float(deserved)
        self.max_allowed = float(max_allowed)
        self.weight = float(weight)
        self.request = float(request)
        self.fair = float(fair)
        self.allocated = 0.0
        self.allocated_np = 0.0

    def requestable(self):
        if self.max_allowed == UNLIMITED:
            return self.request
        return min(self.max_allowed, self.request)


class Queue:
    def __init__(self, name, parent=None, priority=100, created="", uid=None, shares=None):
        self.name = name
        self.parent = parent
        self.priority = priority
        self.created = created
        self.uid = uid or name
        self.children = []
        self.shares = shares or {r: Share() for r in RESOURCES}

    def order(self):
        return (self.created, self.uid)


def _satisfied(s):
    return s.request <= s.fair or (s.max_allowed != UNLIMITED and s.max_allowed <= s.fair)


def _remaining_requested(s):
    req = s.requestable()
    return 0.0 if req < s.fair else req - s.fair


def set_resource_share(total, res, queues):
    """Divide `total` of resource `res` among sibling queues; returns what is left."""
    remaining = total
    for q in queues:
        s = q.shares[res]
        deserved = total if s.deserved == UNLIMITED else s.deserved
        amount = min(deserved, s.requestable())
        s.fair += amount
        remaining -= amount
    if remaining > 0:
        return divide_over_quota(remaining, res, queues)
    return 0.0


def divide_over_quota(total, res, queues):
    remaining = total
    for prio in sorted({q.priority for q in queues}, reverse=True):
        if remaining <= 0:
            break
        group = sorted((q for q in queues if q.priority == prio), key=Queue.order)
        remaining, leftovers = _up_to_fair_share(remaining, res, group)
        if remaining <= 0 or not leftovers:
            continue
        remaining = _divide_remainder(remaining, res, leftovers)
    return remaining


def _share_weights(queues, res):
    total_w = sum(q.shares[res].weight for q in queues if _remaining_requested(q.shares[res]) > 0)
    if total_w == 0:
        return {}, 0.0
    weights = {}
    for q in queues:
        if _satisfied(q.shares[res]):
            continue
        n = q.shares[res].weight / total_w
        weights[q.uid] = max(0.0, n + 1.0 * (n - 0.0))   # kValue 1, usage 0
    return weights, sum(weights.values())


def _up_to_fair_share(total, res, queues):
    leftovers = {}
    while True:
        another = False
        this_round = total
        weights, wsum = _share_weights(queues, res)
        if wsum == 0:
            break
        for q in queues:
            if total == 0:
                break
            s = q.shares[res]
            if _satisfied(s):
                continue
            requested = _remaining_requested(s)
            if s.weight == 0:
                continue
            fair = this_round * (weights[q.uid] / wsum)
            if requested <= fair:
                give = requested
                leftovers.pop(q.uid, None)
            else:
                give = math.floor(fair) if math.floor(fair) > 0 else 0.0
                if fair - give > 0:
                    leftovers[q.uid] = (q, fair - give)
            if give == 0:
                continue
            s.fair += give
            total -= give
            another = another or requested < fair
        if not another or total == 0:
            break
    return total, list(leftovers.values())


def _divide_remainder(total, res, leftovers):
    leftovers.sort(key=lambda item: (-item[1],) + item[0].order())
    for q, _amount in leftovers:
        if total == 0:
            break
        give = min(1.0, total)
        q.shares[res].fair += give
        total -= give
    return total


def compute(queues, totals):
    """Fair shares of a queue tree: queues {name: Queue} (parents linked), totals {res: amount}."""
    tops = [q for q in queues.values() if not q.parent]
    _level(tops, totals, queues)


def _level(level, totals, queues):
    if not level:
        return
    level = sorted(level, key=Queue.order)
    for res in RESOURCES:
        set_resource_share(totals.get(res, 0.0), res, level)
    for q in level:
        kids = [queues[c] for c in q.children if c in queues]
        _level(kids, {r: q.shares[r].fair for r in RESOURCES}, queues)
