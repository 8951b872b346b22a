# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Figures from the text NVIDIA's nccl-tests print (all_reduce_perf and the other *_perf programs).

parse(text) reads the log of one run as `kubectl logs` (or a terminal) returns it and gives
{ranks, rows, avg_busbw, out_of_bounds, wrong_total, wrong_kind, errors, warnings, complete,
nccl_version, tests_version}. Pure Python, no Ansible imports (the filter nccl_results wraps it).

The table layouts it reads, as nccl-tests printed them over the years (src/common.cu, src/util.cu):
- 2017-2018: `bytes N type op | time algbw busbw res`, time in ms, `res` the largest deviation
  (`%7.0le`, e.g. 0e+00); rank lines `#   Rank  0 on host device  0 [0x00] name`; footer without '#'.
- 2019-2022: `size count type redop | time algbw busbw error`, time in us, `error` still the
  deviation; rank lines with `Pid`.
- since 2022 (NCCL 2.13): a `root` column and `#wrong`, the number of wrong elements (`%g`, so
  large counts print as 1.04858e+06); rank lines with `Group`, later with the PCI domain
  (`[0000:8f:00]`), a `# nccl-tests version` line and `# Collective test concluded`.
- optional per-iteration columns (-I 1: i_min i_max i_p99 i_cv% after each half) and a timestamp
  after the row (`2026-03-11 12:00:00`).
`#wrong` is `N/A` where nothing was checked (-c 0; in-place of some collectives).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from decimal import Decimal, InvalidOperation

# What launchers and log readers put in front of nccl-tests' own lines; stripped repeatedly.
_PREFIXES = (
    # kubectl logs --timestamps (RFC 3339)
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) "),
    # kubectl logs --prefix: "[pod/<pod>/<container>] "
    re.compile(r"^\[(?:pod|node)/[^\]\s]+\] "),
    # Open MPI --timestamp-output, glued to the tag: "Thu Aug 27 01:33:12 2020[1,0]<stdout>:"
    re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"),
    # Open MPI --tag-output "[1,0]<stdout>:" (Open MPI 5 / PRRTE add a space)
    re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>: ?"),
    # Ray (SkyPilot): "(head, rank=0, pid=3808) ", "(worker1, rank=1, pid=2769, ip=10.0.0.2) "
    re.compile(r"^\([\w.-]+(?:, \w+=[^,)]*)+\) "),
    # MPICH / Intel MPI -prepend-rank: "[0] "
    re.compile(r"^\[\d+\] "),
    # srun --label: " 0: "
    re.compile(r"^ *\d+: "),
    # pdsh / clush "host: " in front of nccl-tests' own lines (not "host: Test NCCL failure")
    re.compile(r"^[A-Za-z0-9][\w.-]*: (?=\s*(?:#|\d|$))"),
)

_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?(?:Pid\s+(\d+)\s+)?on\s+(\S+)\s+device\s+(\d+)"
                   r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
_HEADER = re.compile(r"^#?\s*(?:size|bytes)\s+(?:count|N)\s+type\s+(?:redop|op|root)\b")
_OUT_OF_BOUNDS = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG_BUSBW = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_NCCL_VERSION = re.compile(r"\bNCCL version (\S+)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)")
_WORD = re.compile(r"^[A-Za-z]\w*$")
_INT = re.compile(r"^-?\d+$")
_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")
_CLOCK = re.compile(r"^\d\d:\d\d:\d\d$")

# Lines that say why a run failed, by kind. NCCL WARN comes first: it names the cause, the
# nccl-tests lines after it only say which call failed.
_NCCL_WARN = "NCCL WARN"
_FAILURES = (
    (_NCCL_WARN, re.compile(r"\bNCCL WARN\b")),
    ("NCCL failure", re.compile(r"\bTest NCCL failure\b|^NCCL failure \S+:\d+")),
    ("CUDA failure", re.compile(r"\bTest CUDA failure\b|^Cuda failure \S+:\d+")),
    ("test timeout", re.compile(r"\bTest timeout\b")),
    ("NCCL error", re.compile(r"\bNCCL error\b")),
    ("CUDA error", re.compile(r"\bCUDA error\b")),
    ("GPU count", re.compile(r"^Invalid number of GPUs\b")),
    ("nccl-tests error", re.compile(r"^# error: \S")),
    ("MPI abort", re.compile(r"mpirun noticed that process rank|MPI_ABORT was invoked|Primary job\s+terminated normally, but \d+ process"
                             r"|mpirun detected that one or more processes exited with non-zero status")),
    ("srun error", re.compile(r"^srun: error:")),
)
# " .. host pid 123: Test failure common.cu:893" only traces a failure reported above it.
_TRACE = re.compile(r"^\s*\.\. \S+ pid \d+: Test failure \S+")
# What varies between the ranks repeating one message: NCCL's "host:pid:tid [dev] file.cc:123 ",
# nccl-tests' "host: ".
_NCCL_LINE_HEAD = re.compile(r"^\S+:\d+:\d+ \[\d+\] (?:\S+:\d+ )?")
_HOST_HEAD = re.compile(r"^\S+: (?=Test )")


