"""Server-side printing (meta.k8s.io Table) for `kubectl get`, a few kinds with columns."""

import datetime

from . import jsonpath
from .clock import utcnow


def wants_table(accept):
    return "as=Table" in (accept or "")


def _parse_time(ts):
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ"):
        try:
            return datetime.datetime.strptime(ts, fmt).replace(tzinfo=datetime.timezone.utc)
        except (TypeError, ValueError):
            pass
    return None


def age(ts):
    """translateTimestampSince + duration.HumanDuration of the real printers."""
    then = _parse_time(ts) if ts else None
    if then is None:
        return "<unknown>" if not ts else "<invalid>"
    s = int((utcnow() - then).total_seconds())
    if s < -1:
        return "<invalid>"
    s = max(s, 0)
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    d = h // 24
    if d < 8:
        return "%dd%dh" % (d, h % 24) if h % 24 else "%dd" % d
    if d < 365 * 2:
        return "%dd" % d
    y = d // 365
    if y < 8:
        return "%dy%dd" % (y, d % 365) if d % 365 else "%dy" % y
    return "%dy" % y


def _col(name, desc="", ctype="string", fmt="", priority=0):
    return {"name": name, "type": ctype, "format": "name" if name == "Name" else fmt,
            "description": desc or name, "priority": priority}


def _restartable(container):
    return (container or {}).get("restartPolicy") == "Always"


def _later(a, b):
    """The later of two RFC 3339 timestamps (either may be None)."""
    ta, tb = _parse_time(a) if a else None, _parse_time(b) if b else None
    if ta is None:
        return b if tb is not None else None
    return b if tb is not None and tb > ta else a


def _finished(c):
    return ((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt")


def _pod_cells(o):
    """printPod of k8s.io/kubernetes/pkg/printers/internalversion (1.35), wide."""
    spec, st = o.get("spec") or {}, o.get("status") or {}
    phase = st.get("phase") or ""
    reason = st.get("reason") or phase
    for cond in st.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(
        1 for c in init_specs.values() if _restartable(c))
    ready = restarts = sidecar_restarts = 0
    last = sidecar_last = None
    init_statuses = st.get("initContainerStatuses") or []
    initializing = False
    for i, c in enumerate(init_statuses):
        restarts += int(c.get("restartCount") or 0)
        last = _later(last, _finished(c))
        sidecar = _restartable(init_specs.get(c.get("name")))
        if sidecar:
            sidecar_restarts += int(c.get("restartCount") or 0)
            sidecar_last = _later(sidecar_last, _finished(c))
        state = c.get("state") or {}
        term, wait = state.get("terminated"), state.get("waiting")
        if term is not None and int(term.get("exitCode") or 0) == 0:
            continue
        if sidecar and c.get("started"):
            ready += 1 if c.get("ready") else 0
            continue
        if term is not None:
            if term.get("reason"):
                reason = "Init:" + term["reason"]
            elif term.get("signal"):
                reason = "Init:Signal:%d" % term["signal"]
            else:
                reason = "Init:ExitCode:%d" % int(term.get("exitCode") or 0)
        elif wait is not None and wait.get("reason") and wait["reason"] != "PodInitializing":
            reason = "Init:" + wait["reason"]
        else:
            reason = "Init:%d/%d" % (i, len(init_specs))
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in st.get("conditions") or [])
    if not initializing or initialized:
        restarts, last = sidecar_restarts, sidecar_last
        running = False
        for c in reversed(st.get("containerStatuses") or []):
            restarts += int(c.get("restartCount") or 0)
            last = _later(last, _finished(c))
            state = c.get("state") or {}
            wait, term = state.get("waiting"), state.get("terminated")
            if wait is not None and wait.get("reason"):
                reason = wait["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = ("Signal:%d" % term["signal"] if term.get("signal")
                          else "ExitCode:%d" % int(term.get("exitCode") or 0))
            elif c.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if any(c.get("type") == "Ready" for c in
                                      st.get("conditions") or []) else "NotReady"
    if o["metadata"].get("deletionTimestamp"):
        if st.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    text = str(restarts)
    if restarts and last:
        text = "%d (%s ago)" % (restarts, age(last))
    ips = [a.get("ip") for a in st.get("podIPs") or [] if a.get("ip")] or \
        ([st["podIP"]] if st.get("podIP") else [])
    gates = spec.get("readinessGates") or []
    if gates:
        conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
        gate_text = "%d/%d" % (sum(1 for g in gates if conds.get(g.get("conditionType"))
                                   == "True"), len(gates))
    else:
        gate_text = "<none>"
    return (["%d/%d" % (ready, total), reason, text],
            [", ".join(ips) or "<none>", spec.get("nodeName") or "<none>",
             st.get("nominatedNodeName") or "<none>", gate_text])


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


def _event_cells(o):
    """printEvent (wide): core v1 Events; events.k8s.io/v1 fields mapped like the
    real conversion to the internal Event."""
    core = "involvedObject" in o or "message" in o or "source" in o
    if core:
        inv, msg = o.get("involvedObject") or {}, o.get("message") or ""
        first, last_ts = o.get("firstTimestamp"), o.get("lastTimestamp")
        src = o.get("source") or {}
        count = o.get("count") or 0
    else:
        inv, msg = o.get("regarding") or {}, o.get("note") or ""
        first, last_ts = o.get("deprecatedFirstTimestamp"), o.get("deprecatedLastTimestamp")
        src = o.get("deprecatedSource") or {}
        count = o.get("deprecatedCount") or 0
    first_text = age(first) if first else age(o.get("eventTime"))
    last_text = age(last_ts) if last_ts else first_text
    series = o.get("series")
    if series is not None:
        last_text = age(series.get("lastObservedTime"))
        count = series.get("count") or 0
    elif not count:
        count = 1
    kind = (inv.get("kind") or "").lower()
    target = "%s/%s" % (kind, inv["name"]) if inv.get("name") else kind
    component = src.get("component") or o.get("reportingController") or ""
    instance = src.get("host") or o.get("reportingInstance") or ""
    source = component + (", " + instance if component and instance else "")
    return [last_text, o.get("type") or "", o.get("reason") or "", target,
            inv.get("fieldPath") or "", source, msg.strip(), first_text, int(count),
            o["metadata"]["name"]]


def _simple(cols, cells, wide=()):
    """Name, the kind's columns, Age (then priority-1 columns)."""
    columns = [_col("Name")] + [_col(c) for c in cols] + [_col("Age")] + \
        [_col(c, priority=1) for c in wide]

    def row(o):
        main = cells(o)
        extra = []
        if isinstance(main, tuple):
            main, extra = main
        return [o["metadata"]["name"]] + list(main) + \
            [age(o["metadata"].get("creationTimestamp"))] + list(extra)
    return columns, row


ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
                ("ReadWriteOncePod", "RWOP"))


