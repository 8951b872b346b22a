"""Object names, label and annotation validation (k8s.io/apimachinery validation).

Messages are the real ones of apimachinery/pkg/util/validation and
pkg/api/validation (ValidateObjectMeta), including their odd double spaces.
"""

import re

from simcluster.errors import FieldError

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"

_LABEL_RE = re.compile("^" + DNS1123_LABEL_FMT + "$")
_SUBDOMAIN_RE = re.compile("^" + DNS1123_SUBDOMAIN_FMT + "$")
_DNS1035_RE = re.compile("^" + DNS1035_LABEL_FMT + "$")
_QUALIFIED_RE = re.compile("^" + QUALIFIED_NAME_FMT + "$")
_LABEL_VALUE_RE = re.compile("^" + LABEL_VALUE_FMT + "$")

LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
             "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
             "or '123-abc', regex used for validation is '%s')" % DNS1123_LABEL_FMT)
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is '%s')" % DNS1123_SUBDOMAIN_FMT)
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
               "start with an alphabetic character, and end with an alphanumeric character "
               "(e.g. 'my-name',  or 'abc-123', regex used for validation is '%s')"
               % DNS1035_LABEL_FMT)
QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                 "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                 "or '123-abc', regex used for validation is '%s')" % QUALIFIED_NAME_FMT)
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character "
                   "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                   "'%s')" % LABEL_VALUE_FMT)


def max_len_msg(n):
    return "must be no more than %d characters" % n


def dns1123_label(value, prefix=False):
    """Problems of a DNS-1123 label (namespace names); [] if valid."""
    if prefix:
        value = _mask_prefix(value)
    errs = []
    if len(value) > 63:
        errs.append(max_len_msg(63))
    if not _LABEL_RE.match(value):
        errs.append(LABEL_MSG)
    return errs


def dns1123_subdomain(value, prefix=False):
    if prefix:
        value = _mask_prefix(value)
    errs = []
    if len(value) > 253:
        errs.append(max_len_msg(253))
    if not _SUBDOMAIN_RE.match(value):
        errs.append(SUBDOMAIN_MSG)
    return errs


def dns1035_label(value, prefix=False):
    if prefix:
        value = _mask_prefix(value)
    errs = []
    if len(value) > 63:
        errs.append(max_len_msg(63))
    if not _DNS1035_RE.match(value):
        errs.append(DNS1035_MSG)
    return errs


def path_segment(value, prefix=False):
    """path.IsValidPathSegmentName / Prefix: RBAC names such as "system:node"."""
    errs = []
    if not prefix and value in (".", ".."):
        errs.append("may not be '%s'" % value)
    for ch in ("/", "%"):
        if ch in value:
            errs.append("may not contain '%s'" % ch)
    return errs


def _mask_prefix(value):
    # apimachinery maskTrailingDash: a generateName prefix may end with '-'.
    if len(value) > 1 and value.endswith("-"):
        return value[:-2] + "a"
    return value


def qualified_name(value):
    """IsQualifiedName: label keys, resource names like nvidia.com/gpu."""
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain(prefix))
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is '%s') with an optional "
                "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')" % QUALIFIED_NAME_FMT]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_msg(63))
    if name and not _QUALIFIED_RE.match(name):
        errs.append(QUALIFIED_MSG)
    return errs


def label_value(value):
    errs = []
    if len(value) > 63:
        errs.append(max_len_msg(63))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(LABEL_VALUE_MSG)
    return errs


# Name rule per resource key; anything not listed uses DNS-1123 subdomain (the
# rule of most built-in kinds and of every custom resource).
_NAME_RULES = {
    "namespaces": dns1123_label,
    "services": dns1035_label,
    "roles.rbac.authorization.k8s.io": path_segment,
    "rolebindings.rbac.authorization.k8s.io": path_segment,
    "clusterroles.rbac.authorization.k8s.io": path_segment,
    "clusterrolebindings.rbac.authorization.k8s.io": path_segment,
    "events": path_segment,
    "events.k8s.io": path_segment,
    "serviceaccounts": dns1123_subdomain,
}


def name_rule(resource):
    return _NAME_RULES.get(resource, dns1123_subdomain)


def validate_object_meta(resource, obj, old=None):
    """ValidateObjectMeta subset: name, generateName, labels, annotations."""
    meta = obj.get("metadata") or {}
    errs = []
    name = meta.get("name")
    rule = name_rule(resource)
    if old is None:
        gen = meta.get("generateName")
        if gen:
            for msg in rule(gen, prefix=True):
                errs.append(FieldError("Invalid value", "metadata.generateName", gen, msg))
        if not name:
            errs.append(FieldError("Required value", "metadata.name", None,
                                   "name or generateName is required"))
        else:
            for msg in rule(name):
                errs.append(FieldError("Invalid value", "metadata.name", name, msg))
            if resource == "cronjobs.batch" and len(name) > 52:
                # CronJob names feed Job names (+11 chars) and label values.
                errs.append(FieldError("Invalid value", "metadata.name", name, max_len_msg(52)))
            if resource == "customresourcedefinitions.apiextensions.k8s.io":
                spec = obj.get("spec") or {}
                want = "%s.%s" % ((spec.get("names") or {}).get("plural", ""),
                                  spec.get("group", ""))
                if name != want:
                    errs.append(FieldError("Invalid value", "metadata.name", name,
                                           'must be spec.names.plural+"."+spec.group'))
    errs.extend(validate_labels(meta.get("labels"), "metadata.labels"))
    errs.extend(validate_annotations(meta.get("annotations"), "metadata.annotations"))
    return errs


def validate_labels(labels, path):
    errs = []
    if not labels:
        return errs
    if not isinstance(labels, dict):
        return errs
    for key, value in labels.items():
        for msg in qualified_name(key):
            errs.append(FieldError("Invalid value", path, key, msg))
        if value is None:
            continue
        if not isinstance(value, str):
            continue
        for msg in label_value(value):
            errs.append(FieldError("Invalid value", path, value, msg))
    return errs


TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def validate_annotations(annotations, path):
    errs = []
    if not annotations or not isinstance(annotations, dict):
        return errs
    total = 0
    for key, value in annotations.items():
        for msg in qualified_name(key.lower()):
            errs.append(FieldError("Invalid value", path, key, msg))
        total += len(key) + len(value or "")
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(FieldError("Too long", path, None,
                               "may not be more than %d bytes" % TOTAL_ANNOTATION_SIZE_LIMIT,
                               reason="FieldValueTooLong"))
    return errs
