"""playbooks/images.yml: the images an air-gapped site mirrors, from the real chart and an inventory."""
import os

import pytest
import yaml

from kit.paths import REPO, gpu_operator_chart
from kit.playbook import run_playbook

CHART = gpu_operator_chart("v26.7.0")
MIRROR = "mirror.example:5000/nvidia"

pytestmark = [pytest.mark.slow, pytest.mark.needs_shared]


def inventory(tmp_path, **settings):
    if not os.path.exists(CHART):
        pytest.skip("real chart not found: %s" % CHART)
    inv = tmp_path / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}}))
    base = {"gpu_operator_chart_version": "v26.7.0", "gpu_operator_chart_source": "archive",
            "gpu_operator_chart_ref": CHART, "gpu_operator_helm_binary": os.path.join(REPO, ".venv", "bin", "helm")}
    base.update(settings)
    (inv / "group_vars" / "all.yml").write_text(yaml.safe_dump(base))
    return str(inv)


def test_mirror_site_lists_every_image_with_its_mirror_reference(tmp_path):
    out = tmp_path / "out"
    inv = inventory(tmp_path, gpu_operator_image_mirror=MIRROR, images_driver_os=["ubuntu22.04", "ubuntu24.04"])
    res = run_playbook(os.path.join(REPO, "playbooks", "images.yml"), dict(os.environ), inventory=inv,
                       extra_vars={"images_output_dir": str(out)})
    assert res.rc == 0, res
    lines = (out / "images.txt").read_text().splitlines()
    pairs = dict(line.split(" ") for line in lines)
    assert pairs["nvcr.io/nvidia/gpu-operator:v26.7.0"] == MIRROR + "/nvidia/gpu-operator:v26.7.0"
    assert "nvcr.io/nvidia/driver:595.91.07-ubuntu24.04" in pairs
    assert all(dest.startswith(MIRROR + "/") for dest in pairs.values())
    again = run_playbook(os.path.join(REPO, "playbooks", "images.yml"), dict(os.environ), inventory=inv,
                         extra_vars={"images_output_dir": str(out)})
    assert again.rc == 0 and again.changed() == 0, again


def test_user_set_repositories_are_mirrored_too(tmp_path):
    # vgpuManager is a private image the user names; with sandbox workloads on it must come from the mirror too
    out = tmp_path / "out"
    inv = inventory(tmp_path, gpu_operator_image_mirror=MIRROR, gpu_operator_values={
        "sandboxWorkloads": {"enabled": True},
        "vgpuManager": {"enabled": True, "repository": "registry.example.com/private", "image": "vgpu-manager",
                        "version": "17.0"}})
    res = run_playbook(os.path.join(REPO, "playbooks", "images.yml"), dict(os.environ), inventory=inv,
                       extra_vars={"images_output_dir": str(out)})
    assert res.rc == 0, res
    pairs = dict(line.split(" ") for line in (out / "images.txt").read_text().splitlines())
    assert pairs["registry.example.com/private/vgpu-manager:17.0"] == MIRROR + "/private/vgpu-manager:17.0"
