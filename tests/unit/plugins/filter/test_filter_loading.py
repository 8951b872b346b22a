"""Loading the filter files imports almost none of module_utils (plugin_utils/lazy_import.py says why:
ansible-core loads every filter file of the collection, compiled from source, in each worker that
runs a task using one of them)."""
import json
import os
import subprocess
import sys

from kit.paths import COLLECTIONS, REPO

# what a filter file may import when it is loaded: the error translation and node/pools.py (its
# DEFAULT_PREFIX is a default argument), with the core modules those two import
LOADED_WITH_THE_FILES = {"core", "core.errors", "core.validation", "core.plain", "node", "node.pools"}

PROBE = r"""
import glob, json, os, sys
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[sys.argv[1]])._install()
import importlib
prefix = "ansible_collections.skaffon.gpu_platform.plugins."
filters = {}
for path in sorted(glob.glob(os.path.join(sys.argv[2], "plugins", "filter", "*.py"))):
    module = importlib.import_module(prefix + "filter." + os.path.basename(path)[:-3])
    filters.update(module.FilterModule().filters())     # as ansible-core's scan calls it
loaded = sorted(m[len(prefix + "module_utils."):] for m in sys.modules if m.startswith(prefix + "module_utils."))
if len(sys.argv) > 3:       # then one filter call
    filters[sys.argv[3]](*json.loads(sys.argv[4]))
    after = sorted(m[len(prefix + "module_utils."):] for m in sys.modules if m.startswith(prefix + "module_utils."))
    loaded = {"before": loaded, "after": after}
print(json.dumps({"filters": sorted(filters), "loaded": loaded}))
"""


def probe(*call):
    out = subprocess.run([sys.executable, "-c", PROBE, COLLECTIONS, REPO] + list(call), capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def test_loading_every_filter_file_imports_only_the_error_translation_and_pools():
    result = probe()
    assert len(result["filters"]) > 40      # every filter file was loaded and listed its filters
    assert set(result["loaded"]) <= LOADED_WITH_THE_FILES, set(result["loaded"]) - LOADED_WITH_THE_FILES


def test_a_filter_call_imports_the_module_it_uses_and_no_other():
    result = probe("gpu_operator_scrub", json.dumps(["token abc in the log", ["abc"]]))
    new = set(result["loaded"]["after"]) - set(result["loaded"]["before"])
    assert "gpu_operator.values" in new
    assert not [m for m in new if m.split(".")[0] in ("tenants", "queues", "design", "acceptance", "workload", "mig")]


def test_the_lazy_module_is_the_module_once_used():
    from ansible_collections.skaffon.gpu_platform.plugins.plugin_utils.lazy_import import module_utils
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.node import labels

    lazy = module_utils("node.labels")
    assert "not imported yet" in repr(lazy)
    assert lazy.labels_to_change is labels.labels_to_change and "imported" in repr(lazy)
    try:
        lazy.no_such_function
    except AttributeError as exc:
        assert "no_such_function" in str(exc)
    else:
        raise AssertionError("a missing name must be an AttributeError")
    assert os.path.basename(labels.__file__) == "labels.py"
