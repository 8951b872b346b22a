"""Label and field selectors with the API server's syntax and errors."""

import re

from .errors import ApiError

_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                  r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _bad(msg):
    return ApiError(400, "BadRequest", msg)


def _split_top(text):
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(text):
    """-> list of (key, op, values); op in =, !=, in, notin, exists, !exists."""
    reqs = []
    if not text:
        return reqs
    for part in _split_top(text):
        m = re.match(r"^(\S+)\s+(in|notin)\s*\((.*)\)$", part)
        if m:
            key, op, vals = m.group(1), m.group(2), m.group(3)
            values = {v.strip() for v in vals.split(",") if v.strip()}
            reqs.append((_check_key(key, text), op, values))
            continue
        m = re.match(r"^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$", part)
        if m:
            op = "!=" if m.group(2) == "!=" else "="
            reqs.append((_check_key(m.group(1), text), op, {m.group(3)}))
            continue
        if part.startswith("!"):
            reqs.append((_check_key(part[1:].strip(), text), "!exists", set()))
            continue
        if " " not in part:
            reqs.append((_check_key(part, text), "exists", set()))
            continue
        raise _bad("unable to parse requirement: found '%s', expected: identifier" % part)
    return reqs


def _check_key(key, text):
    if not _KEY.match(key) or len(key.split("/")[-1]) > 63:
        raise _bad('unable to parse requirement: <nil>: Invalid value: "%s": name part must '
                   "consist of alphanumeric characters, '-', '_' or '.', and must start and "
                   "end with an alphanumeric character" % key)
    return key


def match_labels(reqs, labels):
    labels = labels or {}
    for key, op, values in reqs:
        present = key in labels
        val = labels.get(key)
        if op == "=":
            if not present or val not in values:
                return False
        elif op == "!=":
            if present and val in values:
                return False
        elif op == "in":
            if not present or val not in values:
                return False
        elif op == "notin":
            if present and val in values:
                return False
        elif op == "exists":
            if not present:
                return False
        elif op == "!exists":
            if present:
                return False
    return True


def selector_from_label_selector(sel):
    """metav1.LabelSelector dict -> selector string (matchLabels + matchExpressions)."""
    parts = []
    for k, v in sorted(((sel or {}).get("matchLabels") or {}).items()):
        parts.append("%s=%s" % (k, v))
    for e in (sel or {}).get("matchExpressions") or []:
        op = e.get("operator")
        vals = ",".join(e.get("values") or [])
        if op == "In":
            parts.append("%s in (%s)" % (e["key"], vals))
        elif op == "NotIn":
            parts.append("%s notin (%s)" % (e["key"], vals))
        elif op == "Exists":
            parts.append(e["key"])
        elif op == "DoesNotExist":
            parts.append("!" + e["key"])
    return ",".join(parts)


# Field selectors each built-in type supports (beyond metadata.name/namespace).
FIELD_LABELS = {
    "pods": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
             "status.nominatedNodeName"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion",
               "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
               "reportingComponent", "source", "type"},
    "events.events.k8s.io": {"regarding.kind", "regarding.namespace", "regarding.name",
                             "regarding.uid", "reason", "type", "reportingController"},
    "nodes": {"spec.unschedulable"},
    "namespaces": {"status.phase"},
    "secrets": {"type"},
    "jobs.batch": {"status.successful"},
    "replicasets.apps": {"status.replicas"},
    "services": {"spec.clusterIP", "spec.type"},
    "persistentvolumeclaims": set(),
    "replicationcontrollers": {"status.replicas"},
    "certificatesigningrequests.certificates.k8s.io": {"spec.signerName"},
}


def parse_field_selector(text, resource, extra=()):
    """-> list of (path, op, value); op in =, !=. 400 for unsupported fields."""
    reqs = []
    if not text:
        return reqs
    allowed = {"metadata.name", "metadata.namespace"} | FIELD_LABELS.get(resource, set())
    allowed |= set(extra)
    for part in _split_top(text):
        m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise _bad("invalid selector: '%s'; can't understand '%s'" % (text, part))
        path, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if path not in allowed:
            raise _bad('field label not supported: %s' % path)
        reqs.append((path, "!=" if op == "!=" else "=", value))
    return reqs


def _field_value(obj, path):
    if path == "source":
        src = obj.get("source") or {}
        return src.get("component", "")
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def match_fields(reqs, obj):
    for path, op, value in reqs:
        actual = _field_value(obj, path)
        if op == "=" and actual != value:
            return False
        if op == "!=" and actual == value:
            return False
    return True


def label_selector_matches(sel, labels):
    """A metav1.LabelSelector object against labels: matchLabels AND every matchExpression;
    {} matches everything, None nothing (a null namespaceSelector, podSelector ...)."""
    if sel is None:
        return False
    labels = labels or {}
    for key, value in (sel.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in sel.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
