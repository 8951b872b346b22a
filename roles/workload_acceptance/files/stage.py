# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage the dataset sample and the base weights onto the data volume (workload acceptance, step 2).

    python3 stage.py --dest /data --source sample=https://data.example.com/sample.tar [--source NAME=URL ...]

Downloads each URL into DEST/NAME with the standard library only (any image with python3 runs it).
One JSON object per line for the acceptance to read (other output is ignored):
  {"event": "staged", "name", "url", "bytes", "seconds", "time"}       per source
  {"event": "stage-failed", "name", "url", "error", "time"}             then exit 1
  {"event": "stage-done", "bytes", "seconds", "time"}                   at the end
"""

import argparse
import json
import os
import shutil
import sys
import time
import urllib.request

CHUNK = 1 << 20


def emit(event, **fields):
    fields.update(event=event, time=round(time.time(), 3))
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def source(text):
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise argparse.ArgumentTypeError("expected NAME=URL, got %r" % text)
    if "/" in name or name in (".", ".."):
        raise argparse.ArgumentTypeError("NAME must be a file name, got %r" % name)
    return name, url


def parse(argv):
    parser = argparse.ArgumentParser(description="Download the data sources onto the data volume.")
    parser.add_argument("--dest", required=True, help="directory on the data volume")
    parser.add_argument("--source", action="append", type=source, required=True, metavar="NAME=URL",
                        help="a file to download into DEST/NAME (repeat)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds without data before a source fails")
    return parser.parse_args(argv)


def download(url, path, timeout):
    """Bytes written; the file is complete or absent (a partial download is removed)."""
    part = path + ".part"
    written = 0
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(part, "wb") as out:
            while True:
                block = response.read(CHUNK)
                if not block:
                    break
                out.write(block)
                written += len(block)
            expected = response.headers.get("Content-Length")
        if expected is not None and expected.isdigit() and int(expected) != written:
            raise IOError("short read: %d of %s bytes" % (written, expected))
        os.replace(part, path)
    finally:
        if os.path.exists(part):
            os.remove(part)
    return written


def main(argv=None):
    args = parse(argv)
    os.makedirs(args.dest, exist_ok=True)
    total_bytes, started = 0, time.monotonic()
    for name, url in args.source:
        began = time.monotonic()
        try:
            size = download(url, os.path.join(args.dest, name), args.timeout)
        except Exception as exc:  # every failure is reported the same way: the source and the reason
            emit("stage-failed", name=name, url=url, error=str(exc))
            return 1
        total_bytes += size
        emit("staged", name=name, url=url, bytes=size, seconds=round(time.monotonic() - began, 3))
    free = shutil.disk_usage(args.dest).free
    emit("stage-done", bytes=total_bytes, seconds=round(time.monotonic() - started, 3), free_bytes=free)
    return 0


if __name__ == "__main__":
    sys.exit(main())
