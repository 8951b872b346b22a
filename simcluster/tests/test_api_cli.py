"""`python -m simcluster` start-up errors: one clear line, no traceback."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start(tmp_path, cluster_text):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(cluster_text)
    return subprocess.run([sys.executable, "-m", "simcluster", "--cluster", str(cluster),
                           "--kubeconfig", str(tmp_path / "kc")], cwd=REPO, text=True,
                          capture_output=True, timeout=60), cluster


def test_missing_crd_file_is_one_line_naming_both_files(tmp_path):
    res, cluster = start(tmp_path, "crds: [../absent/nvidia.com_clusterpolicies.yaml]\n"
                                   "nodes: [{name: cpu-1}]\n")
    missing = os.path.normpath(str(tmp_path / ".." / "absent" /
                                   "nvidia.com_clusterpolicies.yaml"))
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr == "simcluster: cannot start: crds: file not found: %s " \
        "(listed in cluster file %s)\n" % (missing, cluster)
    assert not (tmp_path / "kc").exists()


def test_bad_cluster_file_is_one_line(tmp_path):
    res, cluster = start(tmp_path, "nodes: [\n")
    assert res.returncode == 1
    assert "Traceback" not in res.stderr and len(res.stderr.splitlines()) == 1
    assert res.stderr.startswith("simcluster: cannot start: cluster file %s: " % cluster)
