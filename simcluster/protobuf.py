"""Minimal Kubernetes protobuf codec (stdlib only).

client-go's typed clients (helm's release storage) send built-in objects as
`application/vnd.kubernetes.protobuf`: the 4 bytes "k8s\\0" then a
runtime.Unknown {typeMeta{apiVersion, kind}, raw, contentEncoding,
contentType} whose `raw` is the object message. We decode the kinds helm
and kubectl send (Secret, ConfigMap, DeleteOptions, ...) into the JSON dict
form and can encode the same kinds (and Status) back.
"""

import base64
import datetime
import json

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    pass


# --- schemas: field number -> (json name, type[, sub-schema]) ------------------
# types: string, bytes, int, bool, msg, time, map_ss, map_sb, fieldsv1, and
# "rep_" + type for repeated fields.

TIME = "time"
TYPE_META = {1: ("apiVersion", "string"), 2: ("kind", "string")}
UNKNOWN = {1: ("typeMeta", "msg", TYPE_META), 2: ("raw", "bytes"),
           3: ("contentEncoding", "string"), 4: ("contentType", "string")}
OWNER_REF = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"),
             5: ("apiVersion", "string"), 6: ("controller", "bool"),
             7: ("blockOwnerDeletion", "bool")}
MANAGED = {1: ("manager", "string"), 2: ("operation", "string"), 3: ("apiVersion", "string"),
           4: ("time", TIME), 6: ("fieldsType", "string"), 7: ("fieldsV1", "fieldsv1"),
           8: ("subresource", "string")}
OBJECT_META = {1: ("name", "string"), 2: ("generateName", "string"),
               3: ("namespace", "string"), 4: ("selfLink", "string"), 5: ("uid", "string"),
               6: ("resourceVersion", "string"), 7: ("generation", "int"),
               8: ("creationTimestamp", TIME), 9: ("deletionTimestamp", TIME),
               10: ("deletionGracePeriodSeconds", "int"), 11: ("labels", "map_ss"),
               12: ("annotations", "map_ss"), 13: ("ownerReferences", "rep_msg", OWNER_REF),
               14: ("finalizers", "rep_string"), 17: ("managedFields", "rep_msg", MANAGED)}
LIST_META = {1: ("selfLink", "string"), 2: ("resourceVersion", "string"),
             3: ("continue", "string"), 4: ("remainingItemCount", "int")}
SECRET = {1: ("metadata", "msg", OBJECT_META), 2: ("data", "map_sb"), 3: ("type", "string"),
          4: ("stringData", "map_ss"), 5: ("immutable", "bool")}
CONFIGMAP = {1: ("metadata", "msg", OBJECT_META), 2: ("data", "map_ss"),
             3: ("binaryData", "map_sb"), 4: ("immutable", "bool")}
PRECONDITIONS = {1: ("uid", "string"), 2: ("resourceVersion", "string")}
DELETE_OPTIONS = {1: ("gracePeriodSeconds", "int"),
                  2: ("preconditions", "msg", PRECONDITIONS),
                  3: ("orphanDependents", "bool"), 4: ("propagationPolicy", "string"),
                  5: ("dryRun", "rep_string"),
                  6: ("ignoreStoreReadErrorWithClusterBreakingPotential", "bool")}
LIST_OPTIONS = {1: ("labelSelector", "string"), 2: ("fieldSelector", "string"),
                3: ("watch", "bool"), 4: ("resourceVersion", "string"),
                5: ("timeoutSeconds", "int"), 7: ("limit", "int"), 8: ("continue", "string"),
                9: ("allowWatchBookmarks", "bool"), 10: ("resourceVersionMatch", "string"),
                11: ("sendInitialEvents", "bool")}
STATUS_CAUSE = {1: ("reason", "string"), 2: ("message", "string"), 3: ("field", "string")}
STATUS_DETAILS = {1: ("name", "string"), 2: ("group", "string"), 3: ("kind", "string"),
                  4: ("causes", "rep_msg", STATUS_CAUSE), 5: ("retryAfterSeconds", "int"),
                  6: ("uid", "string")}
STATUS = {1: ("metadata", "msg", LIST_META), 2: ("status", "string"), 3: ("message", "string"),
          4: ("reason", "string"), 5: ("details", "msg", STATUS_DETAILS), 6: ("code", "int")}
