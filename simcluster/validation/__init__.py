"""Validation rules of the simulated API server (used by simcluster.admission)."""


def json_type(value):
    """The OpenAPI type name of a decoded JSON value ("unknown" for anything else)."""
    if value is None:
        return "null"
    if isinstance(value, bool):      # before int: bool is an int in Python
        return "boolean"
    for kind, name in ((int, "integer"), (float, "number"), (str, "string"), (list, "array"),
                       (dict, "object")):
        if isinstance(value, kind):
            return name
    return "unknown"
