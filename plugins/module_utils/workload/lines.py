# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The log lines the acceptance programs print (stage.py, train.py, load.py).

Every line that matters is one JSON object with "event" and "time" (unix seconds). Anything
in front of the object (kubectl's --timestamps, a torchrun "[default0]:" rank prefix) and
every other line (warnings, tracebacks, progress bars) is ignored; a line cut in the middle
(the log read while the program writes) is ignored too, and is read complete next time.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def read(text):
    """[{event, time, ...}] of the contract lines in `text`, in log order."""
    found = []
    for raw in (text or "").splitlines():
        start = raw.find("{")
        if start < 0:
            continue
        try:
            obj = json.loads(raw[start:])
        except ValueError:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
            continue
        try:
            obj["time"] = float(obj.get("time"))
        except (TypeError, ValueError):
            continue
        found.append(obj)
    return found


def events(lines, name, after=None):
    """The lines of one event, optionally only those after the time `after`."""
    return [line for line in lines if line["event"] == name and (after is None or line["time"] > after)]


def first(lines, name, after=None):
    hits = events(lines, name, after)
    return hits[0] if hits else None


def last(lines, name, after=None):
    hits = events(lines, name, after)
    return hits[-1] if hits else None


def number(line, key, default=0.0):
    """A numeric field of a line (0 when absent or not a number: a reader never fails on a value)."""
    try:
        return float(line.get(key))
    except (TypeError, ValueError):
        return default