def _modes(modes):
    """GetAccessModesAsString: the short forms in a fixed order."""
    return ",".join(short for mode, short in ACCESS_MODES if mode in (modes or ()))


def _pvc_cells(o):
    """printPersistentVolumeClaim."""
    spec, st = o.get("spec") or {}, o.get("status") or {}
    phase = "Terminating" if o["metadata"].get("deletionTimestamp") else st.get("phase", "")
    capacity = modes = ""
    if spec.get("volumeName"):
        modes = _modes(st.get("accessModes"))
        capacity = (st.get("capacity") or {}).get("storage", "")
    cls = spec.get("storageClassName")
    if cls is None:
        cls = (o["metadata"].get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class", "")
    return ([phase, spec.get("volumeName", ""), capacity, modes, cls,
             spec.get("volumeAttributesClassName") or "<unset>"], [spec.get("volumeMode") or "<unset>"])


def _pv_cells(o):
    """printPersistentVolume."""
    spec, st = o.get("spec") or {}, o.get("status") or {}
    ref = spec.get("claimRef")
    claim = "%s/%s" % (ref.get("namespace", ""), ref.get("name", "")) if ref else ""
    phase = "Terminating" if o["metadata"].get("deletionTimestamp") else st.get("phase", "")
    return ([(spec.get("capacity") or {}).get("storage", ""), _modes(spec.get("accessModes")),
             spec.get("persistentVolumeReclaimPolicy", ""), phase, claim, spec.get("storageClassName", ""),
             spec.get("volumeAttributesClassName") or "<unset>", st.get("reason", "")],
            [spec.get("volumeMode") or "<unset>"])


def _storage_class_printer():
    """printStorageClass: the default class's name gets " (default)"."""
    columns = [_col("Name"), _col("Provisioner"), _col("ReclaimPolicy"), _col("VolumeBindingMode"),
               _col("AllowVolumeExpansion"), _col("Age")]

    def row(o):
        ann = o["metadata"].get("annotations") or {}
        default = "true" in (ann.get("storageclass.kubernetes.io/is-default-class"),
                             ann.get("storageclass.beta.kubernetes.io/is-default-class"))
        return [o["metadata"]["name"] + (" (default)" if default else ""), o.get("provisioner", ""),
                o.get("reclaimPolicy") or "Delete", o.get("volumeBindingMode") or "Immediate",
                bool(o.get("allowVolumeExpansion")), age(o["metadata"].get("creationTimestamp"))]
    return columns, row


def _claim_state(o):
    """resourceClaimState: deleted, pending, allocated, reserved (comma-joined)."""
    st = o.get("status") or {}
    states = []
    if o["metadata"].get("deletionTimestamp"):
        states.append("deleted")
    if st.get("allocation") is None:
        if not o["metadata"].get("deletionTimestamp"):
            states.append("pending")
    else:
        states.append("allocated")
        if st.get("reservedFor"):
            states.append("reserved")
    return [",".join(states)]


def _slice_cells(o):
    """printResourceSlice: node, driver, pool."""
    spec = o.get("spec") or {}
    return [spec.get("nodeName") or "", spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")]


PRINTERS = {
    "resourceclaims.resource.k8s.io": _simple(["State"], _claim_state),
    "resourceslices.resource.k8s.io": _simple(["Node", "Driver", "Pool"], _slice_cells),
    "persistentvolumeclaims": _simple(["Status", "Volume", "Capacity", "Access Modes", "StorageClass",
                                       "VolumeAttributesClass"], _pvc_cells, ["VolumeMode"]),
    "persistentvolumes": _simple(["Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass",
                                  "VolumeAttributesClass", "Reason"], _pv_cells, ["VolumeMode"]),
    "storageclasses.storage.k8s.io": _storage_class_printer(),
    "pods": _simple(["Ready", "Status", "Restarts"], _pod_cells,
                    ["IP", "Node", "Nominated Node", "Readiness Gates"]),
    "nodes": _simple(["Status", "Roles", "Version"], _node_cells),
    "deployments.apps": _simple(["Ready", "Up-to-date", "Available"], _deploy_cells),
    "daemonsets.apps": _simple(["Desired", "Current", "Ready", "Up-to-date", "Available"],
                               _ds_cells),
    "namespaces": _simple(["Status"], lambda o: [(o.get("status") or {}).get("phase",
                                                                           "Active")]),
    "events": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
                _col("Subobject", priority=1), _col("Source", priority=1), _col("Message"),
                _col("First Seen", priority=1), _col("Count", priority=1),
                _col("Name", priority=1)], _event_cells),
}
PRINTERS["events.events.k8s.io"] = PRINTERS["events"]
DEFAULT = _simple([], lambda o: [])


