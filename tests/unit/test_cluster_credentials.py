"""Cluster credentials reach every Kubernetes module the way kubernetes.core modules take them.

A module outside the `k8s` action group ignores the roles' `module_defaults` and silently falls
back to K8S_AUTH_KUBECONFIG or ~/.kube/config: another cluster than the inventory's. These tests
read the files an operator's run depends on (meta/runtime.yml, the modules, the roles' defaults
and task files), so a new module or role cannot reintroduce that.
"""
import glob
import os
import re

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES_WITH_CLUSTER = ("acceptance", "gpu_operator", "mig", "monitoring", "node_prereqs", "queues", "tenants")


def _runtime():
    with open(os.path.join(REPO, "meta", "runtime.yml")) as fh:
        return yaml.safe_load(fh)


def _members(group):
    return set(m for m in _runtime()["action_groups"][group] if isinstance(m, str))


def kubernetes_modules():
    """Modules built on GpuPlatformModule, the base of every module that talks to the API."""
    out = set()
    for path in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py")):
        with open(path) as fh:
            if "GpuPlatformModule(" in fh.read():
                out.add(os.path.basename(path)[:-3])
    return out


def test_every_kubernetes_module_is_in_the_k8s_action_group():
    modules = kubernetes_modules()
    assert {"acceptance_checks", "queues", "quota_change", "gpu_monitoring", "tenants_apply"} <= modules
    missing = sorted(modules - _members("k8s"))
    assert not missing, ("not in action group k8s (module_defaults for group/skaffon.gpu_platform.k8s "
                         "would not reach them): %s" % missing)


def test_the_k8s_group_extends_kubernetes_core_so_one_entry_sets_both():
    meta = [m for m in _runtime()["action_groups"]["k8s"] if isinstance(m, dict)]
    assert meta and meta[0]["metadata"]["extend_group"] == ["kubernetes.core.k8s"]


def test_every_role_defaults_its_credentials_to_the_site_wide_pair():
    for role in ROLES_WITH_CLUSTER:
        with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as fh:
            defaults = yaml.safe_load(fh)
        assert "gpu_platform_kubeconfig" in str(defaults["%s_kubeconfig" % role]), role
        assert "gpu_platform_context" in str(defaults["%s_context" % role]), role


def test_role_module_defaults_use_the_collection_group():
    """module_defaults in roles and playbooks name group/skaffon.gpu_platform.k8s for credentials
    (kubernetes.core's own group would miss this collection's modules)."""
    offenders = []
    for path in glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml")) + \
            glob.glob(os.path.join(REPO, "playbooks", "*.yml")):
        with open(path) as fh:
            text = fh.read()
        if re.search(r"^\s*group/kubernetes\.core\.k8s:", text, re.M):
            offenders.append(os.path.relpath(path, REPO))
    assert not offenders, offenders
