"""Integration: every Kubernetes API error ends in a message naming verb, object and the server's answer.

The modules run through real ansible-playbook (action plugins, module base, kubernetes.core's
client) against the simulated cluster; errors are injected at run time with
POST /_sim/api_errors (simcluster/api_faults.py). The API server is stopped last.
Run with -s to see the table of messages (lines starting with "API-ERROR |").
"""
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from kit.mig import labels, mig_module
from kit.paths import BIN
from kit.playbook import run_playbook

pytestmark, cluster = mig_module("api-errors.yaml", "single", pending=["gpu-h100-4"])
TABLE = []


def set_faults(sim, rules):
    req = urllib.request.Request(sim.url + "/_sim/api_errors", data=json.dumps(rules).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def hits(sim):
    with urllib.request.urlopen(sim.url + "/_sim/api_errors", timeout=10) as resp:
        return [r["hits"] for r in json.loads(resp.read())["rules"]]


def run_task(sim, tmp_path, module, args, check=False, env=None):
    # The cluster reaches a module as its kubeconfig option (the roles fill it from
    # gpu_platform_kubeconfig); a bare task gets it here, never from the environment.
    args = dict({"kubeconfig": sim.kubeconfig}, **args) if "kubeconfig" not in args else args
    play = os.path.join(str(tmp_path), "play.yml")
    with open(play, "w") as fh:
        fh.write("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - name: under test\n"
                 "      skaffon.gpu_platform.%s: %s\n" % (module, json.dumps(args)))
    # kubernetes.core keeps its discovery cache in the temp dir, keyed by server URL; a
    # loopback server of another test on a reused port would answer GET /version from it.
    tmp = os.path.join(str(tmp_path), "tmp")
    os.makedirs(tmp, exist_ok=True)
    res = run_playbook(play, dict(env or sim.env, TMPDIR=tmp), check=check, timeout=300)
    found = res.task_results("under test")
    assert found, res
    return found[0]


def record(case, out):
    TABLE.append((case, out.get("msg")))
    print("API-ERROR | %s | %s" % (case, out.get("msg")))


MIG = {"nodes": ["gpu-h100-1"], "profile": "all-1g.10gb", "timeout": 30}


@pytest.mark.parametrize("status,verb,resource,starts", [
    (403, "patch", "nodes", 'Node gpu-h100-1: PATCH Node gpu-h100-1: HTTP 403 Forbidden: nodes "gpu-h100-1" is '
                            'forbidden: User "system:serviceaccount:default:ansible" cannot patch resource "nodes" '
                            'in API group "" at the cluster scope (the credentials lack RBAC verb \'patch\' on '
                            'nodes cluster-wide (a ClusterRole)). Nothing was changed on node gpu-h100-1'),
    (409, "patch", "nodes", "Node gpu-h100-1: PATCH Node gpu-h100-1: HTTP 409 Conflict: Operation cannot be "
                            'fulfilled on nodes "gpu-h100-1": the object has been modified'),
    (422, "patch", "nodes", 'Node gpu-h100-1: PATCH Node gpu-h100-1: HTTP 422 Unprocessable Entity: Node '
                            '"gpu-h100-1" is invalid: metadata.labels'),
    (500, "patch", "nodes", "Node gpu-h100-1: PATCH Node gpu-h100-1: HTTP 500 Internal Server Error: Internal "
                            "error occurred: simulated failure (faults.api_errors) (the API server failed; a write "
                            "is not retried blindly"),
    (401, "list", "clusterpolicies", "LIST ClusterPolicy: HTTP 401 Unauthorized: Unauthorized (the credentials "
                                     "were refused: check the kubeconfig, token or client certificate)"),
    (404, "get", "configmaps", "Neither ConfigMap gpu-operator/gpu-h100-1-mig-config nor "
                               "gpu-operator/default-mig-parted-config exists"),
])
def test_write_and_read_errors_fail_with_the_servers_message(cluster, tmp_path, status, verb, resource, starts):
    set_faults(cluster, [{"status": status, "verb": verb, "resource": resource}])
    try:
        out = run_task(cluster, tmp_path, "mig_config", MIG)
    finally:
        set_faults(cluster, [])
    record("%d %s %s (mig_config)" % (status, verb, resource), out)
    assert out.get("failed") and out["msg"].startswith(starts), out["msg"]
    assert "Traceback" not in json.dumps(out) and out.get("changed") is not True
    assert labels(cluster, "gpu-h100-1")["nvidia.com/mig.config"] == "all-disabled"


def test_a_write_is_not_retried_but_reads_are(cluster, tmp_path):
    set_faults(cluster, [{"status": 500, "verb": "patch", "resource": "nodes", "count": 5},
                         {"status": 503, "verb": "list", "resource": "pods", "count": 2},
                         {"status": 504, "verb": "get", "resource": "nodes", "count": 1}])
    try:
        out = run_task(cluster, tmp_path, "mig_config", MIG)
        counts = hits(cluster)
    finally:
        set_faults(cluster, [])
    assert out.get("failed") and counts == [1, 2, 1], (counts, out["msg"])


def test_429_reads_honour_retry_after_and_succeed(cluster, tmp_path):
    set_faults(cluster, [{"status": 429, "verb": "list", "resource": "pods", "count": 2, "retry_after": 1}])
    started = time.monotonic()
    try:
        out = run_task(cluster, tmp_path, "mig_config", MIG, check=True)
        counts = hits(cluster)
    finally:
        set_faults(cluster, [])
    assert not out.get("failed"), out.get("msg")
    assert counts == [2] and time.monotonic() - started >= 2   # waited Retry-After twice
    record("429 list pods x2, Retry-After 1 (mig_config, check mode)", {"msg": "succeeded after 2 retries"})


def test_watch_errors_mid_wait_are_resumed(cluster, tmp_path):
    set_faults(cluster, [{"status": 503, "verb": "watch", "resource": "nodes", "count": 2}])
    try:
        out = run_task(cluster, tmp_path, "mig_config", dict(MIG, nodes=["gpu-h100-2"]))
        counts = hits(cluster)
    finally:
        set_faults(cluster, [])
    assert not out.get("failed"), out.get("msg")
    assert counts == [2] and out["changed"] is True
    assert out["nodes"][0]["offer"]["allocatable"] == {"nvidia.com/gpu": 14}
    record("503 watch nodes x2 during the MIG wait (mig_config)", {"msg": "succeeded: watch resumed"})


def test_persistent_5xx_on_reads_gives_up_after_the_bounded_retry(cluster, tmp_path):
    set_faults(cluster, [{"status": 500, "verb": "list", "resource": "clusterpolicies"}])
    started = time.monotonic()
    try:
        out = run_task(cluster, tmp_path, "cluster_policy_wait", {"timeout": 5})
    finally:
        set_faults(cluster, [])
    record("500 list clusterpolicies, always (cluster_policy_wait)", out)
    assert out.get("failed") and out["msg"].startswith(
        "LIST ClusterPolicy [metadata.name=cluster-policy]: HTTP 500 Internal Server Error: Internal error occurred: simulated failure")
    assert "retried for a while, then gave up" in out["msg"]
    assert time.monotonic() - started > 25      # a lower bound: a busy machine only lengthens it


def test_vaulted_kubeconfig_works_through_the_action_plugins(cluster, tmp_path):
    vault_pass = tmp_path / "vault-pass"
    vault_pass.write_text("s3cret\n")
    vaulted = tmp_path / "kubeconfig.vault"
    vaulted.write_text(open(cluster.kubeconfig).read())
    subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt", str(vaulted), "--vault-password-file",
                    str(vault_pass)], check=True, capture_output=True)
    assert vaulted.read_text().startswith("$ANSIBLE_VAULT;")
    env = dict((k, v) for k, v in cluster.env.items() if k not in ("KUBECONFIG", "K8S_AUTH_KUBECONFIG"))
    env["ANSIBLE_VAULT_PASSWORD_FILE"] = str(vault_pass)
    out = run_task(cluster, tmp_path, "cluster_policy_wait", {"timeout": 30, "kubeconfig": str(vaulted)}, env=env)
    assert not out.get("failed") and out["ready"] is True, out.get("msg")
    out = run_task(cluster, tmp_path, "mig_config", dict(MIG, kubeconfig=str(vaulted)), check=True, env=env)
    assert not out.get("failed"), out.get("msg")