def table(info, items, rv, req, version=None):
    if info.crd is not None:
        columns, cells = crd_printer(info.crd, version or info.storage_version)
    else:
        columns, cells = PRINTERS.get(info.key, DEFAULT)
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
        row = {"cells": cells(o)}
        if ref is not None:
            row["object"] = ref
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": columns, "rows": rows}


# --- custom resources: the CRD version's additionalPrinterColumns -------------------

_AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
               "description": "CreationTimestamp is a timestamp representing the server time "
                              "when this object was created."}


def crd_printer(crd, version):
    """apiextensions-apiserver tableconvertor: Name, then each printer column (JSONPath,
    missing keys give a null cell); a version without columns gets Age (type date)."""
    spec_cols = None
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == version:
            spec_cols = v.get("additionalPrinterColumns")
    spec_cols = spec_cols or [_AGE_COLUMN]
    columns = [_col("Name")]
    paths = []
    for c in spec_cols:
        try:
            paths.append(jsonpath.parse(c.get("jsonPath") or ""))
        except jsonpath.JSONPathError:   # the real server refuses such a CRD
            paths.append(None)
        columns.append({"name": c.get("name", ""), "type": c.get("type", "string"),
                        "format": c.get("format", ""), "priority": int(c.get("priority") or 0),
                        "description": c.get("description") or "Custom resource definition "
                        "column (in JSONPath format): %s" % c.get("jsonPath")})

    def cells(o):
        row = [o["metadata"]["name"]]
        for col, path in zip(columns[1:], paths):
            found = jsonpath.find(path, o) if path is not None else []
            if not found or found[0] is None:
                row.append(None)
            elif col["type"] == "string":
                row.append(jsonpath.go_text(found[0]))
            else:
                row.append(_typed_cell(col["type"], found[0]))
        return row
    return columns, cells


def _typed_cell(ctype, value):
    """cellForJSONValue: a value of another type than the column's gives a null cell."""
    if value is None:
        return None
    if ctype == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if ctype == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if ctype == "boolean" and isinstance(value, bool):
        return value
    if ctype == "date" and isinstance(value, str):
        return age(value) if _parse_time(value) else "<invalid>"
    return None
