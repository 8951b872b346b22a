"""Audit log of the simulated API server, from an audit.k8s.io/v1 Policy as kube-apiserver reads it.

The policy checker follows k8s.io/apiserver/pkg/audit/policy/checker.go: rules are tried in
order and the first whose users, userGroups, verbs, namespaces/resources (group, resources
with `*`, `res/*`, `*/sub`, resourceNames) or nonResourceURLs (`*`, exact, trailing `*`) all
match gives the level; no match is level None. A rule's omitStages add to the policy's.
The request's verb, namespace, resource, subresource and name are read from the path as
the RequestInfoFactory does (`/api/v1/namespaces/ns/pods/p/log` -> get pods/log p in ns).

Events are audit.k8s.io/v1 Event JSON lines, one per stage not omitted (RequestReceived
before the handler runs, ResponseComplete after, ResponseStarted for watches), with
requestObject from level Request and responseObject from RequestResponse; level
Metadata carries neither. They go to `log` (the --audit-log-path) when given, and to a
bounded memory buffer served at GET /_sim/audit (the same JSON lines).

Differences from kube-apiserver (docs/simcluster-fidelity.md): one user for every request
(the kubeconfig's admin, groups system:masters and system:authenticated); the twins write
to the store directly, so controllers' requests are not audited; no Panic stage, no
omitManagedFields, no log rotation (maxage/maxbackup/maxsize), no webhook backend.
"""

import collections
import json
import threading
import uuid

import yaml

from .clock import now_micro

LEVELS = ("None", "Metadata", "Request", "RequestResponse")
STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
USER = {"username": "admin", "groups": ["system:masters", "system:authenticated"]}
RULE_KEYS = {"level", "users", "userGroups", "verbs", "resources", "namespaces", "nonResourceURLs",
             "omitStages", "omitManagedFields"}
BUFFER = 20000


class PolicyError(ValueError):
    pass


def load_policy(path):
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return validate_policy(data, path)


def validate_policy(data, source="policy"):
    """The policy, checked as kube-apiserver checks --audit-policy-file at start."""
    if not isinstance(data, dict) or data.get("kind") != "Policy" or data.get("apiVersion") != "audit.k8s.io/v1":
        raise PolicyError("%s: not an audit.k8s.io/v1 Policy (apiVersion: audit.k8s.io/v1, kind: Policy)" % source)
    rules = data.get("rules")
    if not isinstance(rules, list) or not rules:
        raise PolicyError("%s: rules: a policy needs at least one rule" % source)
    for stage in data.get("omitStages") or []:
        if stage not in STAGES:
            raise PolicyError("%s: omitStages: Unsupported value: %r: supported values: %s"
                              % (source, stage, ", ".join(STAGES)))
    for i, rule in enumerate(rules):
        where = "%s: rules[%d]" % (source, i)
        if not isinstance(rule, dict):
            raise PolicyError("%s: must be a mapping" % where)
        unknown = sorted(set(rule) - RULE_KEYS)
        if unknown:
            raise PolicyError("%s: unknown field %s" % (where, unknown[0]))
        if rule.get("level") not in LEVELS:
            raise PolicyError("%s.level: Unsupported value: %r: supported values: %s"
                              % (where, rule.get("level"), ", ".join(LEVELS)))
        for stage in rule.get("omitStages") or []:
            if stage not in STAGES:
                raise PolicyError("%s.omitStages: Unsupported value: %r" % (where, stage))
        if rule.get("nonResourceURLs") and (rule.get("resources") or rule.get("namespaces")):
            raise PolicyError("%s: rules cannot apply to both regular resources and non-resource URLs" % where)
        for j, url in enumerate(rule.get("nonResourceURLs") or []):
            if "*" in url[:-1] or not url.startswith("/") and url != "*":
                raise PolicyError("%s.nonResourceURLs[%d]: %r: a path or a path prefix ending in '*'" % (where, j, url))
        for j, gr in enumerate(rule.get("resources") or []):
            if not isinstance(gr, dict):
                raise PolicyError("%s.resources[%d]: must be {group, resources, resourceNames}" % (where, j))
            for res in gr.get("resources") or []:
                if gr.get("resourceNames") and res.startswith("*"):
                    raise PolicyError("%s.resources[%d].resources: %r: resourceNames need a resource, not a "
                                      "wildcard" % (where, j, res))
    return data


class Checker:
    """LevelAndStages of checker.go."""

    def __init__(self, policy):
        self.omit = list(policy.get("omitStages") or [])
        self.rules = []
        for rule in policy.get("rules") or []:
            rule = dict(rule)
            rule["omitStages"] = sorted(set(self.omit) | set(rule.get("omitStages") or []))
            self.rules.append(rule)

    def level_and_stages(self, attrs):
        for rule in self.rules:
            if rule_matches(rule, attrs):
                return rule["level"], rule["omitStages"]
        return "None", self.omit


def rule_matches(rule, attrs):
    user = attrs.get("user")
    if rule.get("users"):
        if user is None or user.get("username") not in rule["users"]:
            return False
    if rule.get("userGroups"):
        if user is None or not any(g in rule["userGroups"] for g in user.get("groups") or []):
            return False
    if rule.get("verbs") and attrs.get("verb") not in rule["verbs"]:
        return False
    if rule.get("namespaces") or rule.get("resources"):
        return _matches_resource(rule, attrs)
    if rule.get("nonResourceURLs"):
        return _matches_non_resource(rule, attrs)
    return True


