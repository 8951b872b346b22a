"""kubeconfig for the simulated cluster (plain HTTP on loopback, no credentials)."""

import os

import yaml


def kubeconfig(url, name="simcluster", namespace="default"):
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": "admin", "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "admin",
                                                 "namespace": namespace}}],
        "current-context": name,
    }


def write(path, url, name="simcluster"):
    """Write atomically with mode 0600 (helm warns about group/world-readable files)."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(kubeconfig(url, name), fh, default_flow_style=False, sort_keys=False)
    os.replace(tmp, path)
    return path
