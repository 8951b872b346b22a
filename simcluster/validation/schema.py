"""Custom resources against a CRD's structural openAPIV3Schema.

What the apiextensions-apiserver does on create/update, in its order:
1. drop null values of non-nullable object fields, prune unknown fields
   (recording them: strict -> 400 BadRequest, warn -> `unknown field "spec.x"`),
2. apply `default`s,
3. validate (kube-openapi messages, converted to field errors the way
   apiextensions ValidateCustomResource does).
`x-kubernetes-validations` (CEL) are not evaluated (see docs/simcluster-fidelity.md).
Schemas are compiled once per CRD resourceVersion (see admission.py).
"""

import base64
import ipaddress
import json
import re
import uuid

from simcluster.jsoncopy import clone
from simcluster.errors import FieldError
from simcluster.validation import cel, json_type

_EMBEDDED_META_FIELDS = {"name", "namespace", "labels", "annotations", "generateName",
                         "finalizers", "uid", "ownerReferences"}


def _go_value(v):
    """How apimachinery's field errors print a JSON value (%v of interface{})."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, dict):
        return "map[string]interface {}{" + ", ".join(
            '"%s":%s' % (k, _go_literal(v[k])) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[]interface {}{" + ", ".join(_go_literal(x) for x in v) + "}"
    return str(v)


def _go_literal(v):
    if isinstance(v, str):
        return '"%s"' % v
    if v is None:
        return "interface {}(nil)"
    return _go_value(v)


class _Num:
    """A number rendered like Go's %v (so "Invalid value: 0" not "0.0")."""

    def __init__(self, v):
        self.v = v

    def __str__(self):
        return _go_value(self.v)


class Node:
    __slots__ = ("type", "nullable", "props", "additional", "items", "enum", "pattern",
                 "pattern_text", "format", "minimum", "maximum", "excl_min", "excl_max",
                 "min_len", "max_len", "min_items", "max_items", "min_props", "max_props",
                 "unique", "multiple_of", "required", "preserve", "int_or_string", "embedded",
                 "default", "has_default", "all_of", "any_of", "one_of", "not_",
                 "list_type", "list_map_keys", "cel", "has_cel_below")


def compile_schema(schema):
    """Compile an openAPIV3Schema dict into Node objects (once per CRD version)."""
    if not isinstance(schema, dict):
        schema = {}
    n = Node()
    n.type = schema.get("type")
    n.nullable = bool(schema.get("nullable"))
    n.preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    n.int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    n.embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    props = schema.get("properties")
    n.props = {k: compile_schema(v) for k, v in props.items()} if props else None
    add = schema.get("additionalProperties")
    if isinstance(add, dict):
        n.additional = compile_schema(add)
    elif add is True:
        n.additional = True
    else:
        n.additional = None
    n.items = compile_schema(schema["items"]) if isinstance(schema.get("items"), dict) else None
    n.enum = schema.get("enum")
    n.pattern_text = schema.get("pattern")
    try:
        n.pattern = re.compile(n.pattern_text) if n.pattern_text else None
    except re.error:
        n.pattern = None  # Go RE2 syntax that Python does not know: not enforced.
    n.format = schema.get("format")
    n.minimum = schema.get("minimum")
    n.maximum = schema.get("maximum")
    n.excl_min = bool(schema.get("exclusiveMinimum"))
    n.excl_max = bool(schema.get("exclusiveMaximum"))
    n.min_len = schema.get("minLength")
    n.max_len = schema.get("maxLength")
    n.min_items = schema.get("minItems")
    n.max_items = schema.get("maxItems")
    n.min_props = schema.get("minProperties")
    n.max_props = schema.get("maxProperties")
    n.unique = bool(schema.get("uniqueItems"))
    n.multiple_of = schema.get("multipleOf")
    n.required = schema.get("required") or ()
    n.default = schema.get("default")
    n.all_of = [compile_schema(s) for s in schema.get("allOf") or ()]
    n.any_of = [compile_schema(s) for s in schema.get("anyOf") or ()]
    n.one_of = [compile_schema(s) for s in schema.get("oneOf") or ()]
    n.not_ = compile_schema(schema["not"]) if isinstance(schema.get("not"), dict) else None
    n.list_type = schema.get("x-kubernetes-list-type")
    n.list_map_keys = schema.get("x-kubernetes-list-map-keys") or ()
    n.cel = cel.compile_rules(schema.get("x-kubernetes-validations"))
    children = list((n.props or {}).values())
    if isinstance(n.additional, Node):
        children.append(n.additional)
    if n.items is not None:
        children.append(n.items)
    n.has_cel_below = any(c.cel or c.has_cel_below for c in children)
    n.has_default = ("default" in schema
                     or any(c.has_default for c in (n.props or {}).values())
                     or (isinstance(n.additional, Node) and n.additional.has_default)
                     or (n.items is not None and n.items.has_default))
    return n


