"""Integration: playbooks/design_report.yml regenerates docs/design-example byte for byte from inventories/example."""
import filecmp
import os

from kit.paths import REPO
from kit.playbook import run_playbook

REPORT = os.path.join(REPO, "playbooks", "design_report.yml")
EXAMPLE_INVENTORY = os.path.join(REPO, "inventories", "example")
EXAMPLE_REPORT = os.path.join(REPO, "docs", "design-example")
REGENERATE = ("ansible-playbook -i inventories/example playbooks/design_report.yml "
              "-e design_report_dir=$PWD/docs/design-example")


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_example_report_is_regenerated_byte_identical(tmp_path):
    out = str(tmp_path / "report")
    res = run_playbook(REPORT, dict(os.environ), inventory=EXAMPLE_INVENTORY, extra_vars={"design_report_dir": out})
    assert res.rc == 0, res
    assert _files(out) == _files(EXAMPLE_REPORT), "regenerate with: " + REGENERATE
    match, mismatch, errors = filecmp.cmpfiles(out, EXAMPLE_REPORT, _files(out), shallow=False)
    assert not mismatch and not errors, "differs: %s; regenerate with: %s" % (mismatch + errors, REGENERATE)
    # the same inventory again: nothing changes
    again = run_playbook(REPORT, dict(os.environ), inventory=EXAMPLE_INVENTORY, extra_vars={"design_report_dir": out})
    assert again.rc == 0 and again.changed() == 0, again


def test_report_needs_an_output_directory():
    res = run_playbook(REPORT, dict(os.environ), inventory=EXAMPLE_INVENTORY)
    assert res.rc != 0
    assert "Set design_report_dir" in " ".join(res.failure_messages())


def test_refused_design_writes_nothing(tmp_path):
    """Time-slicing asked for a pool of mixed trust is refused before any file is written."""
    out = tmp_path / "report"
    pools = {"pool_h100_nvlink_training": {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8,
                                           "teams": ["team-vision", "team-nlp"], "allocation": "time-slicing"},
             "pool_l40s_inference": {"gpu_product": "NVIDIA-L40S", "gpus_per_node": 4, "teams": ["team-inference"]}}
    res = run_playbook(REPORT, dict(os.environ), inventory=EXAMPLE_INVENTORY,
                       extra_vars={"design_report_dir": str(out), "platform_pools": pools})
    assert res.rc != 0
    msg = " ".join(res.failure_messages())
    assert "platform_pools.pool_h100_nvlink_training.allocation: time-slicing refused" in msg, msg
    assert not out.exists()


def test_check_mode_writes_nothing(tmp_path):
    out = tmp_path / "report"
    res = run_playbook(REPORT, dict(os.environ), inventory=EXAMPLE_INVENTORY,
                       extra_vars={"design_report_dir": str(out)}, check=True)
    assert res.rc == 0, res
    assert res.changed() > 0 and not out.exists()
