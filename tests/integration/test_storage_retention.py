"""playbooks/storage_retention.yml against the simulated cluster: expired claims go, the rest stays."""
import json
import os

import pytest

from kit.paths import BIN, REPO
from kit.playbook import run_playbook

PLAYBOOK = os.path.join(REPO, "playbooks", "storage_retention.yml")
LABEL = "gpu-platform.skaffon.io/retention-days"
pytestmark = [pytest.mark.cluster("no-gpu.yaml")]


def apply(sim, obj):
    sim.run(os.path.join(BIN, "kubectl"), "apply", "-f", "-", input=json.dumps(obj))


def claims(sim):
    out = sim.run(os.path.join(BIN, "kubectl"), "get", "pvc", "-A", "-o", "json").stdout
    return sorted(c["metadata"]["name"] for c in json.loads(out)["items"])


def pvc(name, days=None):
    labels = {} if days is None else {LABEL: days}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "team-a", "labels": labels},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


@pytest.fixture(scope="module")
def claims_laid_out(simcluster):
    apply(simcluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    for obj in (pvc("expired", "0"), pvc("mounted", "0"), pvc("recent", "30"), pvc("unlabelled")):
        apply(simcluster, obj)
    # a pod that has not finished still mounts "mounted"
    apply(simcluster, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "team-a"},
                       "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}],
                                "volumes": [{"name": "c", "persistentVolumeClaim": {"claimName": "mounted"}}]}})
    return simcluster


def test_check_mode_deletes_nothing(claims_laid_out):
    res = run_playbook(PLAYBOOK, claims_laid_out.env, check=True, diff=True)
    assert res.rc == 0, res
    assert res.changed() == 1
    assert claims(claims_laid_out) == ["expired", "mounted", "recent", "unlabelled"]


def test_only_the_expired_unmounted_claim_is_deleted_then_nothing(claims_laid_out):
    res = run_playbook(PLAYBOOK, claims_laid_out.env)
    assert res.rc == 0, res
    assert claims(claims_laid_out) == ["mounted", "recent", "unlabelled"]
    kept = res.task_results("Say what is kept although expired (still mounted)")
    assert kept and "mounted" in kept[0]["msg"]
    again = run_playbook(PLAYBOOK, claims_laid_out.env)
    assert again.rc == 0 and again.changed() == 0, again.changed_tasks()


def test_a_label_that_is_not_days_is_refused_naming_the_claim(claims_laid_out):
    apply(claims_laid_out, pvc("typo", "30d"))
    res = run_playbook(PLAYBOOK, claims_laid_out.env)
    assert res.rc != 0
    assert any("team-a/typo" in m and "not a whole number of days" in m for m in res.failure_messages())
    assert "typo" in claims(claims_laid_out)