# -- pruning ---------------------------------------------------------------

def prune(obj, root):
    """Remove unknown fields and nulls of non-nullable fields, in place.

    Returns the dotted paths of the unknown fields ("spec.foo", "spec.l[0].x").
    apiVersion, kind and metadata of the object itself are never pruned.
    """
    unknown = []
    for key in list(obj):
        if key in ("apiVersion", "kind", "metadata"):
            continue
        _prune_field(obj, key, root, "", unknown)
    return unknown


def _child_schema(node, key):
    if node.props is not None and key in node.props:
        return node.props[key]
    if isinstance(node.additional, Node):
        return node.additional
    return None


def _prune_field(parent, key, node, prefix, unknown):
    path = prefix + key if not prefix else prefix + "." + key
    child = _child_schema(node, key)
    value = parent[key]
    if child is None:
        if node.preserve or node.additional is True or (
                node.embedded and key in ("apiVersion", "kind", "metadata")):
            if node.embedded and key == "metadata" and isinstance(value, dict):
                _prune_embedded_meta(value, path, unknown)
            return
        del parent[key]
        unknown.append(path)
        return
    if value is None:
        if not child.nullable:
            del parent[key]
        return
    _prune_value(value, child, path, unknown)


def _prune_value(value, node, path, unknown):
    if isinstance(value, dict):
        if node.props is None and node.additional is None and not node.embedded:
            # type: object without properties needs preserve-unknown-fields in a
            # structural schema; if absent the real server prunes everything.
            if not node.preserve and node.type == "object":
                for k in list(value):
                    del value[k]
                    unknown.append(path + "." + k)
            return
        for k in list(value):
            _prune_field(value, k, node, path, unknown)
    elif isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            if isinstance(item, (dict, list)):
                _prune_value(item, node.items, "%s[%d]" % (path, i), unknown)


def _prune_embedded_meta(meta, path, unknown):
    for k in list(meta):
        if k not in _EMBEDDED_META_FIELDS:
            del meta[k]
            unknown.append(path + "." + k)


# -- defaulting --------------------------------------------------------------

def apply_defaults(obj, root):
    """Structural defaulting: absent fields with a `default` get a copy of it."""
    if root.has_default:
        _default(obj, root)


def _default(value, node):
    if isinstance(value, dict):
        if node.props:
            for k, child in node.props.items():
                if k not in value and child.default is not None:
                    value[k] = clone(child.default)
                if k in value and child.has_default:
                    _default(value[k], child)
        if isinstance(node.additional, Node) and node.additional.has_default:
            for k, v in value.items():
                if node.props is None or k not in node.props:
                    _default(v, node.additional)
    elif isinstance(value, list) and node.items is not None and node.items.has_default:
        for item in value:
            _default(item, node.items)


# -- validation --------------------------------------------------------------

def validate(obj, root, old=None):
    """Field errors of obj against the compiled root schema (metadata excluded).

    old (the stored object on updates) feeds the transition rules (self == oldSelf).
    """
    errs = []
    if not isinstance(obj, dict):
        return errs
    for k, v in obj.items():
        if k in ("apiVersion", "kind", "metadata"):
            continue
        child = _child_schema(root, k)
        if child is not None:
            _validate(v, child, k, errs)
    for req in root.required:
        if req not in obj and req not in ("apiVersion", "kind", "metadata"):
            errs.append(FieldError("Required value", req))
    if root.cel or root.has_cel_below:  # CEL rules run after the OpenAPI checks
        cel.check(root, obj, old if isinstance(old, dict) else cel.MISSING, "", errs)
    return errs


