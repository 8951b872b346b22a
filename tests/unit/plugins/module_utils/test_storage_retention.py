"""Retention of the teams' claims: which PersistentVolumeClaims playbooks/storage_retention.yml deletes."""
import datetime

from ansible_collections.skaffon.gpu_platform.plugins.filter.storage_retention import expired_claims as filt
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.tenants.storage_retention import RETENTION_LABEL, expired_claims

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.timezone.utc)


def claim(name, created, days, ns="team-a"):
    labels = {} if days is None else {RETENTION_LABEL: days}
    return {"metadata": {"name": name, "namespace": ns, "creationTimestamp": created, "labels": labels}}


def pod(claim_name, phase="Running", ns="team-a"):
    return {"metadata": {"name": "p-" + claim_name, "namespace": ns}, "status": {"phase": phase},
            "spec": {"volumes": [{"name": "c", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def test_a_claim_past_its_days_is_expired_and_one_within_is_kept():
    out = expired_claims([claim("old", "2026-10-01T12:00:00Z", "30"), claim("new", "2026-11-20T12:00:00Z", "30"),
                          claim("forever", "2020-01-01T00:00:00Z", None)], [], NOW)
    assert [e["name"] for e in out["expired"]] == ["old"]
    assert out["expired"][0]["retention_days"] == 30 and out["expired"][0]["age_days"] == 61.0
    assert out["delete"] == [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                              "metadata": {"name": "old", "namespace": "team-a"}}]
    assert out["errors"] == []


def test_a_claim_a_running_pod_mounts_is_kept_and_a_finished_pods_is_not():
    claims = [claim("busy", "2026-01-01T00:00:00Z", "1"), claim("done", "2026-01-01T00:00:00Z", "1"),
              claim("other-ns", "2026-01-01T00:00:00Z", "1", ns="team-b")]
    out = expired_claims(claims, [pod("busy"), pod("done", "Succeeded"), pod("other-ns", ns="team-a")], NOW)
    assert [e["name"] for e in out["kept_in_use"]] == ["busy"]
    assert [(e["namespace"], e["name"]) for e in out["expired"]] == [("team-a", "done"), ("team-b", "other-ns")]


def test_zero_days_expires_at_once_and_bad_values_are_named_and_kept():
    out = expired_claims([claim("now", "2026-12-01T11:59:00Z", "0"), claim("bad", "2020-01-01T00:00:00Z", "30d"),
                          claim("neg", "2020-01-01T00:00:00Z", "-1")], [], NOW)
    assert [e["name"] for e in out["expired"]] == ["now"]
    assert len(out["errors"]) == 2
    assert "team-a/bad" in out["errors"][0] and "'30d' is not a whole number of days" in out["errors"][0]


def test_the_filter_takes_an_iso_time_and_defaults_to_now():
    claims = [claim("old", "2026-10-01T12:00:00Z", "30")]
    assert filt(claims, [], "2026-10-15T00:00:00Z")["expired"] == []
    assert [e["name"] for e in filt(claims, [])["expired"]] == ["old"]
