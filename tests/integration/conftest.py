"""Integration fixtures: `simcluster` runs the simulated Kubernetes cluster.

Pick the cluster file with `pytestmark = pytest.mark.cluster("file.yaml")`
(resolved in tests/clusters/; default tests/clusters/default.yaml).
"""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from simcluster import testing  # noqa: E402

simcluster = testing.fixture()


def pytest_configure(config):
    testing.configure(config)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    testing.add_stderr_to_failures(item, call, outcome)
