"""The package dependency order of the contract, checked on the source.

module_utils never imports a filter, a module or a plugin_utils file (those are leaves: a filter is a
thin wrapper over module_utils, not a library), and its packages depend one way:
core <- node <- gpu_operator/sharing/mig <- tenants/queues/quota/monitoring <- acceptance/design/gitops.
Packages of one tier may use each other, but never in a cycle.
"""
import ast
import glob
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.normpath(os.path.join(HERE, "..", "..", "..", "plugins"))
MODULE_UTILS = os.path.join(PLUGINS, "module_utils")
PREFIX = "ansible_collections.skaffon.gpu_platform.plugins."
TIERS = [("core",), ("node",), ("gpu_operator", "sharing", "mig"), ("tenants", "queues", "quota", "monitoring"),
         ("acceptance", "design", "gitops", "audit_policy", "workload")]
TIER = dict((package, index) for index, names in enumerate(TIERS) for package in names)


def _imports(path):
    """Every collection-internal dotted name `path` imports (module and module.name for `from` imports)."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            for alias in node.names:
                yield "%s.%s" % (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    yield alias.name


def _files():
    for root, _dirs, names in os.walk(MODULE_UTILS):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, MODULE_UTILS).split(os.sep)
                yield path, rel[0][:-3] if len(rel) == 1 else rel[0]


FILES = list(_files())


def _package(dotted):
    """The module_utils package a dotted import names (None outside module_utils)."""
    rest = dotted[len(PREFIX):].split(".")
    return rest[1] if rest[0] == "module_utils" and len(rest) > 1 else None


def test_every_module_utils_package_has_a_tier():
    assert set(package for _path, package in FILES if package != "__init__") <= set(TIER)


@pytest.mark.parametrize("path,package", FILES, ids=[os.path.relpath(f[0], MODULE_UTILS) for f in FILES])
def test_module_utils_imports_no_leaf_and_nothing_above_it(path, package):
    for dotted in _imports(path):
        kind = dotted[len(PREFIX):].split(".")[0]
        assert kind == "module_utils", "%s imports %s: module_utils must not import a %s" % (path, dotted, kind)
        target = _package(dotted)
        if package in TIER and target in TIER:
            assert TIER[target] <= TIER[package], (
                "%s (tier %s) imports %s (tier %s): dependencies go core <- node <- gpu_operator/sharing/mig <- "
                "tenants/queues/quota/monitoring <- acceptance/design/gitops" % (
                    path, TIER[package], dotted, TIER[target]))


def test_no_cycle_between_packages():
    edges = {}
    for path, package in FILES:
        for dotted in _imports(path):
            target = _package(dotted)
            if target and target != package and target in TIER:
                edges.setdefault(package, set()).add(target)

    def reach(start, seen):
        for nxt in edges.get(start, ()):
            if nxt not in seen:
                seen.add(nxt)
                reach(nxt, seen)
        return seen

    cycles = sorted(p for p in edges if p in reach(p, set()))
    assert not cycles, "packages in an import cycle: %s (%r)" % (cycles, edges)


def test_the_checker_sees_the_imports_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ansible_collections.skaffon.gpu_platform.plugins.filter.node_pools import x\n"
                   "from ansible_collections.skaffon.gpu_platform.plugins.module_utils import gitops\n")
    found = list(_imports(str(bad)))
    assert found[0].startswith(PREFIX + "filter.") and _package(found[1]) == "gitops"


@pytest.mark.parametrize("module", ["export_files", "usage_report", "gpu_node_facts"])
def test_modules_without_a_cluster_do_not_load_the_kubernetes_client(module):
    """They run where no kubernetes client is installed (a GPU host, a file export)."""
    path = os.path.join(PLUGINS, "modules", module + ".py")
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module] + [
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if n.startswith("ansible_collections.kubernetes") or n.endswith("module_base")]


def test_filters_translate_errors_in_one_place():
    """A filter raises the domain's DomainError; plugin_utils/filter_errors.py alone makes it Ansible's."""
    filters = sorted(glob.glob(os.path.join(PLUGINS, "filter", "*.py")))
    assert filters
    for path in filters:
        with open(path) as handle:
            assert "AnsibleFilterError" not in handle.read(), path
