"""The action plugins of the collection's Kubernetes modules load without the kubernetes client: they
run on the controller, in the worker process of each task (core/kubeconfig.py says why)."""
import glob
import json
import os
import subprocess
import sys

from kit.paths import COLLECTIONS, REPO

PROBE = r"""
import glob, json, os, sys, time
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[sys.argv[1]] + [p for p in sys.path if p.endswith("site-packages")])._install()
import importlib
import ansible.plugins.action
loaded = []
for path in sorted(glob.glob(os.path.join(sys.argv[2], "plugins", "action", "*.py"))):
    importlib.import_module("ansible_collections.skaffon.gpu_platform.plugins.action." + os.path.basename(path)[:-3])
    loaded.append(os.path.basename(path))
print(json.dumps({"actions": loaded, "client": sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes")}))
"""


def test_every_action_plugin_loads_without_the_kubernetes_client():
    out = subprocess.run([sys.executable, "-c", PROBE, COLLECTIONS, REPO], capture_output=True, text=True,
                         check=True).stdout
    result = json.loads(out)
    assert len(result["actions"]) == len(glob.glob(os.path.join(REPO, "plugins", "action", "*.py")))
    assert "kubeconfig_action.py" not in result["actions"] and "tenants_apply.py" in result["actions"]
    assert result["client"] == [], result["client"]


def test_the_module_side_still_has_the_kubeconfig_names():
    from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core import kube, kubeconfig

    assert kube.PATH_SEPARATOR == kubeconfig.PATH_SEPARATOR == ":"
    error = kubeconfig.missing_kubeconfig("site/kubeconfig")
    assert "does not exist" in str(error) and "gpu_platform_kubeconfig" in str(error)
    assert kubeconfig.short("<urllib3.connection.HTTPConnection object at 0x7f>: refused\n  now") == "refused now"
