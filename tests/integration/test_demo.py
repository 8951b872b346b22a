"""`make demo` must keep working: run scripts/demo.py as the README says and read its output."""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.normpath(os.path.join(REPO, "..", "shared", "fixtures", "nvidia-smi"))

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


def test_demo_runs_the_main_job_end_to_end():
    if not os.path.isdir(FIXTURES):
        pytest.skip("../shared (nvidia-smi captures, CRDs) not found next to the repo")
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "demo.py")], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    # the mixed fleet is detected: operator installs the driver, the H100 host keeps its own
    assert re.search(r'"driver.enabled": true', out)
    assert re.search(r'"gpu-h100-1": \{\s*"nvidia.com/gpu.deploy.driver": "false"', out)
    assert "CUDA vectorAdd passed on a MIG slice" in out
    # what the platform offers at the end: 8 H100 x 7 MIG slices, 4 L40S x 4 time-slices
    assert re.search(r'"gpu-h100-1": \{\s*"nvidia.com/gpu": "56"', out)
    assert re.search(r'"gpu-l40s-1": \{\s*"nvidia.com/gpu": "16"', out)
    assert re.search(r"localhost\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0", out)
    # the real chart from ../shared, not a stand-in
    assert "gpu-operator-v26.7.0" in out
