"""The pytest plugin of both suites (tests/ and simcluster/tests), loaded once by pytest.ini
(`-p kit.plugin`, with tests/ and the repository root on sys.path):

- this checkout is importable as skaffon.gpu_platform: a symlink farm
  build/collections/ansible_collections/skaffon/gpu_platform -> repository root, on sys.path and in
  ANSIBLE_COLLECTIONS_PATH (playbooks run by the tests find the collection there);
- the `simcluster` fixture and its hooks (simcluster/pytest_plugin.py);
- tests marked `needs_shared` are skipped when ../shared is absent;
- the slowest test files are collected first (see SLOWEST_FIRST);
- one directory for the session's playbook runs: their AnsiballZ payload cache
  (kit/ansible_playbook.py) and the zygotes that fork them (kit/zygote.py);
- kubernetes-validate importable by the tests that validate with it, from the directory the
  Makefile installs it to (simcluster/requirements.txt): the test processes' sys.path only, never
  the module processes' (they would import it with the Kubernetes client).
"""
import os
import shutil
import sys
import tempfile

import pytest

from kit import paths
from kit import zygote_client
from kit.playbook import PYTHON, SESSION_ENV, session_dirs
from simcluster.validation.builtin_fields import KUBERNETES_VALIDATE_LIB

pytest_plugins = ["simcluster.pytest_plugin"]


def _link_collection():
    ns_dir = os.path.join(paths.COLLECTIONS, "ansible_collections", "skaffon")
    link = os.path.join(ns_dir, "gpu_platform")
    os.makedirs(ns_dir, exist_ok=True)
    if not os.path.islink(link):
        tmp = "%s.%d" % (link, os.getpid())
        os.symlink(paths.REPO, tmp)
        os.replace(tmp, link)


_link_collection()
if paths.COLLECTIONS not in sys.path:
    sys.path.insert(0, paths.COLLECTIONS)
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", paths.COLLECTIONS)
if os.path.isdir(KUBERNETES_VALIDATE_LIB) and KUBERNETES_VALIDATE_LIB not in sys.path:
    sys.path.append(KUBERNETES_VALIDATE_LIB)

SHARED_ABSENT = "../shared (upstream charts, CRDs, nvidia-smi captures) not found at %s" % paths.SHARED


def pytest_configure(config):
    # On the controller (or a run without xdist): the workers, started later, inherit the variable.
    if not os.environ.get(SESSION_ENV):
        # in /tmp whatever TMPDIR says: the zygotes' sockets are in it, and a socket's path has at
        # most 107 bytes
        config.test_session = tempfile.mkdtemp(prefix="gpu-platform-test-", dir="/tmp" if os.path.isdir("/tmp") else None)
        dirs = session_dirs(config.test_session)
        for path in dirs:
            os.mkdir(path)
        zygote_client.write_interpreter(dirs[1], PYTHON)
        os.environ[SESSION_ENV] = config.test_session


def pytest_unconfigure(config):
    session = getattr(config, "test_session", None)
    if session:
        zygote_client.stop_all(session_dirs(session)[1])
        shutil.rmtree(session, ignore_errors=True)
        os.environ.pop(SESSION_ENV, None)


# The test files that take longest, longest first (from the files' start times in a run on two cores
# shared with other runs, and their playbook counts; refresh from `--durations=0`).
# `-n N` with pytest.ini's `--dist loadfile --no-loadscope-reorder` hands whole files to the workers
# in collection order: started first, the long ones end before the many short ones, and the
# workers finish together instead of one waiting alone for a long file handed out last (xdist's
# own order, by number of tests, put the one-test demo last). Refresh when a file's time changes
# much; a file not listed keeps its place after these.
SLOWEST_FIRST = tuple("tests/integration/%s.py" % name for name in (
    "test_gpu_operator", "test_demo", "test_site_airgap_kueue", "test_site_dra", "test_queues_kai", "test_bad_inputs",
    "test_gpu_operator_upgrade", "test_module_api_errors", "test_tenants", "test_gpu_operator_inventory",
    "test_queues_kueue", "test_node_prereqs", "test_simcluster_restart", "test_monitoring",
    "test_design_templates", "test_quota_queues", "test_usage_report", "test_gitops_export",
))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if not paths.have_shared():
        skip = pytest.mark.skip(reason=SHARED_ABSENT)
        for item in items:
            if item.get_closest_marker("needs_shared") is not None:
                item.add_marker(skip)
    rank = dict((name, index) for index, name in enumerate(SLOWEST_FIRST))
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))     # stable
