"""A real Prometheus server (Debian package `prometheus`) for tests: loopback only, temp data dir,
stopped by the fixture that started it."""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import yaml

BINARY = shutil.which("prometheus")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, workdir, config, rule_groups=None, extra_args=(), data_dir=None):
        self.workdir = str(workdir)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        os.makedirs(self.workdir, exist_ok=True)
        if rule_groups is not None:
            rules = os.path.join(self.workdir, "rules.yml")
            with open(rules, "w", encoding="utf-8") as fh:
                yaml.safe_dump({"groups": rule_groups}, fh)
            config = dict(config, rule_files=[rules])
        self.config_path = os.path.join(self.workdir, "prometheus.yml")
        with open(self.config_path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(config, fh)
        self.log = open(os.path.join(self.workdir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            [BINARY, "--config.file", self.config_path,
             "--storage.tsdb.path", str(data_dir or os.path.join(self.workdir, "data")),
             "--web.listen-address", "127.0.0.1:%d" % self.port] + list(extra_args),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.wait(lambda: self._ready(), 60, "Prometheus ready")

    def _ready(self):
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            if self.proc.poll() is not None:
                raise RuntimeError("prometheus exited: %s" % self.logs())
            return False

    def logs(self):
        with open(os.path.join(self.workdir, "prometheus.log"), encoding="utf-8", errors="replace") as fh:
            return fh.read()[-5000:]

    def api(self, path, **params):
        url = self.url + "/api/v1/" + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr, **params):
        return self.api("query", query=expr, **params)["result"]

    @staticmethod
    def wait(cond, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = cond()
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
