# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bounded load against an inference Service (workload acceptance, inference step).

    python3 load.py --url http://SVC.NS.svc:8000/v2/health/ready --seconds 60 --concurrency 8

C threads send requests back to back for D seconds (standard library only). A request is an error
when it fails to connect, times out or answers other than 2xx. One JSON object per line:
  {"event": "tick", "requests", "errors", "time"}                         every second
  {"event": "summary", "requests", "errors", "error_rate", "p50_ms", "p90_ms", "p99_ms", "rps",
   "seconds", "time"}                                                     at the end, exit 0
"""

import argparse
import json
import math
import sys
import threading
import time
import urllib.error
import urllib.request


def emit(event, **fields):
    fields.update(event=event, time=round(time.time(), 3))
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def parse(argv):
    parser = argparse.ArgumentParser(description="Send requests to a URL for a fixed time and report latency.")
    parser.add_argument("--url", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    parser.add_argument("--method", default="GET", choices=("GET", "POST"))
    parser.add_argument("--body", default=None, help="request body for POST (JSON text)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.concurrency < 1:
        parser.error("--seconds must be > 0 and --concurrency >= 1")
    return args


def percentile(values, fraction):
    """Nearest-rank percentile of sorted values (None when there are none)."""
    if not values:
        return None
    rank = max(1, int(math.ceil(fraction * len(values))))
    return values[rank - 1]


class Load:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.latencies = []       # ms of the requests that succeeded
        self.requests = 0
        self.errors = 0
        self.last_error = None

    def one(self):
        data = self.args.body.encode() if self.args.body is not None else None
        request = urllib.request.Request(self.args.url, data=data, method=self.args.method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        began = time.monotonic()
        ok, error = False, None
        try:
            with urllib.request.urlopen(request, timeout=self.args.timeout) as response:
                response.read()
                ok = 200 <= response.status < 300
                error = None if ok else "HTTP %d" % response.status
        except urllib.error.HTTPError as exc:
            error = "HTTP Error %d: %s" % (exc.code, exc.reason)
        except Exception as exc:  # refused, reset, timeout: all count as a lost request
            error = str(getattr(exc, "reason", exc))
        elapsed = (time.monotonic() - began) * 1000.0
        with self.lock:
            self.requests += 1
            if ok:
                self.latencies.append(elapsed)
            else:
                self.errors += 1
                self.last_error = error
        return ok

    def worker(self, deadline):
        while time.monotonic() < deadline:
            if not self.one():
                time.sleep(0.01)    # a refused connection returns at once: do not spin

    def run(self):
        started = time.monotonic()
        deadline = started + self.args.seconds
        threads = [threading.Thread(target=self.worker, args=(deadline,), daemon=True)
                   for _thread in range(self.args.concurrency)]
        for thread in threads:
            thread.start()
        seen_requests = seen_errors = 0
        while any(t.is_alive() for t in threads):
            time.sleep(max(0.0, min(1.0, deadline - time.monotonic() + 0.05)))
            with self.lock:
                requests, errors = self.requests, self.errors
            emit("tick", requests=requests - seen_requests, errors=errors - seen_errors)
            seen_requests, seen_errors = requests, errors
            if time.monotonic() > deadline + self.args.timeout + 1:
                break
        seconds = time.monotonic() - started
        with self.lock:
            latencies = sorted(self.latencies)
            requests, errors, last_error = self.requests, self.errors, self.last_error
        summary = {
            "requests": requests, "errors": errors,
            "error_rate": round(errors / requests, 6) if requests else 1.0,
            "p50_ms": _ms(percentile(latencies, 0.50)), "p90_ms": _ms(percentile(latencies, 0.90)),
            "p99_ms": _ms(percentile(latencies, 0.99)),
            "rps": round(requests / seconds, 3) if seconds > 0 else 0.0,
            "seconds": round(seconds, 3),
        }
        if last_error:
            summary["last_error"] = last_error
        emit("summary", **summary)


def _ms(value):
    return None if value is None else round(value, 3)


def main(argv=None):
    Load(parse(argv)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
