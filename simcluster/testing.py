"""Start the simulated cluster in a subprocess for tests (pytest fixture helpers).

    sim = start("default.yaml")          # name in tests/clusters/ or a path
    sim.url, sim.kubeconfig, sim.env      # env: PATH, helm homes, a decoy HOME; no credentials
    sim.run("kubectl", "get", "nodes")    # the test's own kubectl/helm: --kubeconfig added
    sim.api_client(); sim.dynamic(); sim.stats(); sim.stop()

Playbooks get the credentials the way operators give them: `run_playbook(playbook, sim.env)`
(tests/kit/playbook.py) adds an inventory source with `gpu_platform_kubeconfig` (the
environment's `kubeconfig` attribute). The environment itself names no cluster: no KUBECONFIG or
K8S_AUTH_* variable, and HOME holds a ~/.kube/config that points at a closed loopback port, so a
module that ignores the inventory's credentials fails instead of finding the cluster by accident.

`fixture()` builds the module-scoped pytest fixture `simcluster`; the cluster
file comes from `@pytest.mark.cluster("file.yaml")` on the module
(`pytestmark = pytest.mark.cluster(...)`) or class.
"""

import json
import os
import select
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTERS = os.path.join(REPO, "tests", "clusters")
DEFAULT_CLUSTER = "default.yaml"
VENV_BIN = os.path.join(REPO, ".venv", "bin")
MARKER_HELP = ("cluster(file): cluster file for the simcluster fixture "
               "(name in tests/clusters/ or a path)")

# Used when tests/clusters/default.yaml does not exist yet: one GPU and one CPU node.
MINIMAL_CLUSTER = """\
nodes:
  - name: gpu-node-1
    gpus: {model: NVIDIA-H100-80GB-HBM3, count: 8, memory_mib: 81559, mig_capable: true}
    host_driver: null
  - name: cpu-node-1
"""

RUNNING = []


class SimClusterError(RuntimeError):
    pass


# Variables through which a kubeconfig, a server or a token could reach a playbook unseen.
CREDENTIAL_VARS = ("KUBECONFIG",)
CREDENTIAL_PREFIXES = ("K8S_AUTH_",)
# A loopback port nothing listens on (discard): a client that reads ~/.kube/config gets "refused".
DECOY_SERVER = "http://127.0.0.1:9"


class ClusterEnv(dict):
    """A process environment that names no cluster, plus the kubeconfig of the cluster the test
    started, for the harness to put into an inventory."""

    def __init__(self, *args, kubeconfig=None, **kw):
        super(ClusterEnv, self).__init__(*args, **kw)
        self.kubeconfig = kubeconfig

    def copy(self):
        return ClusterEnv(self, kubeconfig=self.kubeconfig)


def clean_environ(environ=None):
    """os.environ without any variable that could name a cluster or credentials."""
    environ = os.environ if environ is None else environ
    return dict((k, v) for k, v in environ.items()
                if k not in CREDENTIAL_VARS and not k.startswith(CREDENTIAL_PREFIXES))