SECRET_LIST = {1: ("metadata", "msg", LIST_META), 2: ("items", "rep_msg", SECRET)}
CONFIGMAP_LIST = {1: ("metadata", "msg", LIST_META), 2: ("items", "rep_msg", CONFIGMAP)}

OBJECT_REF = {1: ("kind", "string"), 2: ("namespace", "string"), 3: ("name", "string"),
              4: ("uid", "string"), 5: ("apiVersion", "string"), 6: ("resourceVersion", "string"),
              7: ("fieldPath", "string")}
LOCAL_REF = {1: ("name", "string")}
NAMESPACE_CONDITION = {1: ("type", "string"), 2: ("status", "string"),
                       4: ("lastTransitionTime", TIME), 5: ("reason", "string"),
                       6: ("message", "string")}
NAMESPACE = {1: ("metadata", "msg", OBJECT_META),
             2: ("spec", "msg", {1: ("finalizers", "rep_string")}),
             3: ("status", "msg", {1: ("phase", "string"),
                                   2: ("conditions", "rep_msg", NAMESPACE_CONDITION)})}
SERVICE_ACCOUNT = {1: ("metadata", "msg", OBJECT_META), 2: ("secrets", "rep_msg", OBJECT_REF),
                   3: ("imagePullSecrets", "rep_msg", LOCAL_REF),
                   4: ("automountServiceAccountToken", "bool")}
EVICTION = {1: ("metadata", "msg", OBJECT_META), 2: ("deleteOptions", "msg", DELETE_OPTIONS)}
BINDING = {1: ("metadata", "msg", OBJECT_META), 2: ("target", "msg", OBJECT_REF)}

LABEL_SELECTOR = {1: ("matchLabels", "map_ss"),
                  2: ("matchExpressions", "rep_msg", {1: ("key", "string"),
                                                      2: ("operator", "string"),
                                                      3: ("values", "rep_string")})}
POLICY_RULE = {1: ("verbs", "rep_string"), 2: ("apiGroups", "rep_string"),
               3: ("resources", "rep_string"), 4: ("resourceNames", "rep_string"),
               5: ("nonResourceURLs", "rep_string")}
SUBJECT = {1: ("kind", "string"), 2: ("apiGroup", "string"), 3: ("name", "string"),
           4: ("namespace", "string")}
