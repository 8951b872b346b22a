"""The `simcluster` fixture and its hooks, a pytest plugin (the test kit's plugin, tests/kit/plugin.py,
registers it for tests/ and simcluster/tests).

Pick the cluster file with `pytestmark = pytest.mark.cluster("file.yaml")` (resolved in
tests/clusters/; default tests/clusters/default.yaml).
"""
import pytest

from simcluster import testing

simcluster = testing.fixture()


def pytest_configure(config):
    testing.configure(config)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    testing.add_stderr_to_failures(item, call, outcome)
