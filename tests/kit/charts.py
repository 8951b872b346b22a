"""`helm template` of a real chart, the one way the tests render one.

Renders are cached for the session (per pytest process) by helm binary (so by helm major),
chart archive, release, namespace, values and extra arguments: many tests render the same
gpu-operator chart with the same values, and each `helm template` costs about a second.
Every call returns its own deep copy, so a test may change the documents it got.
"""
import copy
import json
import os
import subprocess
import tempfile

import pytest
import yaml

from kit import paths

_CACHE = {}
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def helm_binary(helm):
    """Path of a helm client: "helm3", "helm4", "helm" (the venv's) or a path."""
    return helm if os.path.isabs(helm) else os.path.join(paths.BIN, helm)


def render(chart, values=None, helm="helm3", release="gpu-operator", namespace="gpu-operator", args=()):
    """The non-empty documents of `helm template <release> <chart> [-n namespace] [-f values] args`.

    Skips the test when the chart archive or the helm binary is absent."""
    binary = helm_binary(helm)
    paths.need(chart)
    if not os.path.exists(binary):
        pytest.skip("helm binary %s not found" % binary)
    key = (os.path.realpath(binary), os.path.realpath(chart), os.stat(chart).st_mtime, release, namespace,
           None if values is None else json.dumps(values, sort_keys=True), tuple(args))
    if key not in _CACHE:
        _CACHE[key] = _template(binary, chart, values, release, namespace, list(args))
    return copy.deepcopy(_CACHE[key])


def _template(binary, chart, values, release, namespace, args):
    cmd = [binary, "template", release, chart]
    if namespace:
        cmd += ["-n", namespace]
    with tempfile.TemporaryDirectory(prefix="helm-values-") as tmp:
        if values is not None:
            path = os.path.join(tmp, "values.json")        # JSON is YAML: helm reads it as a values file
            with open(path, "w") as handle:
                json.dump(values, handle)
            cmd += ["-f", path]
        out = subprocess.run(cmd + args, check=True, capture_output=True, text=True, timeout=120).stdout
    return [doc for doc in yaml.load_all(out, Loader=_LOADER) if doc]


def by_kind(docs, kind):
    return [doc for doc in docs if doc.get("kind") == kind]