def strip_prefix(line):
    """The line without what launchers and log readers put in front of it."""
    while True:
        for prefix in _PREFIXES:
            match = prefix.match(line)
            if match and match.end():
                line = line[match.end():]
                break
        else:
            return line


def _half(tokens, time_in_ms):
    """One side (out-of-place or in-place) of a row; the wrong column stays raw until the layout is known."""
    time = Decimal(tokens[0])
    half = {
        "time_us": float(time * 1000) if time_in_ms else float(time),
        "algbw": float(tokens[1]),
        "busbw": float(tokens[2]),
        "wrong": tokens[3].rstrip("*"),
    }
    if len(tokens) == 8:
        half["iterations"] = {"min_us": float(tokens[4]), "max_us": float(tokens[5]),
                              "p99_us": float(tokens[6]), "cv_pct": float(tokens[7])}
    return half


def _row(line, time_in_ms):
    tokens = line.split()
    if len(tokens) < 11 or not tokens[0].isdigit() or not tokens[1].isdigit() or not _WORD.match(tokens[2]):
        return None
    rest = tokens[3:]
    timestamp = None
    if len(rest) > 2 and _DATE.match(rest[-2]) and _CLOCK.match(rest[-1]):
        timestamp = " ".join(rest[-2:])
        rest = rest[:-2]
    # before 2022 rooted collectives (broadcast, reduce) printed root without redop, the others redop only
    redop = rest.pop(0) if _WORD.match(rest[0]) else None
    root = None
    if len(rest) in (9, 17):
        if not _INT.match(rest[0]):
            return None
        root = int(rest.pop(0))
    if len(rest) not in (8, 16):
        return None
    width = len(rest) // 2
    try:
        row = {
            "size": int(tokens[0]),
            "count": int(tokens[1]),
            "type": tokens[2],
            "redop": redop,
            "root": root,
            "out_of_place": _half(rest[:width], time_in_ms),
            "in_place": _half(rest[width:], time_in_ms),
        }
        for half in (row["out_of_place"], row["in_place"]):
            if half["wrong"] != "N/A":
                float(half["wrong"])
    except (ValueError, InvalidOperation):
        return None
    if timestamp:
        row["timestamp"] = timestamp
    return row


def _wrong_kind(header_columns, rows):
    """count (#wrong: wrong elements) or deviation (error/res: the largest relative error)."""
    if header_columns:
        return "count" if "#wrong" in header_columns else "deviation"
    for row in rows:
        for half in (row["out_of_place"], row["in_place"]):
            token = half["wrong"]
            # %5.0le prints a deviation as 0e+00 or 3e-08; a count of wrong elements is at least 1
            if token != "N/A" and "e" in token and float(token) < 1:
                return "deviation"
    return "count"


def _finish_wrong(rows, kind):
    total = None
    wrong_rows = []
    for row in rows:
        row_wrong = 0
        for half in (row["out_of_place"], row["in_place"]):
            token = half.pop("wrong")
            if token == "N/A":
                half["wrong"] = None
            elif kind == "deviation":
                half["wrong"] = float(token)
            else:
                half["wrong"] = int(float(token))
                total = (total or 0) + half["wrong"]
                row_wrong += half["wrong"]
        if row_wrong:
            wrong_rows.append(row)
    return total, wrong_rows


class _Failures(object):
    """Failure lines by kind and message, each kept once with the line it was first seen on."""

    def __init__(self):
        self.seen = {}
        self.order = []

    def add(self, kind, number, line):
        text = line.strip()
        message = _HOST_HEAD.sub("", _NCCL_LINE_HEAD.sub("", text))
        key = (kind, kind if kind == "MPI abort" else message)
        if key in self.seen:
            if kind != "MPI abort":   # one abort prints several banner lines; they are one event
                self.seen[key][2] += 1
            return
        entry = [number, kind, 1, text]
        self.seen[key] = entry
        self.order.append(entry)

    def entries(self, kinds=None):
        return [entry for entry in self.order if kinds is None or entry[1] in kinds]


def _describe(entry):
    number, kind, times, text = entry
    seen = " [seen %d times]" % times if times > 1 else ""
    return "%s (line %d): %s%s" % (kind, number, text, seen)