def _type_ok(v, t, vt):
    if t == vt:
        return True
    if t == "number" and vt == "integer":
        return True
    if t == "integer" and vt == "number" and float(v).is_integer():
        return True
    return False


def _validate(v, node, path, errs):
    vt = json_type(v)
    if v is None:
        if node.nullable:
            return
        if node.type or node.int_or_string:
            t = node.type or "integer,string"
            errs.append(FieldError("Invalid value", path, "null",
                                   '%s in body must be of type %s: "null"' % (path, t),
                                   reason="FieldValueTypeInvalid"))
        return
    if node.int_or_string:
        if vt not in ("integer", "string"):
            errs.append(FieldError("Invalid value", path, vt,
                                   '%s in body must be of type integer,string: "%s"' % (path, vt),
                                   reason="FieldValueTypeInvalid"))
            return
    elif node.type and not _type_ok(v, node.type, vt):
        errs.append(FieldError("Invalid value", path, vt,
                               '%s in body must be of type %s: "%s"' % (path, node.type, vt),
                               reason="FieldValueTypeInvalid"))
        return
    if node.enum is not None and not _in_enum(v, node.enum):
        errs.append(FieldError("Unsupported value", path, v if isinstance(v, str) else _Num(v),
                               "supported values: " + ", ".join(
                                   '"%s"' % (e if isinstance(e, str) else json.dumps(e))
                                   for e in node.enum)))
    if vt == "string":
        _validate_string(v, node, path, errs)
    elif vt in ("integer", "number"):
        _validate_number(v, node, path, errs)
    elif vt == "object":
        _validate_object(v, node, path, errs)
    elif vt == "array":
        _validate_array(v, node, path, errs)
    for sub in node.all_of:
        _validate(v, sub, path, errs)
    if node.any_of:
        if not any(not _errors_of(v, s, path) for s in node.any_of):
            errs.append(FieldError("Invalid value", path, "",
                                   "%s in body must validate at least one schema (anyOf)" % path))
    if node.one_of:
        ok = sum(1 for s in node.one_of if not _errors_of(v, s, path))
        if ok != 1:
            errs.append(FieldError("Invalid value", path, "",
                                   "%s in body must validate one and only one schema (oneOf)"
                                   % path))
    if node.not_ is not None and not _errors_of(v, node.not_, path):
        errs.append(FieldError("Invalid value", path, "",
                               "%s in body must not validate the schema (not)" % path))


def _errors_of(v, node, path):
    errs = []
    _validate(v, node, path, errs)
    return errs


def _in_enum(v, enum):
    for e in enum:
        if e == v and isinstance(e, bool) == isinstance(v, bool):
            return True
    return False


def _validate_string(v, node, path, errs):
    if node.max_len is not None and len(v) > node.max_len:
        errs.append(FieldError("Too long", path, None,
                               "may not be more than %d %s" % (
                                   node.max_len, "byte" if node.max_len == 1 else "bytes"),
                               reason="FieldValueTooLong"))
    if node.min_len is not None and len(v) < node.min_len:
        errs.append(FieldError("Invalid value", path, v,
                               "%s in body should be at least %d chars long"
                               % (path, node.min_len)))
    if node.pattern is not None and not node.pattern.search(v):
        errs.append(FieldError("Invalid value", path, v,
                               "%s in body should match '%s'" % (path, node.pattern_text)))
    if node.format and not _format_ok(node.format, v):
        errs.append(FieldError("Invalid value", path, v,
                               '%s in body must be of type %s: "%s"' % (path, node.format, v)))


def _validate_number(v, node, path, errs):
    if node.maximum is not None:
        if node.excl_max and v >= node.maximum:
            errs.append(FieldError("Invalid value", path, _Num(v), "%s in body should be less "
                                   "than %s" % (path, _go_value(node.maximum))))
        elif not node.excl_max and v > node.maximum:
            errs.append(FieldError("Invalid value", path, _Num(v), "%s in body should be less "
                                   "than or equal to %s" % (path, _go_value(node.maximum))))
    if node.minimum is not None:
        if node.excl_min and v <= node.minimum:
            errs.append(FieldError("Invalid value", path, _Num(v), "%s in body should be greater "
                                   "than %s" % (path, _go_value(node.minimum))))
        elif not node.excl_min and v < node.minimum:
            errs.append(FieldError("Invalid value", path, _Num(v), "%s in body should be greater "
                                   "than or equal to %s" % (path, _go_value(node.minimum))))
    if node.multiple_of and (v / node.multiple_of) != int(v / node.multiple_of):
        errs.append(FieldError("Invalid value", path, _Num(v), "%s in body should be a multiple "
                               "of %s" % (path, _go_value(node.multiple_of))))