def test_a_hung_api_server_is_a_timeout_not_a_hang(cluster):
    """Real kubernetes client, Kube with a short read timeout, a socket that accepts and never answers."""
    from kubernetes import dynamic

    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.kube import Kube
    dyn = dynamic.DynamicClient(cluster.api_client())
    kube = Kube(dyn, retry_seconds=2, request_timeout=(2, 1))
    kube.resource("v1", "Node")                        # discovery from the real server
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    dyn.client.configuration.host = "http://127.0.0.1:%d" % hung.getsockname()[1]
    kube.url = dyn.client.configuration.host
    with pytest.raises(ApiError) as err:
        kube.get("v1", "Node", "gpu-h100-1")
    hung.close()
    record("read timeout (server accepts, never answers; Kube direct)", {"msg": str(err.value)})
    assert str(err.value).startswith("GET Node gpu-h100-1: cannot reach the API server at http://127.0.0.1:")
    assert "no answer in time" in str(err.value)        # the read timeout, not a hang


# -- no client: the kubeconfig does not load, or the first request (GET /version) fails ----------
TOKEN = "sim-bearer-token-7f3a9c"   # must never appear in a message
LIBRARY_NOISE = ("HTTPConnectionPool", "HTTPSConnectionPool", "Max retries", "Traceback", "object at 0x",
                 "NewConnectionError", TOKEN)
