"""simcluster tests: the `simcluster` fixture (simcluster/pytest_plugin.py)."""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from simcluster.pytest_plugin import pytest_configure, pytest_runtest_makereport, simcluster  # noqa: E402,F401
