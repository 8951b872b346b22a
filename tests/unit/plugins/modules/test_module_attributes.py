"""Every module documents its attributes (check mode, diff mode, platform, and its action group when
meta/runtime.yml puts it into one), the way kubernetes.core documents its modules."""
import glob
import os
import re

import pytest
import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))
MODULES = sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))
with open(os.path.join(ROOT, "meta", "runtime.yml")) as handle:
    GROUPS = yaml.safe_load(handle)["action_groups"]


def _doc(path):
    with open(path) as handle:
        return yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', handle.read(), re.S).group(1))


@pytest.mark.parametrize("path", MODULES, ids=[os.path.basename(p) for p in MODULES])
def test_attributes(path):
    name = os.path.basename(path)[:-3]
    doc = _doc(path)
    attributes = doc.get("attributes") or {}
    assert {"check_mode", "diff_mode", "platform"} <= set(attributes)
    assert "ansible.builtin.action_common_attributes" in doc["extends_documentation_fragment"]
    groups = sorted("skaffon.gpu_platform.%s" % g for g, members in GROUPS.items() if name in members)
    assert (attributes.get("action_group") or {}).get("membership", []) == groups
    if groups:
        assert "ansible.builtin.action_common_attributes.actiongroups" in doc["extends_documentation_fragment"]