def _validate_object(v, node, path, errs):
    if node.max_props is not None and len(v) > node.max_props:
        errs.append(FieldError("Too many", path, len(v), "must have at most %d items"
                               % node.max_props, reason="FieldValueTooMany"))
    if node.min_props is not None and len(v) < node.min_props:
        errs.append(FieldError("Invalid value", path, _Num(len(v)),
                               "%s in body should have at least %d properties"
                               % (path, node.min_props)))
    if node.embedded:
        for k in ("apiVersion", "kind"):
            if not v.get(k):
                errs.append(FieldError("Required value", path + "." + k, None,
                                       "must not be empty"))
    for k, child_v in v.items():
        child = _child_schema(node, k)
        if child is not None:
            _validate(child_v, child, path + "." + k, errs)
    # kube-openapi checks required properties after the properties themselves.
    for req in node.required:
        if req not in v:
            errs.append(FieldError("Required value", path + "." + req))


def _validate_array(v, node, path, errs):
    if node.max_items is not None and len(v) > node.max_items:
        errs.append(FieldError("Too many", path, len(v), "must have at most %d %s" % (
            node.max_items, "item" if node.max_items == 1 else "items"),
            reason="FieldValueTooMany"))
    if node.min_items is not None and len(v) < node.min_items:
        errs.append(FieldError("Invalid value", path, _Num(len(v)),
                               "%s in body should have at least %d items"
                               % (path, node.min_items)))
    if node.unique or node.list_type == "set":
        seen = []
        for i, item in enumerate(v):
            if item in seen:
                if node.list_type == "set":
                    errs.append(FieldError("Duplicate value", "%s[%d]" % (path, i),
                                           item if isinstance(item, str) else _Num(item)))
                else:
                    errs.append(FieldError("Invalid value", path, "",
                                           "%s in body shouldn't contain duplicates" % path))
                    break
            else:
                seen.append(item)
    elif node.list_type == "map" and node.list_map_keys:
        seen = set()
        for i, item in enumerate(v):
            if not isinstance(item, dict):
                continue
            key = tuple(json.dumps(item.get(k), sort_keys=True) for k in node.list_map_keys)
            if key in seen:
                errs.append(FieldError("Duplicate value", "%s[%d]" % (path, i), _Num(
                    {k: item.get(k) for k in node.list_map_keys if k in item})))
            seen.add(key)
    if node.items is not None:
        for i, item in enumerate(v):
            _validate(item, node.items, "%s[%d]" % (path, i), errs)


# Formats the apiextensions server validates (kube-openapi strfmt registry, k8s subset).
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d|w))+$")
_HOSTNAME = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?"
                       r"(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")


def _format_ok(fmt, v):
    try:
        if fmt == "date-time":
            return bool(_DATE_TIME.match(v))
        if fmt == "date":
            return bool(_DATE.match(v))
        if fmt == "duration":
            return bool(_DURATION.match(v))
        if fmt == "byte":
            base64.b64decode(v, validate=True)
            return True
        if fmt in ("uuid", "uuid3", "uuid4", "uuid5"):
            uuid.UUID(v)
            return True
        if fmt == "ipv4":
            ipaddress.IPv4Address(v)
            return True
        if fmt == "ipv6":
            ipaddress.IPv6Address(v)
            return True
        if fmt == "cidr":
            ipaddress.ip_network(v, strict=False)
            return True
        if fmt == "hostname":
            return bool(_HOSTNAME.match(v))
        if fmt == "email":
            return bool(_EMAIL.match(v))
        if fmt == "mac":
            return bool(_MAC.match(v))
    except ValueError:
        return False
    return True  # int32, int64, float, double, password, unknown formats: not checked
