"""Server-side printing (meta.k8s.io Table) for `kubectl get`, a few kinds with columns."""

import datetime


def wants_table(accept):
    return "as=Table" in (accept or "")


def age(ts):
    if not ts:
        return "<unknown>"
    try:
        then = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except ValueError:
        return "<unknown>"
    s = int((datetime.datetime.now(datetime.timezone.utc) - then).total_seconds())
    s = max(s, 0)
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60)
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60)
    if h < 48:
        return "%dh" % h
    d = h // 24
    if d < 8:
        return "%dd%dh" % (d, h % 24)
    return "%dd" % d


def _col(name, desc=""):
    return {"name": name, "type": "string", "format": "name" if name == "Name" else "",
            "description": desc or name, "priority": 0}


def _pod_cells(o):
    spec, st = o.get("spec") or {}, o.get("status") or {}
    statuses = st.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = st.get("reason") or st.get("phase") or "Pending"
    for c in st.get("initContainerStatuses") or []:
        w = (c.get("state") or {}).get("waiting") or {}
        if w.get("reason"):
            reason = "Init:" + w["reason"]
            break
    else:
        for c in statuses:
            w = (c.get("state") or {}).get("waiting") or {}
            if w.get("reason"):
                reason = w["reason"]
                break
    if o["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return ["%d/%d" % (ready, len(spec.get("containers") or [])), reason, restarts]


def _node_cells(o):
    conds = (o.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    status = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (o.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in (o["metadata"].get("labels") or {})
                   if k.startswith("node-role.kubernetes.io/")) or ["<none>"]
    version = ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
    return [status, ",".join(roles), version]


def _deploy_cells(o):
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return ["%d/%d" % (st.get("readyReplicas") or 0, spec.get("replicas", 1)),
            st.get("updatedReplicas") or 0, st.get("availableReplicas") or 0]


def _ds_cells(o):
    st = o.get("status") or {}
    return [st.get("desiredNumberScheduled") or 0, st.get("currentNumberScheduled") or 0,
            st.get("numberReady") or 0, st.get("updatedNumberScheduled") or 0,
            st.get("numberAvailable") or 0]


EXTRA = {
    "pods": (["Ready", "Status", "Restarts"], _pod_cells),
    "nodes": (["Status", "Roles", "Version"], _node_cells),
    "deployments.apps": (["Ready", "Up-to-date", "Available"], _deploy_cells),
    "daemonsets.apps": (["Desired", "Current", "Ready", "Up-to-date", "Available"], _ds_cells),
    "namespaces": (["Status"], lambda o: [(o.get("status") or {}).get("phase", "Active")]),
}


def table(info, items, rv, req):
    cols, cells = EXTRA.get(info.key, ([], lambda o: []))
    include = req.q("includeObject") or "Metadata"
    rows = []
    for o in items:
        if include == "Object":
            ref = o
        elif include == "None":
            ref = None
        else:
            ref = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": o["metadata"]}
        row = {"cells": [o["metadata"]["name"]] + cells(o) +
               [age(o["metadata"].get("creationTimestamp"))]}
        if ref is not None:
            row["object"] = ref
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": [_col("Name")] + [_col(c) for c in cols] + [_col("Age")],
            "rows": rows}
