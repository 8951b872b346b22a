"""A Helm chart repository with basic auth, and runs of gpu_operator.yml with the default (text)
callback, for the tests of what the output shows (test_secrets_not_logged, test_chart_pull_failure)."""
import base64
import http.server
import json
import os
import threading

from kit.paths import BIN, COLLECTIONS, REPO

PLAYBOOK = os.path.join(REPO, "playbooks", "gpu_operator.yml")


def serve_repo(folder, user, password):
    """A Helm repository over HTTP (the charts in `folder`) that answers 401 without this basic auth."""
    expected = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=folder, **kwargs)

        def do_GET(self):
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="charts"')
                self.end_headers()
                return
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def env(sim):
    run_env = dict(sim.env)
    run_env.update(ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
                   ANSIBLE_PYTHON_INTERPRETER=os.path.join(BIN, "python"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_LOCALHOST_WARNING="false")
    return run_env


def plan_file(work):
    """The driver plan as node_prereqs.yml prints it (the person hands it to gpu_operator.yml)."""
    from ansible_collections.skaffon.gpu_platform.plugins.filter.driver_plan import driver_plan
    hosts = {"gpu-h100-1": {"gpu_node": _facts(True)}, "gpu-h100-2": {"gpu_node": _facts(True)},
             "gpu-l40s-1": {"gpu_node": _facts(False)}}
    path = os.path.join(str(work), "plan.json")
    with open(path, "w") as handle:
        json.dump({"gpu_operator_driver_plan": json.loads(json.dumps(
            driver_plan(hosts, driver_precompiled=True)))}, handle)
    return path


def _facts(host_driver):
    return {"gpu_host": True, "gpu_count": 2,
            "driver": {"state": "host", "version": "590.48.01"} if host_driver else {"state": "none"},
            "toolkit": {"state": "none"}, "container_runtime": {}, "nouveau_loaded": False,
            "kernel": {"headers_installed": False}}
