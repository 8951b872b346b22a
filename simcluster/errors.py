"""API errors rendered as Kubernetes `Status` objects."""


class FieldError:
    """One field problem, formatted the way the API server's field.Error is.

    type_ is one of: "Invalid value", "Required value", "Unsupported value",
    "Forbidden", "Duplicate value", "Too long", "Not found", "field not declared in schema".
    """

    def __init__(self, type_, field, value=None, detail="", reason=None):
        self.type = type_
        self.field = field
        self.value = value
        self.detail = detail
        # Status cause reason: FieldValueInvalid, FieldValueRequired, ...
        self.reason = reason or {
            "Invalid value": "FieldValueInvalid",
            "Required value": "FieldValueRequired",
            "Unsupported value": "FieldValueNotSupported",
            "Forbidden": "FieldValueForbidden",
            "Duplicate value": "FieldValueDuplicate",
            "Too long": "FieldValueTooLong",
            "Not found": "FieldValueNotFound",
        }.get(type_, "FieldValueInvalid")

    def __str__(self):
        if self.type == "Required value" or self.value is None:
            text = "%s: %s" % (self.field, self.type)
        else:
            text = "%s: %s: %s" % (self.field, self.type, _render_value(self.value))
        return text + (": " + self.detail if self.detail else "")

    def cause(self):
        return {"reason": self.reason, "message": str(self)[len(self.field) + 2:], "field": self.field}


def _render_value(value):
    if isinstance(value, str):
        return '"%s"' % value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ApiError(Exception):
    """An error answer of the API server."""

    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self):
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def not_found(resource, name, group=""):
    qual = resource + ("." + group if group else "")
    return ApiError(404, "NotFound", '%s "%s" not found' % (qual, name),
                    {"name": name, "group": group, "kind": resource})


def already_exists(resource, name, group=""):
    qual = resource + ("." + group if group else "")
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (qual, name),
                    {"name": name, "group": group, "kind": resource})


def conflict(resource, name, group=""):
    qual = resource + ("." + group if group else "")
    return ApiError(409, "Conflict",
                    'Operation cannot be fulfilled on %s "%s": the object has been modified; '
                    "please apply your changes to the latest version and try again" % (qual, name),
                    {"name": name, "group": group, "kind": resource})


def uid_precondition(resource, name, sent, stored, group=""):
    """A write or delete that names an object by uid, when the stored object of that name is
    another one (deleted and created again): storage's Preconditions.Check, as a Conflict."""
    qual = resource + ("." + group if group else "")
    return ApiError(409, "Conflict",
                    'Operation cannot be fulfilled on %s "%s": Precondition failed: UID in precondition: %s, '
                    "UID in object meta: %s" % (qual, name, sent, stored),
                    {"name": name, "group": group, "kind": resource})


def invalid(kind, name, field_errors, group=""):
    """422 Invalid, message like: Pod "x" is invalid: [a: ..., b: ...]."""
    errs = [str(e) for e in field_errors]
    joined = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (kind, name, joined),
                    {"name": name, "group": group, "kind": kind,
                     "causes": [e.cause() for e in field_errors]})


def forbidden(resource, name, why, group=""):
    """403 Forbidden, message like: pods "x" is forbidden: exceeded quota: ..."""
    qual = resource + ("." + group if group else "")
    return ApiError(403, "Forbidden", '%s "%s" is forbidden: %s' % (qual, name, why),
                    {"name": name, "group": group, "kind": resource})


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def not_found_path():
    """404 for a URL that names no resource (not a missing object)."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})