def _matches_non_resource(rule, attrs):
    if attrs.get("resource_request"):
        return False
    path = attrs.get("path") or ""
    for spec in rule["nonResourceURLs"]:
        if spec == "*" or spec == path or (spec.endswith("*") and path.startswith(spec.rstrip("*"))):
            return True
    return False


def _matches_resource(rule, attrs):
    if not attrs.get("resource_request"):
        return False
    if rule.get("namespaces") and (attrs.get("namespace") or "") not in rule["namespaces"]:
        return False
    if not rule.get("resources"):
        return True
    resource, sub, name = attrs.get("resource") or "", attrs.get("subresource") or "", attrs.get("name") or ""
    combined = resource + "/" + sub if sub else resource
    for gr in rule["resources"]:
        if (gr.get("group") or "") != (attrs.get("api_group") or ""):
            continue
        if not gr.get("resources"):
            return True
        for res in gr["resources"]:
            if gr.get("resourceNames") and name not in gr["resourceNames"]:
                continue
            if res in (combined, "*"):
                return True
            if sub and res.startswith("*/") and sub == res[2:]:
                return True
            if res.endswith("/*") and resource == res[:-2]:
                return True
    return False


_NAMESPACE_SUBRESOURCES = ("status", "finalize")


def request_info(method, path, query):
    """The authorizer attributes of one request, as RequestInfoFactory.NewRequestInfo resolves them."""
    parts = [p for p in path.split("/") if p]
    verb = method.lower()
    info = {"resource_request": False, "path": path, "verb": verb, "user": USER}
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return info
    if not rest:
        return info                     # discovery of a group version: a non-resource request
    watch = False
    if rest[0] == "watch":
        watch, rest = True, rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return info
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    verbs = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    verb = verbs.get(method, method.lower())
    if watch or str(query.get("watch", "")).lower() in ("1", "true"):
        verb = "watch"
    elif not name and verb == "get":
        verb = "list"
    elif not name and verb == "delete":
        verb = "deletecollection"
    info.update(resource_request=True, verb=verb, api_group=group, api_version=version, namespace=namespace,
                resource=resource, subresource=sub, name=name)
    return info


class AuditLog:
    """Writes the events of each audited request; thread-safe."""

    def __init__(self, policy, log_path=None):
        self.checker = Checker(policy)
        self.log_path = log_path
        self.events = collections.deque(maxlen=BUFFER)
        self.lock = threading.Lock()
        self._fh = open(log_path, "a", encoding="utf-8") if log_path else None

    def begin(self, method, path, raw_uri, query, headers, body, source_ip):
        """The request's audit record, or None at level None; writes RequestReceived."""
        attrs = request_info(method, path, query)
        level, omit = self.checker.level_and_stages(attrs)
        if level == "None":
            return None
        event = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": level, "auditID": str(uuid.uuid4()),
                 "stage": "RequestReceived", "requestURI": raw_uri, "verb": attrs["verb"], "user": dict(USER),
                 "sourceIPs": [source_ip], "userAgent": headers.get("User-Agent") or "",
                 "requestReceivedTimestamp": now_micro()}
        if attrs["resource_request"]:
            ref = {"resource": attrs["resource"], "apiVersion": attrs["api_version"]}
            for key, field in (("namespace", "namespace"), ("name", "name"), ("api_group", "apiGroup"),
                               ("subresource", "subresource")):
                if attrs.get(key):
                    ref[field] = attrs[key]
            obj = _json(body)
            meta = (obj or {}).get("metadata") if isinstance(obj, dict) else None
            if attrs["verb"] == "create" and isinstance(meta, dict) and meta.get("name") and not ref.get("name"):
                ref["name"] = meta["name"]              # LogRequestObject completes the objectRef
            event["objectRef"] = ref
        record = {"event": event, "omit": set(omit), "request_object": None}
        if attrs["resource_request"] and LEVELS.index(level) >= LEVELS.index("Request"):
            record["request_object"] = obj          # decoded after RequestReceived, as in the server
        self._emit(record, "RequestReceived")
        return record

    def end(self, record, code, body, watch=False):
        if record is None:
            return
        event = record["event"]
        status = {"metadata": {}, "code": code}
        obj = _json(body)
        if code >= 400 and isinstance(obj, dict) and obj.get("kind") == "Status":
            for key in ("status", "message", "reason"):
                if obj.get(key):
                    status[key] = obj[key]
        event["responseStatus"] = status
        if record["request_object"] is not None:
            event["requestObject"] = record["request_object"]
        if event["level"] == "RequestResponse" and obj is not None and not watch:
            event["responseObject"] = obj
        self._emit(record, "ResponseStarted" if watch else "ResponseComplete")
        if watch:
            self._emit(record, "ResponseComplete")

    def _emit(self, record, stage):
        if stage in record["omit"]:
            return
        event = dict(record["event"], stage=stage, stageTimestamp=now_micro())
        if stage == "RequestReceived":
            event.pop("responseStatus", None)
        line = json.dumps(event, separators=(",", ":"), sort_keys=True)
        with self.lock:
            self.events.append(line)
            if self._fh is not None:
                self._fh.write(line + "\n")
                self._fh.flush()

    def lines(self):
        with self.lock:
            return list(self.events)

    def close(self):
        if self._fh is not None:
            self._fh.close()


def _json(body):
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
