"""pytest plugin (scripts/test_oldest_ansible.sh): the integration harness runs the
ansible-playbook of another virtual environment (GPU_PLATFORM_ANSIBLE_VENV), with that
environment's python as the module interpreter. Collections it needs (kubernetes.core,
ansible.posix for the JSON callback) sit in its site-packages; this collection comes from
build/collections as usual."""
import os
import sys

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    harness = sys.modules.get("kit.playbook")
    if harness is not None:
        harness.BIN = os.path.join(os.environ["GPU_PLATFORM_ANSIBLE_VENV"], "bin")