def write_kubeconfig(path, server, name="decoy"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"apiVersion": "v1", "kind": "Config", "current-context": name,
                   "clusters": [{"name": name, "cluster": {"server": server}}],
                   "users": [{"name": name, "user": {"token": "decoy-token"}}],
                   "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]}, fh)
    return path


def decoy_home(home, server=DECOY_SERVER):
    """A HOME whose ~/.kube/config points at `server` (by default a port nothing listens on)."""
    write_kubeconfig(os.path.join(home, ".kube", "config"), server)
    return home


def resolve(name):
    if name is None:
        name = DEFAULT_CLUSTER
    if os.path.isabs(name):
        return name
    path = os.path.join(CLUSTERS, name)
    if os.path.exists(path):
        return path
    if os.path.exists(name):
        return os.path.abspath(name)
    return path


class SimCluster:
    def __init__(self, proc, url, kubeconfig, workdir, stderr_path):
        self.proc = proc
        self.url = url
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.stderr_path = stderr_path
        self.env = ClusterEnv(clean_environ(), kubeconfig=kubeconfig)
        self.env["PATH"] = VENV_BIN + os.pathsep + self.env.get("PATH", "")
        self.env["HOME"] = decoy_home(os.path.join(workdir, "home"))
        for var, sub in (("HELM_CACHE_HOME", "helm-cache"), ("HELM_CONFIG_HOME", "helm-config"),
                         ("HELM_DATA_HOME", "helm-data")):
            self.env.setdefault(var, os.path.join(workdir, sub))

    def api_client(self):
        from kubernetes import config
        return config.new_client_from_config(self.kubeconfig)

    def dynamic(self):
        from kubernetes import dynamic
        return dynamic.DynamicClient(self.api_client())

    def _sim(self, path, method="GET"):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stats(self):
        return self._sim("/_sim/stats")

    def reset_stats(self):
        return self._sim("/_sim/stats/reset", "POST")

    def stderr(self):
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def run(self, *args, check=True, timeout=120, **kw):
        """Run a binary against this cluster: kubectl and helm get `--kubeconfig`; anything else
        (ansible-playbook) must name the cluster itself, as the environment names none."""
        argv = list(args)
        if os.path.basename(argv[0]).startswith(("kubectl", "helm")):
            argv[1:1] = ["--kubeconfig", self.kubeconfig]
        res = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                             timeout=timeout, **kw)
        if check and res.returncode != 0:
            raise SimClusterError("%s failed (%d):\n%s\n%s" % (" ".join(args), res.returncode,
                                                             res.stdout, res.stderr))
        return res

    def pause(self, seconds):
        """The outage fault: the API answers nothing for `seconds`, state is kept."""
        req = urllib.request.Request(self.url + "/_sim/pause", method="POST",
                                     data=json.dumps({"seconds": seconds}).encode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def restart(self, kill=False):
        """Stop the process (SIGKILL with kill=True, else SIGTERM) and start it again on the
        same port, so the kubeconfig stays valid; with `state` the objects survive."""
        if kill and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.stop()
        port = int(self.url.rsplit(":", 1)[1])
        new = start(port=port, **self.start_args)
        RUNNING.remove(new)
        self.proc, self.url = new.proc, new.url
        if self not in RUNNING:
            RUNNING.append(self)
        return self

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self in RUNNING:
            RUNNING.remove(self)


def start(cluster=None, workdir=None, timeout=120, port=0, state=None):
    """Start a simulated cluster; `state`: a file that keeps the objects across
    restarts (`sim.restart()`). `timeout` allows for a machine busy with other test runs
    (30 s was too short there: the start failed and its module's tests with it)."""
    workdir = workdir or tempfile.mkdtemp(prefix="simcluster-")
    os.makedirs(workdir, exist_ok=True)
    path = resolve(cluster)
    if not os.path.exists(path):
        if cluster not in (None, DEFAULT_CLUSTER):
            raise SimClusterError("cluster file %s not found" % path)
        path = os.path.join(workdir, "minimal-cluster.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(MINIMAL_CLUSTER)
    kubeconfig = os.path.join(workdir, "kubeconfig")
    stderr_path = os.path.join(workdir, "simcluster.stderr")
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    python = os.path.join(VENV_BIN, "python")
    if not os.path.exists(python):
        python = sys.executable
    with open(stderr_path, "wb") as err:
        argv = [python, "-m", "simcluster", "--cluster", path, "--kubeconfig", kubeconfig,
                "--port", str(port)]
        if state:
            argv += ["--state", state]
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err)
    deadline = time.monotonic() + timeout
    line = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if line.startswith(b"ready "):
                break
            if not line:
                break
        if proc.poll() is not None:
            break
    if not line.startswith(b"ready "):
        proc.kill()
        proc.wait()
        with open(stderr_path, encoding="utf-8", errors="replace") as fh:
            raise SimClusterError("simcluster did not start (cluster %s):\n%s" % (path, fh.read()))
    sim = SimCluster(proc, line.split()[1].decode(), kubeconfig, workdir, stderr_path)
    sim.start_args = {"cluster": cluster, "workdir": workdir, "timeout": timeout,
                      "state": state}
    RUNNING.append(sim)
    return sim


def cluster_marker(request):
    node = request.node
    marker = node.get_closest_marker("cluster")
    if marker is None and getattr(request, "module", None) is not None:
        marks = getattr(request.module, "pytestmark", []) or []
        if not isinstance(marks, (list, tuple)):
            marks = [marks]
        for m in marks:
            if getattr(m, "name", None) == "cluster":
                marker = m
    return marker.args[0] if marker is not None and marker.args else None


def fixture():
    """The module-scoped `simcluster` pytest fixture (simcluster/pytest_plugin.py)."""
    import pytest

    @pytest.fixture(scope="module")
    def simcluster(request, tmp_path_factory):
        try:
            sim = start(cluster_marker(request), str(tmp_path_factory.mktemp("simcluster")))
        except SimClusterError as exc:
            # <repo>/../shared absent: skip with the CLI's one-line reason, do not fail
            if "crds: file not found" not in str(exc):
                raise
            pytest.skip(str(exc).splitlines()[-1].replace("simcluster: cannot start: ", ""))
        try:
            yield sim
        finally:
            sim.stop()

    return simcluster


def add_stderr_to_failures(item, call, outcome):
    """pytest_runtest_makereport helper: show the servers' stderr on failures."""
    rep = outcome.get_result()
    if rep.failed and RUNNING:
        for sim in RUNNING:
            text = sim.stderr()
            if text.strip():
                rep.sections.append(("simcluster stderr (%s)" % sim.url, text[-20000:]))


def configure(config):
    config.addinivalue_line("markers", MARKER_HELP)


class InProcess:
    """An API server on a thread of this process (for tests needing a special Store)."""

    def __init__(self, store=None):
        import threading

        from .server import APIServer
        from .store import Store
        self.store = store or Store()
        self.server = APIServer(self.store)
        self.url = self.server.url
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    def api_client(self):
        from kubernetes import client
        cfg = client.Configuration()
        cfg.host = self.url
        return client.ApiClient(cfg)

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
