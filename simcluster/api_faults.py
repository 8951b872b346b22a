"""Injected API errors: the API server answers chosen requests with a real `Status` error.

Rules come from the cluster file (`faults: {api_errors: [...]}`) and from the runtime
endpoint `POST /_sim/api_errors` (a JSON list replaces the rules; `DELETE` clears them;
`GET` shows them with their hit counts). A rule:

    {status: 403, verb: patch, resource: nodes, group: null, namespace: null, name: null,
     count: 2 | rate: 0.5, retry_after: 1, message: ..., reason: ...}

`verb` is the RBAC verb (get, list, watch, create, update, patch, delete,
deletecollection); `resource` the plural, `plural/subresource` for a subresource
(as in RBAC, `pods` does not match `pods/log`). null/absent = any. `count`: fail that
many matching requests, then the rule is spent; `rate`: fail that fraction at random;
neither: fail every matching request. The bodies and reasons are those of
kube-apiserver (staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go).
"""

import random
import threading

from .errors import ApiError

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
KEYS = {"status", "verb", "resource", "group", "namespace", "name", "count", "rate",
        "retry_after", "message", "reason"}
USER = "system:serviceaccount:default:ansible"   # the identity named in 403 messages

# status -> (reason, message template); {qual} = resource[.group], {name}, {kind}, {verb}
DEFAULTS = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", None),   # built in _forbidden(), as the RBAC authorizer words it
    404: ("NotFound", '{qual} "{name}" not found'),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", 'Operation cannot be fulfilled on {qual} "{name}": the object has been '
                      "modified; please apply your changes to the latest version and try again"),
    410: ("Expired", "too old resource version: 1 (2)"),
    422: ("Invalid", '{kind} "{name}" is invalid: metadata.labels: Invalid value: "x": '
                     "simulated validation failure (faults.api_errors)"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: simulated failure (faults.api_errors)"),
    502: ("InternalError", "Internal error occurred: bad gateway (faults.api_errors)"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "Timeout: request did not complete within requested timeout - "
                     "context deadline exceeded"),
}


class FaultError(ApiError):
    """An ApiError that also carries response headers (Retry-After)."""

    def __init__(self, code, reason, message, details=None, headers=()):
        super().__init__(code, reason, message, details)
        self.headers = list(headers)


def validate(rules, where="faults.api_errors"):
    """Normalised copies of the rules; ValueError naming the field otherwise."""
    if not isinstance(rules, list):
        raise ValueError("%s: must be a list of rules like {status: 403, verb: patch, "
                         "resource: nodes}" % where)
    out = []
    for i, rule in enumerate(rules):
        at = "%s[%d]" % (where, i)
        if not isinstance(rule, dict):
            raise ValueError("%s: must be a mapping with at least `status:`" % at)
        unknown = set(rule) - KEYS
        if unknown:
            raise ValueError("%s: unknown key(s) %s; allowed: %s" % (at, sorted(unknown), sorted(KEYS)))
        status = rule.get("status")
        if status not in DEFAULTS:
            raise ValueError("%s.status: must be one of %s, got %r" % (at, sorted(DEFAULTS), status))
        verb = rule.get("verb")
        if verb is not None and verb not in VERBS:
            raise ValueError("%s.verb: must be one of %s or null (any), got %r"
                             % (at, ", ".join(VERBS), verb))
        for key in ("resource", "group", "namespace", "name", "message", "reason"):
            if rule.get(key) is not None and not isinstance(rule[key], str):
                raise ValueError("%s.%s: must be a string or null, got %r" % (at, key, rule[key]))
        if rule.get("count") is not None and rule.get("rate") is not None:
            raise ValueError("%s: give count or rate, not both" % at)
        count = rule.get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise ValueError("%s.count: must be an integer >= 1, got %r" % (at, count))
        rate = rule.get("rate")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                                 or not 0 < rate <= 1):
            raise ValueError("%s.rate: must be a number in (0, 1], got %r" % (at, rate))
        after = rule.get("retry_after")
        if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
            raise ValueError("%s.retry_after: must be whole seconds >= 0, got %r" % (at, after))
        out.append(dict(rule, hits=0))
    return out


def _forbidden(verb, qual, plural, group, namespace, name):
    who = '%s "%s"' % (qual, name) if name else qual
    scope = 'in the namespace "%s"' % namespace if namespace else "at the cluster scope"
    return '%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s" %s' % (
        who, USER, verb, plural, group, scope)


class ApiFaults:
    """The active rules of one API server; check() raises FaultError for a matching request."""

    def __init__(self, rules=None, rng=None):
        self._lock = threading.Lock()
        self._rng = rng or random.Random()
        self.rules = validate(rules or [])

    def replace(self, rules):
        rules = validate(rules, "api_errors")
        with self._lock:
            self.rules = rules

    def snapshot(self):
        with self._lock:
            return [dict(r) for r in self.rules]

    def _matches(self, rule, verb, resource, group, namespace, name):
        return ((rule.get("verb") is None or rule["verb"] == verb)
                and (rule.get("resource") is None or rule["resource"] == resource)
                and (rule.get("group") is None or rule["group"] == group)
                and (rule.get("namespace") is None or rule["namespace"] == namespace)
                and (rule.get("name") is None or rule["name"] == name))

    def check(self, verb, info, namespace, name, sub=None):
        """Called for every resource request (after the verb is known)."""
        if not self.rules:
            return
        resource = info.plural + ("/" + sub if sub else "")
        with self._lock:
            for rule in self.rules:
                if not self._matches(rule, verb, resource, info.group, namespace, name):
                    continue
                if rule.get("count") is not None and rule["hits"] >= rule["count"]:
                    continue
                if rule.get("rate") is not None and self._rng.random() >= rule["rate"]:
                    continue
                rule["hits"] += 1
                raise self._error(rule, verb, info, namespace, name)

    @staticmethod
    def _error(rule, verb, info, namespace, name):
        status = rule["status"]
        reason, template = DEFAULTS[status]
        qual = info.plural + ("." + info.group if info.group else "")
        if rule.get("message"):
            message = rule["message"]
        elif status == 403:
            message = _forbidden(verb, qual, info.plural, info.group, namespace, name)
        else:
            message = template.format(qual=qual, name=name or "", kind=info.kind, verb=verb)
        details = None
        if status in (403, 404, 409, 422):
            details = {"name": name or "", "kind": info.plural if status != 422 else info.kind}
            if info.group:
                details["group"] = info.group
        headers = []
        after = rule.get("retry_after")
        if after is None and status == 429:
            after = 1
        if after is not None and status in (429, 500, 503, 504):
            details = dict(details or {}, retryAfterSeconds=after)
            headers.append("Retry-After: %d" % after)
        return FaultError(status, rule.get("reason") or reason, message, details, headers)

    def endpoint(self, method, body):
        """/_sim/api_errors: GET shows, POST replaces (JSON list), DELETE clears."""
        import json
        if method == "POST":
            try:
                self.replace(json.loads(body or b"[]"))
            except ValueError as exc:
                raise ApiError(400, "BadRequest", str(exc))
        elif method == "DELETE":
            self.replace([])
        elif method != "GET":
            raise ApiError(405, "MethodNotAllowed", "use GET, POST or DELETE")
        return {"kind": "ApiErrorRules", "rules": self.snapshot()}
