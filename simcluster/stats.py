"""Request counters by verb and resource (GET /_sim/stats)."""

import threading
import time


class Stats:
    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        with self._lock:
            self._counts = {}
            self._since = time.time()

    def count(self, verb, resource):
        with self._lock:
            key = (verb, resource)
            self._counts[key] = self._counts.get(key, 0) + 1

    def snapshot(self):
        with self._lock:
            by_verb, by_resource = {}, {}
            for (verb, res), n in self._counts.items():
                by_verb[verb] = by_verb.get(verb, 0) + n
                by_resource.setdefault(res, {})[verb] = n
            elapsed = max(time.time() - self._since, 1e-9)
            total = sum(by_verb.values())
            return {"total": total, "by_verb": by_verb, "by_resource": by_resource,
                    "since": self._since, "seconds": round(elapsed, 3),
                    "requests_per_second": round(total / elapsed, 1)}
