"""Request counters by verb and resource (GET /_sim/stats, POST /_sim/stats/reset).

`dryRun=All` requests are counted apart (under "dry_run") so that a test can assert
"no real writes" for check mode and "one write per changed object" for a real run.
"""

import threading
import time


def _summary(counts):
    by_verb, by_resource = {}, {}
    for (verb, res), n in counts.items():
        by_verb[verb] = by_verb.get(verb, 0) + n
        by_resource.setdefault(res, {})[verb] = n
    return sum(by_verb.values()), by_verb, by_resource


class Stats:
    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        with self._lock:
            self._counts = {}
            self._dry = {}
            self._since = time.time()

    def count(self, verb, resource, dry_run=False):
        with self._lock:
            key = (verb, resource)
            table = self._dry if dry_run else self._counts
            table[key] = table.get(key, 0) + 1

    def snapshot(self):
        with self._lock:
            total, by_verb, by_resource = _summary(self._counts)
            dtotal, dverb, dres = _summary(self._dry)
            elapsed = max(time.time() - self._since, 1e-9)
            return {"total": total, "by_verb": by_verb, "by_resource": by_resource,
                    "dry_run": {"total": dtotal, "by_verb": dverb, "by_resource": dres},
                    "since": self._since, "seconds": round(elapsed, 3),
                    "requests_per_second": round((total + dtotal) / elapsed, 1)}