ROLE_REF = {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")}
ROLE = {1: ("metadata", "msg", OBJECT_META), 2: ("rules", "rep_msg", POLICY_RULE)}
CLUSTER_ROLE = dict(ROLE)
CLUSTER_ROLE[3] = ("aggregationRule", "msg", {
    1: ("clusterRoleSelectors", "rep_msg", LABEL_SELECTOR)})
ROLE_BINDING = {1: ("metadata", "msg", OBJECT_META), 2: ("subjects", "rep_msg", SUBJECT),
                3: ("roleRef", "msg", ROLE_REF)}

KINDS = {"Role": ROLE, "ClusterRole": CLUSTER_ROLE, "RoleBinding": ROLE_BINDING,
         "ClusterRoleBinding": ROLE_BINDING, "Namespace": NAMESPACE, "ServiceAccount": SERVICE_ACCOUNT, "Eviction": EVICTION,
         "Binding": BINDING, "Secret": SECRET, "ConfigMap": CONFIGMAP, "DeleteOptions": DELETE_OPTIONS,
         "ListOptions": LIST_OPTIONS, "Status": STATUS, "SecretList": SECRET_LIST,
         "ConfigMapList": CONFIGMAP_LIST}


# --- wire level ---------------------------------------------------------------

def _varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ProtobufError("varint too long")


def fields(buf):
    """Yield (field number, wire type, value) of one message."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            val, pos = _varint(buf, pos)
        elif wt == 2:
            n, pos = _varint(buf, pos)
            val = bytes(buf[pos:pos + n])
            if len(val) != n:
                raise ProtobufError("truncated field")
            pos += n
        elif wt == 1:
            val = bytes(buf[pos:pos + 8])
            pos += 8
        elif wt == 5:
            val = bytes(buf[pos:pos + 4])
            pos += 4
        else:
            raise ProtobufError("unsupported wire type %d" % wt)
        yield num, wt, val


_EPOCH = "1970-01-01T00:00:00Z"


def _signed(v):
    return v - (1 << 64) if v >= (1 << 63) else v


def _time_to_str(msg):
    secs = 0
    for num, _wt, val in fields(msg):
        if num == 1:
            secs = _signed(val)
    dt = datetime.datetime.fromtimestamp(secs, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def decode_message(buf, schema):
    out = {}
    for num, _wt, val in fields(buf):
        spec = schema.get(num)
        if spec is None:
            continue
        name, typ = spec[0], spec[1]
        rep = typ.startswith("rep_")
        base = typ[4:] if rep else typ
        if base == "string":
            v = val.decode("utf-8")
        elif base == "bytes":
            v = val
        elif base == "int":
            v = _signed(val)
        elif base == "bool":
            v = bool(val)
        elif base == "msg":
            v = decode_message(val, spec[2])
        elif base == TIME:
            v = _time_to_str(val)
        elif base == "fieldsv1":
            raw = dict((n, x) for n, _w, x in fields(val)).get(1, b"{}")
            v = json.loads(raw or b"{}")
        elif base in ("map_ss", "map_sb"):
            entry = {n: x for n, _w, x in fields(val)}
            key = entry.get(1, b"").decode("utf-8")
            value = entry.get(2, b"")
            value = value.decode("utf-8") if base == "map_ss" else \
                base64.b64encode(value).decode("ascii")
            out.setdefault(name, {})[key] = value
            continue
        else:
            continue
        if rep:
            out.setdefault(name, []).append(v)
        elif v in ("", 0, False, _EPOCH) and not isinstance(v, dict):
            # proto2 writes empty optional scalars; JSON (omitempty) leaves them out
            out.pop(name, None)
        else:
            out[name] = v
    return out


def decode(body):
    """k8s protobuf envelope -> JSON-like dict (apiVersion/kind set)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing k8s protobuf magic")
    unknown = decode_message(body[len(MAGIC):], UNKNOWN)
    tm = unknown.get("typeMeta") or {}
    kind = tm.get("kind", "")
    schema = KINDS.get(kind)
    if schema is None:
        raise ProtobufError("protobuf decoding of kind %r is not supported" % kind)
    obj = decode_message(unknown.get("raw", b""), schema)
    if tm.get("apiVersion"):
        obj["apiVersion"] = tm["apiVersion"]
    obj["kind"] = kind
    return obj


# --- encoding -------------------------------------------------------------------

def _enc_varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(num, wt):
    return _enc_varint((num << 3) | wt)


def _ld(num, payload):
    return _tag(num, 2) + _enc_varint(len(payload)) + payload


def _str_to_time(text):
    dt = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)
    secs = int(dt.timestamp())
    return _tag(1, 0) + _enc_varint(secs) if secs else b""


def encode_message(obj, schema):
    out = bytearray()
    for num in sorted(schema):
        spec = schema[num]
        name, typ = spec[0], spec[1]
        if name not in obj or obj[name] is None:
            continue
        value = obj[name]
        rep = typ.startswith("rep_")
        base = typ[4:] if rep else typ
        values = value if rep else [value]
        if base in ("map_ss", "map_sb"):
            for k in sorted(value):
                v = value[k]
                vb = v.encode("utf-8") if base == "map_ss" else base64.b64decode(v)
                out += _ld(num, _ld(1, k.encode("utf-8")) + _ld(2, vb))
            continue
        for v in values:
            if base == "string":
                out += _ld(num, str(v).encode("utf-8"))
            elif base == "bytes":
                out += _ld(num, v)
            elif base == "int":
                out += _tag(num, 0) + _enc_varint(int(v))
            elif base == "bool":
                out += _tag(num, 0) + _enc_varint(1 if v else 0)
            elif base == "msg":
                out += _ld(num, encode_message(v, spec[2]))
            elif base == TIME:
                out += _ld(num, _str_to_time(v))
            elif base == "fieldsv1":
                out += _ld(num, _ld(1, json.dumps(v, separators=(",", ":")).encode()))
    return bytes(out)


def can_encode(kind):
    return kind in KINDS


def encode(obj):
    kind = obj.get("kind", "")
    schema = KINDS[kind]
    raw = encode_message(obj, schema)
    unknown = {"typeMeta": {"apiVersion": obj.get("apiVersion", "v1"), "kind": kind},
               "raw": raw, "contentEncoding": "", "contentType": ""}
    return MAGIC + encode_message(unknown, UNKNOWN)
