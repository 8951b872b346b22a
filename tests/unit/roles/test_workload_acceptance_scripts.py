"""The workload acceptance's pod programs (roles/workload_acceptance/files), run for real.

stage.py and load.py against a local http.server; train.py for its arguments, its checkpoint
listing and the message it prints where torch is missing (the training image has it, this venv not).
"""
import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

from kit.paths import REPO

FILES = os.path.join(REPO, "roles", "workload_acceptance", "files")
PAYLOAD = bytes(range(256)) * 4096          # 1 MiB


class Handler(http.server.BaseHTTPRequestHandler):
    fail_until = 0.0

    def do_GET(self):       # noqa: N802 (http.server's name)
        if self.path == "/sample.tar":
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD)
        elif self.path == "/ready":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        elif self.path == "/flaky":
            self.server.count += 1
            code = 503 if self.server.count % 4 == 0 else 200
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_error(404, "Not Found")

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.count = 0
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def run(script, *args, timeout=60):
    proc = subprocess.run([sys.executable, os.path.join(FILES, script)] + list(args), capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, PYTHONPATH=""), check=False)
    events = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    return proc, events


def test_stage_downloads_each_source(server, tmp_path):
    dest = tmp_path / "data"
    proc, events = run("stage.py", "--dest", str(dest), "--source", "sample.tar=%s/sample.tar" % server,
                       "--source", "weights.bin=%s/sample.tar" % server)
    assert proc.returncode == 0, proc.stderr
    assert [e["event"] for e in events] == ["staged", "staged", "stage-done"]
    assert events[0]["name"] == "sample.tar" and events[0]["bytes"] == len(PAYLOAD)
    assert events[0]["url"] == server + "/sample.tar"
    assert events[2]["bytes"] == 2 * len(PAYLOAD)
    assert all(isinstance(e["time"], float) and e.get("seconds", 0) >= 0 for e in events)
    assert (dest / "sample.tar").read_bytes() == PAYLOAD
    assert sorted(os.listdir(dest)) == ["sample.tar", "weights.bin"]


def test_stage_stops_at_the_first_missing_source(server, tmp_path):
    dest = tmp_path / "data"
    proc, events = run("stage.py", "--dest", str(dest), "--source", "a=%s/sample.tar" % server,
                       "--source", "b=%s/missing.tar" % server, "--source", "c=%s/sample.tar" % server)
    assert proc.returncode == 1
    assert [e["event"] for e in events] == ["staged", "stage-failed"]
    assert events[1]["name"] == "b" and events[1]["error"] == "HTTP Error 404: Not Found"
    assert sorted(os.listdir(dest)) == ["a"]       # no partial file of b, c never tried


def test_stage_refuses_a_source_without_a_name(tmp_path):
    proc, events = run("stage.py", "--dest", str(tmp_path), "--source", "http://x/y")
    assert proc.returncode == 2 and not events
    assert "expected NAME=URL" in proc.stderr


def test_load_reports_latency_and_rate(server):
    proc, events = run("load.py", "--url", server + "/ready", "--seconds", "1.5", "--concurrency", "3")
    assert proc.returncode == 0, proc.stderr
    ticks = [e for e in events if e["event"] == "tick"]
    summary = events[-1]
    assert summary["event"] == "summary"
    assert len(ticks) >= 1 and sum(t["requests"] for t in ticks) == summary["requests"]
    assert summary["requests"] > 10 and summary["errors"] == 0 and summary["error_rate"] == 0
    assert 0 < summary["p50_ms"] <= summary["p90_ms"] <= summary["p99_ms"]
    # the script's own bounds, not the machine's speed: it sends for the whole --seconds, and stops at the
    # latest one request timeout (10 s by default) and a second of grace after it, plus its last tick
    assert 1.5 <= summary["seconds"] <= 1.5 + 10 + 1 + 1 and summary["rps"] > 0
    assert set(summary) >= {"requests", "errors", "error_rate", "p50_ms", "p90_ms", "p99_ms", "rps",
                            "seconds", "time"}


def test_load_counts_errors(server):
    proc, events = run("load.py", "--url", server + "/flaky", "--seconds", "1", "--concurrency", "2")
    assert proc.returncode == 0
    summary = events[-1]
    assert summary["errors"] > 0 and 0.15 < summary["error_rate"] < 0.35, summary
    assert summary["last_error"].startswith("HTTP Error 503")


def test_load_against_a_closed_port_is_all_errors():
    proc, events = run("load.py", "--url", "http://127.0.0.1:9/", "--seconds", "0.5", "--concurrency", "1")
    summary = events[-1]
    assert proc.returncode == 0
    assert summary["requests"] > 0 and summary["errors"] == summary["requests"] and summary["error_rate"] == 1
    assert summary["p99_ms"] is None and "refused" in summary["last_error"].lower()


def test_train_without_torch_says_so(tmp_path):
    proc, events = run("train.py", "--data", str(tmp_path), "--checkpoint-dir", str(tmp_path / "ck"),
                       "--seconds", "1")
    assert proc.returncode == 2
    assert events[0]["event"] == "failed"
    assert "torch is not importable" in events[0]["error"] and "training image" in events[0]["error"]


def test_train_arguments(tmp_path):
    proc, events = run("train.py", "--data", str(tmp_path), "--seconds", "1")
    assert proc.returncode == 2 and "--checkpoint-dir" in proc.stderr and not events
    proc, events = run("train.py", "--data", str(tmp_path), "--checkpoint-dir", str(tmp_path), "--seconds", "0")
    assert proc.returncode == 2 and "--seconds > 0" in proc.stderr


def test_train_finds_the_newest_checkpoint(tmp_path):
    sys.path.insert(0, FILES)
    try:
        import train
    finally:
        sys.path.remove(FILES)
    for name in ("step-00000050.pt", "step-00000100.pt", "step-00000100.pt.tmp", "notes.txt"):
        (tmp_path / name).write_text("x")
    newest = [(100, str(tmp_path / "step-00000100.pt")), (50, str(tmp_path / "step-00000050.pt"))]
    assert train.checkpoints(str(tmp_path)) == newest
    assert train.checkpoints(str(tmp_path / "absent")) == []
    args = train.parse(["--data", "/data", "--checkpoint-dir", "/checkpoints", "--checkpoint-every", "25",
                        "--seconds", "300"])
    assert (args.checkpoint_every, args.seconds, args.batch_size) == (25, 300.0, 64)
