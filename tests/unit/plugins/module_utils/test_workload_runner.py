"""Workload acceptance runner: order, SKIP of dependents, errors as FAIL, figures, cleanup."""

import pytest

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import ApiError, DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload import runner
from ansible_collections.skaffon.gpu_platform.tests.unit.fakekube import FakeKube


def ctx(kube=None, **params):
    return runner.Context(kube or FakeKube(), params, clock=iter(range(1000)).__next__, sleep=lambda s: None,
                          run_label="run-1")


def test_unknown_step_id_is_refused_with_the_list():
    with pytest.raises(DomainError) as err:
        runner.validate_ids(["queued-job", "queue-job"])
    assert "queue-job" in err.value.msg and "checkpoint-restore" in err.value.msg


def test_every_step_has_a_title_and_needs_name_known_steps():
    assert set(runner.TITLES) == set(runner.STEP_IDS)
    for step_id, needs in runner.NEEDS.items():
        assert step_id in runner.STEP_IDS and set(needs) <= set(runner.STEP_IDS)
        assert all(runner.STEP_IDS.index(n) < runner.STEP_IDS.index(step_id) for n in needs)


def test_steps_run_in_order_errors_fail_and_dependents_skip():
    def queued(c):
        raise ApiError("CREATE", "Job", "train", "team-a", status=403, message="forbidden")

    def staged(c):
        return runner.Result("data-staged", runner.PASS, "ok", figures={"bytes": 10, "seconds": 1.5})

    steps = {"queued-job": queued, "data-staged": staged,
             "training-window": lambda c: pytest.fail("must not run"),
             "checkpoint-restore": lambda c: pytest.fail("must not run")}
    results = runner.run(ctx(), ["checkpoint-restore", "training-window", "data-staged", "queued-job",
                                 "nccl-allreduce"], steps)
    assert [r.id for r in results] == ["queued-job", "data-staged", "nccl-allreduce", "training-window",
                                       "checkpoint-restore"]
    assert results[0].status == runner.FAIL and "HTTP 403" in results[0].summary
    assert results[1].to_dict()["figures"] == {"bytes": 10, "seconds": 1.5}
    assert results[2].status == runner.FAIL and "no implementation" in results[2].summary
    assert results[3].status == runner.SKIP and results[3].summary == "needs queued-job, which failed"
    assert results[4].status == runner.SKIP and "needs training-window" in results[4].summary


def test_domain_error_is_a_fail_with_its_message():
    def bad(c):
        raise DomainError("manifests.training has no Job")
    result = runner.run(ctx(), ["queued-job"], {"queued-job": bad})[0]
    assert (result.status, result.summary) == (runner.FAIL, "manifests.training has no Job")
    assert result.to_dict()["title"] == runner.TITLES["queued-job"]


def test_tracked_objects_live_across_steps_and_go_at_the_end():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "team-a"}}
    kube = FakeKube([job])
    seen = []

    def queued(c):
        c.track(job)
        c.state["training"] = {"job": "train"}
        return runner.Result("queued-job", runner.PASS, "admitted")

    def window(c):
        seen.append((c.state["training"]["job"], kube.get("batch/v1", "Job", "train", "team-a") is not None))
        return runner.Result("training-window", runner.PASS, "ok")

    c = ctx(kube)
    results = runner.run(c, ["queued-job", "training-window"], {"queued-job": queued, "training-window": window})
    assert [r.status for r in results] == [runner.PASS, runner.PASS]
    assert seen == [("train", True)]
    assert [(w.verb, w.kind, w.name) for w in kube.writes()] == [("DELETE", "Job", "train")]
    assert c.created == []


def test_cleanup_errors_are_evidence_of_the_last_step():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "team-a"}}
    kube = FakeKube([job], fail={("DELETE", "Job", "train"): 500})

    def queued(c):
        c.track(job)
        return runner.Result("queued-job", runner.PASS, "admitted")
    result = runner.run(ctx(kube), ["queued-job"], {"queued-job": queued})[0]
    assert any(e.startswith("cleanup failed:") for e in result.evidence)


def test_run_label_defaults_to_the_run_id_then_the_time():
    assert runner.Context(FakeKube(), {"run_id": "r7"}).run_label == "r7"
    assert runner.default_run_id(0) == "wla-19700101-000000"


def test_namespace_and_run_id_are_checked_before_anything_runs():
    runner.validate_params({"namespace": "team-a", "run_id": "wla-20261202-0800"})
    with pytest.raises(DomainError) as err:
        runner.validate_params({"namespace": "Team_A", "run_id": "run 1"})
    assert err.value.msg.startswith("namespace = 'Team_A': ") and "run_id = 'run 1': not a label value" in err.value.msg
