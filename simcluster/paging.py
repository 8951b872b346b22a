"""List paging as the API server does it: ListOptions checks, continue tokens, limits.

A continue token pins the resourceVersion of the first page and the (namespace, name) key
the next page starts after, so every page comes from one consistent snapshot.
"""

import base64
import json

from .errors import ApiError, bad_request


def list_options_invalid(field, detail):
    return ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: %s: Forbidden: %s'
                    % (field, detail), {"kind": "ListOptions", "group": "meta.k8s.io",
                                        "causes": [{"reason": "FieldValueForbidden",
                                                    "message": "Forbidden: " + detail,
                                                    "field": field}]})


def check_list_options(rv, match, cont):
    """ValidateListOptions of k8s.io/apimachinery (list requests)."""
    if match and match not in ("Exact", "NotOlderThan"):
        raise ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: '
                       'resourceVersionMatch: Unsupported value: "%s": supported values: '
                       '"Exact", "NotOlderThan"' % match)
    if match and not rv:
        raise list_options_invalid("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                   "unless resourceVersion is provided")
    if match and cont:
        raise list_options_invalid("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                   "when continue is provided")
    if match == "Exact" and rv == "0":
        raise list_options_invalid("resourceVersionMatch", 'resourceVersionMatch "exact" is '
                                   'forbidden for resourceVersion "0"')
    if cont and rv not in ("", "0"):
        raise list_options_invalid("resourceVersion", "specifying resource version is not "
                                   "allowed when using continue")
    if rv and not rv.isdigit():
        raise bad_request('invalid resource version "%s"' % rv)


def encode_continue(rv, start):
    token = {"v": "meta.k8s.io/v1", "rv": int(rv), "start": start}
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode()


def decode_continue(cont):
    try:
        token = json.loads(base64.urlsafe_b64decode(cont.encode()))
        rv, start = int(token["rv"]), token["start"]
        if not isinstance(start, list) or len(start) != 2 or rv <= 0:
            raise ValueError(start)
    except (ValueError, KeyError, TypeError):
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion "
                          "(version meta.k8s.io/v1)")
    return rv, start


def too_large(rv, current):
    return ApiError(504, "Timeout", "Too large resource version: %s, current: %s"
                    % (rv, current), {"causes": [{"reason": "ResourceVersionTooLarge",
                                                  "message": "Too large resource version"}],
                                      "retryAfterSeconds": 1})


def expired_continue(current_rv, start):
    """410 for a continue token older than the history (the etcd compaction window); the
    Status carries a fresh token for the rest of the list, as the real server's does."""
    err = ApiError(410, "Expired",
                   "The provided continue parameter is too old to display a consistent list "
                   "result. You can start a new list without the continue parameter, or use "
                   "the continue token in this response to retrieve the remainder of the "
                   "results. Continuing with the provided token results in an inconsistent "
                   "list - objects that were created, modified, or deleted between the time "
                   "the first chunk was returned and now may show up in the list.")
    err.list_continue = encode_continue(current_rv, start)
    return err


def list_options(q, current_rv):
    """The checked ListOptions of a LIST query: (resourceVersion to read at or None, the key
    the page starts after or None, limit or 0)."""
    rv_param = q.get("resourceVersion") or ""
    match = q.get("resourceVersionMatch") or ""
    cont = q.get("continue") or ""
    try:
        limit = int(q.get("limit") or 0)
    except ValueError:
        raise bad_request('limit: Invalid value: "%s"' % q.get("limit"))
    check_list_options(rv_param, match, cont)
    at, start = None, None
    if cont:
        at, start = decode_continue(cont)
    elif match == "Exact":
        at = int(rv_param)
    elif rv_param not in ("", "0") and int(rv_param) > int(current_rv):
        raise too_large(rv_param, int(current_rv))
    return at, start, limit


def page(items, rv, start, limit, selector):
    """The items after `start`, at most `limit` of them, and the list metadata (continue token,
    remainingItemCount without selectors) for the page."""
    meta = {"resourceVersion": rv}
    if start is not None:
        items = [o for o in items if [o["metadata"].get("namespace") or "",
                                      o["metadata"]["name"]] > start]
    if limit and len(items) > limit:
        last = items[limit - 1]["metadata"]
        meta["continue"] = encode_continue(rv, [last.get("namespace") or "", last["name"]])
        if not selector:
            meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    return items, meta
