"""`simcluster --cluster FILE --kubeconfig OUT [--port N] [--state FILE]`: serve until SIGTERM/SIGINT.

Prints exactly one line `ready <url>` on stdout once the API answers, the CRDs
of the cluster file exist and the twins run.
"""

import argparse
import importlib
import os
import signal
import sys
import threading

import yaml

from . import kubeconfig, persist
from .server import APIServer
from .registry import Registry
from .store import Store


def _optional(module):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None


def load_cluster(path):
    mod = _optional("simcluster.clusterfile")
    if mod is not None:
        return mod.load(path)
    with open(path, encoding="utf-8") as fh:
        spec = yaml.safe_load(fh) or {}
    base = os.path.dirname(os.path.abspath(path))
    spec["crds"] = [os.path.normpath(os.path.join(base, p)) for p in spec.get("crds") or []]
    return spec


class StartError(Exception):
    """A mistake in the cluster file or its inputs: reported in one line, no traceback."""


def check_crd_files(paths, cluster_path):
    """Fail before anything starts when a `crds:` file is missing: without, e.g., the
    ClusterPolicy CRD the cluster would run and silently never reconcile."""
    for path in paths:
        if not os.path.isfile(path):
            raise StartError("crds: file not found: %s (listed in cluster file %s)"
                             % (path, cluster_path))


def load_crds(store, paths):
    """Create every CustomResourceDefinition found in the files (several documents each)."""
    key = "customresourcedefinitions.apiextensions.k8s.io"
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            docs = list(yaml.safe_load_all(fh))
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            existing = store.get(key, None, doc["metadata"]["name"])
            if existing is None:
                store.create(key, doc, field_manager="simcluster")


def start(cluster_path, port=0, host="127.0.0.1", state=None, audit_policy=None, audit_log=None):
    """Store + server (+ twins when available). Returns (server, twins handle or None)."""
    if cluster_path and not os.path.isfile(cluster_path):
        raise StartError("cluster file not found: %s" % cluster_path)
    try:
        spec = load_cluster(cluster_path) if cluster_path else {"crds": [], "nodes": []}
    except (ValueError, yaml.YAMLError) as exc:     # clusterfile.ClusterFileError
        raise StartError("cluster file %s: %s" % (cluster_path, exc)) from exc
    check_crd_files(spec.get("crds") or [], cluster_path)
    # the release the cluster file names decides which built-in APIs are served (resource.k8s.io/v1: 1.34+)
    store = Store(Registry(kubernetes_version=spec.get("kubernetes_version")))
    if state:
        try:
            persist.restore(store, state)
        except (OSError, ValueError, KeyError) as exc:
            raise StartError("--state %s: %s" % (state, exc)) from exc
    server = APIServer(store, host, port)
    audit_spec = dict(spec.get("audit") or {})
    if audit_policy:        # the flags win over the cluster file, as kube-apiserver's own flags
        audit_spec = {"policy": audit_policy, "log": audit_log or audit_spec.get("log")}
    if audit_spec.get("policy"):
        from . import audit
        try:
            server.audit = audit.AuditLog(audit.load_policy(audit_spec["policy"]), audit_spec.get("log"))
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise StartError("audit policy %s: %s" % (audit_spec["policy"], exc)) from exc
    server.api_faults.replace((spec.get("faults") or {}).get("api_errors") or [])
    load_crds(store, spec.get("crds") or [])
    handle = None
    twins = _optional("simcluster.twins")
    if twins is not None and hasattr(twins, "start"):
        handle = twins.start(store, spec)
        if hasattr(handle, "runtime"):
            server.on_pause.append(handle.runtime.pause)
    dcgm = _optional("simcluster.dcgm")  # DCGM exporter metrics under /_sim/dcgm/<node>/metrics
    if dcgm is not None:
        server.dcgm = dcgm.Exporter(store, spec, handle)
        if handle is not None and hasattr(handle, "ctx"):
            handle.ctx.kubelet.hooks.append(server.dcgm.dcgmi_hook)   # dcgmi test --inject pods
    thread = threading.Thread(target=server.serve_forever, name="simcluster-http",
                              kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    return server, handle


def main(argv=None):
    parser = argparse.ArgumentParser(prog="simcluster", description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", help="cluster file (YAML)")
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig file to write")
    parser.add_argument("--port", type=int, default=0, help="TCP port (0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--state", help="keep the objects in FILE across restarts "
                        "(atomic snapshot + journal; resourceVersions continue)")
    parser.add_argument("--audit-policy-file", help="audit.k8s.io/v1 Policy: write an audit log (GET /_sim/audit)")
    parser.add_argument("--audit-log-path", help="also append the audit events to FILE (JSON lines)")
    args = parser.parse_args(argv)
    stop = threading.Event()

    def _stop(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        server, handle = start(args.cluster, args.port, args.host, args.state, args.audit_policy_file,
                               args.audit_log_path)
    except StartError as exc:
        print("simcluster: cannot start: %s" % " ".join(str(exc).split()), file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - report any start failure on stderr, exit 1
        import traceback
        traceback.print_exc()
        print("simcluster: cannot start: %s" % exc, file=sys.stderr)
        return 1
    kubeconfig.write(args.kubeconfig, server.url)
    sys.stdout.write("ready %s\n" % server.url)
    sys.stdout.flush()
    while not stop.wait(0.5):
        pass
    if handle is not None and hasattr(handle, "stop"):
        try:
            handle.stop()
        except Exception:  # noqa: BLE001
            pass
    server.shutdown()
    server.server_close()
    if args.state:
        persist.close(server.store, args.state)
    return 0
