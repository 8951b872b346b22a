"""Builders for the DCGM exporter tests: a running pod as the store holds it, the samples of a metric."""
import re


def running(name, namespace, node, labels=None, limits=None, annotations=None, created="2026-12-01T00:00:00Z",
            image="busybox"):
    c = {"name": "main", "image": image}
    if limits:
        c["resources"] = {"limits": limits}
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                         "annotations": annotations or {}, "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": [c]},
            "status": {"phase": "Running", "containerStatuses": [{"ready": True}]}}


def samples(text, name):
    out = []
    for line in text.splitlines():
        m = re.match(r"^%s\{(.*)\} (\S+)$" % name, line)
        if m:
            out.append((dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))), float(m.group(2))))
    return out
