"""The JSONPath subset CRD additionalPrinterColumns use (k8s.io/client-go/util/jsonpath).

Supported: `.field`, `.field\\.with\\.dots`, `['field']`, `[N]` (negative from the
end), `[*]` / `.*`, filters `[?(@.a.b=="v")]`, `[?(@.a!="v")]`, `[?(@.a)]`.
Missing keys give no result (the server sets AllowMissingKeys).
"""

import json
import re

_FILTER = re.compile(r"""^\?\(@((?:\.[^=!)\s]+)+)\s*
                          (?:(==|!=)\s*(?:"([^"]*)"|'([^']*)'|([^)\s]+)))?\s*\)$""", re.X)


class JSONPathError(ValueError):
    pass


def parse(expr):
    """Steps: ("key", name) | ("index", n) | ("all", None) | ("filter", (path, op, value))."""
    text = expr.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    steps, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == ".":
            i += 1
            name = []
            while i < len(text) and text[i] not in ".[":
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                name.append(text[i])
                i += 1
            name = "".join(name)
            if name == "*":
                steps.append(("all", None))
            elif name:
                steps.append(("key", name))
        elif ch == "[":
            end = _closing(text, i)
            inner = text[i + 1:end].strip()
            i = end + 1
            if inner == "*":
                steps.append(("all", None))
            elif inner[:1] in "'\"" and inner[-1:] == inner[:1] and len(inner) >= 2:
                steps.append(("key", inner[1:-1]))
            elif re.fullmatch(r"-?\d+", inner):
                steps.append(("index", int(inner)))
            else:
                m = _FILTER.match(inner)
                if not m:
                    raise JSONPathError("unsupported JSONPath expression %r" % expr)
                value = next((g for g in m.group(3, 4, 5) if g is not None), None)
                steps.append(("filter", (parse(m.group(1)), m.group(2), value)))
        elif ch.isspace():
            i += 1
        else:
            raise JSONPathError("unrecognized character %r in JSONPath %r" % (ch, expr))
    return steps


def _closing(text, start):
    quote = None
    for j in range(start + 1, len(text)):
        c = text[j]
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "]":
            return j
    raise JSONPathError("unclosed [ in JSONPath %r" % text)


def find(steps, obj):
    """All values the path selects, in document order."""
    current = [obj]
    for kind, arg in steps:
        nxt = []
        for v in current:
            if kind == "key":
                if isinstance(v, dict) and arg in v:
                    nxt.append(v[arg])
            elif kind == "index":
                if isinstance(v, list) and -len(v) <= arg < len(v):
                    nxt.append(v[arg])
            elif kind == "all":
                if isinstance(v, dict):
                    nxt.extend(v[k] for k in sorted(v))
                elif isinstance(v, list):
                    nxt.extend(v)
            else:
                path, op, want = arg
                for item in (v if isinstance(v, list) else []):
                    got = find(path, item)
                    if op is None:
                        keep = bool(got)
                    else:
                        same = bool(got) and go_text(got[0]) == want
                        keep = same if op == "==" else (bool(got) and not same)
                    if keep:
                        nxt.append(item)
        current = nxt
    return current


def go_text(value):
    """How jsonpath.PrintResults prints one value: maps and lists as compact JSON,
    scalars the way Go's fmt prints them."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    return str(value)