class _Reading(object):
    """What the lines of one log say, read one line at a time."""

    def __init__(self):
        self.ranks = []
        self.rows = []
        self.row_lines = []         # (line number, text) of every row
        self.header_columns = None
        self.time_in_ms = False
        self.avg = self.avg_line = self.oob = self.oob_line = None
        self.summary_after_rows = False
        self.nccl_version = self.tests_version = None
        self.failures = _Failures()
        self.traces = []
        self.problems = []          # (line number, message)

    def read(self, number, line):
        row = _row(line, self.time_in_ms)
        if row is not None:
            self.rows.append(row)
            self.row_lines.append((number, line.strip()))
            self.summary_after_rows = False
            return
        text = line.strip()
        match = _RANK.match(text)
        if match:
            self.ranks.append({"rank": int(match.group(1)), "host": match.group(4), "device": int(match.group(5)),
                               "gpu": match.group(7), "bus_id": match.group(6),
                               "pid": int(match.group(3)) if match.group(3) else None})
        elif _HEADER.match(text):
            self.header_columns = text.lstrip("#").split()
            self.time_in_ms = "res" in self.header_columns   # the 2017 layout printed milliseconds
        elif _OUT_OF_BOUNDS.match(text):
            self.oob, self.oob_line = int(_OUT_OF_BOUNDS.match(text).group(1)), (number, text)
        elif _AVG_BUSBW.match(text):
            self._read_avg(number, text)
        elif _TESTS_VERSION.match(text):
            self.tests_version = self.tests_version or _TESTS_VERSION.match(text).group(1)
        elif _TRACE.match(line):
            self.traces.append((number, text))
        else:
            match = _NCCL_VERSION.search(text)
            if match and self.nccl_version is None:
                self.nccl_version = match.group(1)
            for kind, pattern in _FAILURES:
                if pattern.search(text):
                    self.failures.add(kind, number, text)
                    break

    def _read_avg(self, number, text):
        match = _AVG_BUSBW.match(text)
        try:
            self.avg = float(match.group(1))
        except ValueError:
            self.problems.append((number, "unreadable average bus bandwidth (line %d): %s" % (number, text)))
            return
        self.avg_line = (number, text)
        self.summary_after_rows = bool(self.rows)
        if match.group(2) == "FAILED":
            self.problems.append((number, "average bus bandwidth below NCCL_TESTS_MIN_BW (line %d): %s" % (number, text)))

    def judge(self, wrong_rows, wrong_total, line_count):
        """Add what the figures show to the problems."""
        problems, rows, row_lines = self.problems, self.rows, self.row_lines
        if self.oob:
            problems.append((self.oob_line[0], "out of bounds values (line %d): %s" % self.oob_line))
        if wrong_rows:
            number, text = row_lines[rows.index(wrong_rows[0])]
            problems.append((number, "wrong results in %d of %d rows, %d wrong elements in all; first (line %d): %s"
                             % (len(wrong_rows), len(rows), wrong_total, number, text)))
        if self.avg == 0:
            hint = ""
            if len(self.ranks) == 1:
                hint = " (one rank: no data crosses a link)"
            elif not self.ranks:
                hint = " (every process ran alone: nccl-tests built without MPI=1?)"
            problems.append((self.avg_line[0], "average bus bandwidth is 0%s (line %d): %s" % (hint, self.avg_line[0], self.avg_line[1])))
        by_rank = {}
        for rank in self.ranks:
            by_rank.setdefault(rank["rank"], []).append(rank["host"])
        for rank_number, hosts in sorted(by_rank.items()):
            if len(hosts) > 1:
                problems.append((0, "rank %d printed by %d processes (%s): each ran alone, nccl-tests built without MPI=1?"
                                 % (rank_number, len(hosts), ", ".join(hosts))))
                break
        if not rows:
            problems.append((line_count + 1, "no result rows: the test printed no table"))
        elif not self.summary_after_rows:
            problems.append((row_lines[-1][0], "the table ends after %d rows without the '# Avg bus bandwidth' summary "
                             "(the run stopped or the log is cut); last row (line %d): %s"
                             % (len(rows), row_lines[-1][0], row_lines[-1][1])))


def parse(text):
    """The figures and failures of one nccl-tests run; see the module docstring."""
    if not isinstance(text, str):
        raise TypeError("parse() needs the log text of an nccl-tests run (str), got %s" % type(text).__name__)
    lines = text.splitlines()
    reading = _Reading()
    for number, raw in enumerate(lines, 1):
        reading.read(number, strip_prefix(raw.rstrip()))
    rows = reading.rows
    wrong_kind = _wrong_kind(reading.header_columns, rows) if rows else None
    wrong_total, wrong_rows = _finish_wrong(rows, wrong_kind)
    reading.judge(wrong_rows, wrong_total, len(lines))

    others = [entry for entry in reading.failures.entries() if entry[1] != _NCCL_WARN]
    warns = reading.failures.entries([_NCCL_WARN])
    if not others and reading.traces:
        # only the relay lines survived (the log was cut above them): they still say a test failed
        number, trace = reading.traces[0]
        others = [[number, "test failure", len(reading.traces), trace]]
    failed = bool(others or reading.problems)
    # what the log says went wrong first (in the order seen), then what the figures show
    found = sorted(others + (warns if failed else []), key=lambda entry: entry[0])
    errors = [_describe(entry) for entry in found] + [message for _line, message in sorted(reading.problems, key=lambda item: item[0])]
    return {
        "ranks": reading.ranks,
        "rows": rows,
        "avg_busbw": reading.avg,
        "out_of_bounds": reading.oob,
        "wrong_total": wrong_total,
        "wrong_kind": wrong_kind,
        "errors": errors,
        "warnings": [] if failed else [_describe(entry) for entry in warns],
        "complete": bool(rows) and reading.summary_after_rows,
        "nccl_version": reading.nccl_version,
        "tests_version": reading.tests_version,
    }