FIX = "the roles fill from gpu_platform_kubeconfig"


def write_kubeconfig(path, server, context="lab", user=None, more_contexts=(), ca=None):
    cluster = {"server": server}
    if ca:
        cluster["certificate-authority"] = ca
    data = {"apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "lab-cluster", "cluster": cluster}],
            "users": [{"name": "lab-admin", "user": user or {}}],
            "contexts": [{"name": name, "context": {"cluster": "lab-cluster", "user": "lab-admin"}}
                         for name in (context,) + tuple(more_contexts)]}
    path.write_text(json.dumps(data))    # JSON is YAML
    return str(path)


def client_failure(cluster, tmp_path, case, args, module="cluster_policy_wait", env=None):
    module_args = dict(args, timeout=5) if module == "cluster_policy_wait" else args
    out = run_task(cluster, tmp_path, module, module_args, env=env)
    record(case, out)
    text = json.dumps(out)
    assert out.get("failed") and out["msg"].startswith("Cannot connect to Kubernetes ("), out["msg"]
    for noise in LIBRARY_NOISE:
        assert noise not in text, (noise, out["msg"])
    assert out["api_error"]["stage"] in ("load", "connect") and "********" not in out["msg"], out["msg"]
    return out["msg"]


class LoopbackApiServer(object):
    """An HTTP(S) server on 127.0.0.1 answering every request with one status and body."""

    def __init__(self, status, body, tls_dir=None):
        import http.server
        import ssl

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls_dir is not None:
            cert, key = self_signed_cert(tls_dir)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = "%s://127.0.0.1:%d" % (scheme, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def self_signed_cert(folder):
    """A self-signed certificate for 127.0.0.1 (as a kubeadm cluster's own CA would look to a stranger)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(str(folder), "tls.crt"), os.path.join(str(folder), "tls.key")
    with open(cert_path, "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return cert_path, key_path


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_no_client_connection_refused(cluster, tmp_path):
    server = "http://127.0.0.1:%d" % free_port()    # nothing listens there
    kubeconfig = write_kubeconfig(tmp_path / "refused.yaml", server)
    msg = client_failure(cluster, tmp_path, "no client: connection refused (mig_config)",
                         dict(MIG, kubeconfig=kubeconfig), module="mig_config")
    assert msg.startswith("Cannot connect to Kubernetes (server %s, context lab, kubeconfig %s): connection "
                          "refused" % (server, kubeconfig)), msg
    assert "is the API server running?" in msg and FIX in msg


def test_no_client_host_name_does_not_resolve(cluster, tmp_path):
    kubeconfig = write_kubeconfig(tmp_path / "dns.yaml", "https://api.lab.invalid:6443")
    msg = client_failure(cluster, tmp_path, "no client: DNS", {"kubeconfig": kubeconfig})
    assert msg.startswith("Cannot connect to Kubernetes (server https://api.lab.invalid:6443, context lab, "
                          "kubeconfig %s): the host name api.lab.invalid does not resolve" % kubeconfig), msg
    assert "fix the server of cluster lab-cluster in the kubeconfig" in msg and FIX in msg


def test_no_client_tls_verification_fails_on_a_self_signed_certificate(cluster, tmp_path):
    """The server's certificate is self-signed; the kubeconfig trusts another CA (the system's)."""
    server = LoopbackApiServer(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}, tls_dir=tmp_path)
    try:
        kubeconfig = write_kubeconfig(tmp_path / "tls.yaml", server.url)
        msg = client_failure(cluster, tmp_path, "no client: TLS verify (self-signed)", {"kubeconfig": kubeconfig})
    finally:
        server.close()
    assert msg.startswith("Cannot connect to Kubernetes (server %s, context lab, kubeconfig %s): TLS certificate "
                          "verification failed: self-signed certificate" % (server.url, kubeconfig)), msg
    assert "certificate-authority(-data) of cluster lab-cluster" in msg and FIX in msg


def test_no_client_token_refused(cluster, tmp_path):
    """What kube-apiserver answers any request carrying an expired or unknown bearer token."""
    server = LoopbackApiServer(401, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                     "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    try:
        kubeconfig = write_kubeconfig(tmp_path / "token.yaml", server.url, user={"token": TOKEN})
        msg = client_failure(cluster, tmp_path, "no client: 401 (expired token)", {"kubeconfig": kubeconfig})
    finally:
        server.close()
    assert msg.startswith("Cannot connect to Kubernetes (server %s, context lab, kubeconfig %s): HTTP 401 "
                          "Unauthorized on GET /version: the API server refused the credentials of user "
                          "lab-admin" % (server.url, kubeconfig)), msg
    assert "expired" in msg and FIX in msg


def test_no_client_kubeconfig_file_missing(cluster, tmp_path):
    missing = str(tmp_path / "no-such-kubeconfig")
    msg = client_failure(cluster, tmp_path, "no client: kubeconfig missing", {"kubeconfig": missing})
    assert msg.startswith("Cannot connect to Kubernetes (kubeconfig %s): the kubeconfig file does not exist"
                          % missing), msg
    assert "set the module option kubeconfig, which " + FIX in msg


def test_no_client_context_missing_lists_the_contexts(cluster, tmp_path):
    kubeconfig = write_kubeconfig(tmp_path / "ctx.yaml", cluster.url, more_contexts=("staging",))
    msg = client_failure(cluster, tmp_path, "no client: context missing",
                         {"kubeconfig": kubeconfig, "context": "prod"})
    assert msg.startswith("Cannot connect to Kubernetes (context prod, kubeconfig %s): context prod is not in the "
                          "kubeconfig; it has: lab, staging" % kubeconfig), msg
    assert "set the module option context, which the roles fill from gpu_platform_context" in msg


def test_no_client_kubeconfig_not_yaml(cluster, tmp_path):
    bad = tmp_path / "notyaml"
    bad.write_text("clusters: [{name: lab\nserver: {{ not yaml\n")
    msg = client_failure(cluster, tmp_path, "no client: kubeconfig not YAML", {"kubeconfig": str(bad)})
    assert msg.startswith("Cannot connect to Kubernetes (kubeconfig %s): the kubeconfig file is not YAML: "
                          % bad), msg
    assert " at line " in msg and FIX in msg


def test_no_client_vaulted_kubeconfig_names_the_vaulted_file(cluster, tmp_path):
    """The module reads a decrypted temporary copy; the message names the file the task gave."""
    vault_pass = tmp_path / "vault-pass"
    vault_pass.write_text("s3cret\n")
    vaulted = tmp_path / "kubeconfig.vault"
    write_kubeconfig(vaulted, cluster.url)
    subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt", str(vaulted), "--vault-password-file",
                    str(vault_pass)], check=True, capture_output=True)
    env = dict(cluster.env, ANSIBLE_VAULT_PASSWORD_FILE=str(vault_pass))
    msg = client_failure(cluster, tmp_path, "no client: context missing, vaulted kubeconfig",
                         {"kubeconfig": str(vaulted), "context": "prod"}, env=env)
    assert msg.startswith("Cannot connect to Kubernetes (context prod, kubeconfig %s): context prod is not in the "
                          "kubeconfig; it has: lab" % vaulted), msg
    env.pop("ANSIBLE_VAULT_PASSWORD_FILE")
    msg = client_failure(cluster, tmp_path, "no client: vaulted kubeconfig, no vault password",
                         {"kubeconfig": str(vaulted)}, env=env)
    assert msg.startswith("Cannot connect to Kubernetes (kubeconfig %s): the kubeconfig file cannot be "
                          "decrypted" % vaulted), msg
    assert "ANSIBLE_VAULT_PASSWORD_FILE" in msg


def test_api_server_stopped_mid_wait_says_what_was_changed(cluster, tmp_path):
    """gpu-h100-4 stays pending: the module waits; the API server stops after the relabel."""
    out = {}

    def run():
        out.update(run_task(cluster, tmp_path, "mig_config", {"nodes": ["gpu-h100-4"], "profile": "all-1g.10gb",
                                                              "timeout": 120}))
    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and labels(cluster, "gpu-h100-4")["nvidia.com/mig.config"] != "all-1g.10gb":
        time.sleep(0.2)
    assert labels(cluster, "gpu-h100-4")["nvidia.com/mig.config"] == "all-1g.10gb"
    cluster.stop()
    thread.join(200)
    record("API server stopped during the MIG wait (mig_config)", out)
    assert out.get("failed") and out["changed"] is True
    assert out["msg"].startswith("Node gpu-h100-4: WATCH Node gpu-h100-4: cannot reach the API server at "
                                 + cluster.url), out["msg"]
    assert "Changed before the failure: nvidia.com/mig.config=all-1g.10gb on node gpu-h100-4 (was " in out["msg"]
    assert "waits for node gpu-h100-4 to finish" in out["msg"]
    # and a module started while the API server is down
    out = run_task(cluster, tmp_path, "cluster_policy_wait", {"timeout": 5})
    record("API server stopped (cluster_policy_wait)", out)
    assert out.get("failed") and "cannot reach the API server at %s: connection refused (is the API server " \
        "running" % cluster.url in out["msg"], out["msg"]
