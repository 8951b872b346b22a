"""One HTTP request as the API server's handlers read it, and its decoded body."""

import json

from . import protobuf
from .errors import ApiError, bad_request

try:
    import yaml
    _YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:  # pragma: no cover
    yaml = None

PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}


class Request:
    """What a handler needs from the HTTP request."""

    def __init__(self, method, path, query, headers, body):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.warnings = []

    def q(self, name, default=None):
        return self.query.get(name, default)

    def flag(self, name):
        return self.query.get(name, "").lower() in ("1", "true")

    @property
    def dry_run(self):
        return self.query.get("dryRun") == "All"

    @property
    def accept(self):
        return self.headers.get("Accept") or ""

    @property
    def content_type(self):
        return (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()



def decode_body(req, allow_yaml=False):
    body = req.body
    if not body:
        raise bad_request("the body of the request was empty")
    ct = req.content_type
    if ct == protobuf.CONTENT_TYPE:
        try:
            return protobuf.decode(body)
        except (protobuf.ProtobufError, UnicodeDecodeError) as exc:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                           "unknown format: %s" % exc)
    try:
        return json.loads(body)
    except ValueError as exc:
        if (allow_yaml or "yaml" in ct) and yaml is not None:
            try:
                return yaml.load(body, Loader=_YAML_LOADER)
            except yaml.YAMLError as yexc:
                raise bad_request("error decoding YAML: %s" % yexc)
        raise bad_request("json: cannot unmarshal request body: %s" % exc)

