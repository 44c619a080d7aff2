"""Jobs that wait for others: held out of the scheduler, released, ended when their dependency cannot hold."""

from __future__ import annotations

from schemas.decisions import JobAdmitted, JobRejected
from schemas.intents import CancelJob, ResumeJob, SubmitJob, SuspendJob
from schemas.jobspec import DependencySpec
from schemas.runs import JobStopped, RunStarted, RunSucceeded
from schemas.status import JobStatusChanged
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.dependencies import UNKNOWN_WAIT_S
from services.queue_manager.recovery import rebuild
from tests.queue_manager.builders import folded_state, of_type, run_fields, submit
from tests.queue_manager.test_recovery import CFG, Journal


def after(*jobs: str, on: str = "succeeded") -> list[DependencySpec]:
    return [DependencySpec(job=j, on=on) for j in jobs]  # type: ignore[arg-type]


def status(j: Journal, job_id: str) -> JobStatusChanged:
    return j.statuses[job_id]


def chain() -> Journal:
    """train -> evaluate -> publish, each waiting for the one before to succeed."""
    j = Journal(folded_state(nodes=2))
    j.feed(submit("train"))
    j.feed(submit("evaluate", after=after("train"), offset_s=1))
    j.feed(submit("publish", after=after("evaluate"), offset_s=2))
    return j


def test_a_chain_runs_in_order() -> None:
    j = chain()
    assert [a.job_id for a in of_type(j.cycle(), JobAdmitted)] == ["train"]  # 2 nodes free, only train may go
    assert status(j, "evaluate").reason == "waiting_for_dependencies"
    assert status(j, "evaluate").message == "waits for train (succeeded)"
    assert "evaluate" not in j.qs.sched.pending and "evaluate" in j.qs.held
    j.feed(RunStarted(**run_fields("train"), pods_running=1, pods_total=1))
    j.feed(RunSucceeded(**run_fields("train")))
    assert "evaluate" in j.qs.sched.pending and status(j, "evaluate").reason != "waiting_for_dependencies"
    assert [a.job_id for a in of_type(j.cycle(), JobAdmitted)] == ["evaluate"]
    j.feed(RunSucceeded(**run_fields("evaluate")))
    assert [a.job_id for a in of_type(j.cycle(), JobAdmitted)] == ["publish"]


def test_a_failed_dependency_cancels_the_rest_of_the_chain() -> None:
    j = chain()
    j.cycle()
    j.feed(CancelJob(job_id="train", requested_by="alice"))
    j.feed(JobStopped(**run_fields("train"), requeue=False, checkpointed=False, reason="cancelled"))
    assert j.qs.jobs["train"].state == "cancelled"
    assert (status(j, "evaluate").state, status(j, "evaluate").reason) == ("cancelled", "dependency_failed")
    assert "train ended cancelled, not succeeded" in status(j, "evaluate").message
    assert (status(j, "publish").state, status(j, "publish").reason) == ("cancelled", "dependency_failed")
    assert not j.qs.held and of_type(j.cycle(), JobAdmitted) == []


def test_on_failed_and_on_finished_and_the_fail_policy() -> None:
    j = Journal(folded_state(nodes=2))
    j.feed(submit("train"))
    j.feed(submit("alert", after=after("train", on="failed"), on_dependency_failure="fail", offset_s=1))
    j.feed(submit("cleanup", after=after("train", on="finished"), offset_s=2))
    j.cycle()
    j.feed(RunSucceeded(**run_fields("train")))
    assert (status(j, "alert").state, status(j, "alert").reason) == ("failed", "dependency_failed")
    assert "cleanup" in j.qs.sched.pending


def named(job_id: str, name: str, offset_s: float) -> SubmitJob:
    msg = submit(job_id, offset_s=offset_s)
    return msg.model_copy(update={"spec": msg.spec.model_copy(update={"name": name})})


def test_names_resolve_to_the_tenants_latest_job_of_that_name() -> None:
    j = Journal(folded_state(nodes=1))
    j.feed(named("train-1", "train", 0))
    j.cycle()
    j.feed(RunSucceeded(**run_fields("train-1")))
    j.feed(named("train-2", "train", 5))
    j.feed(submit("eval", after=after("train"), offset_s=6))
    assert status(j, "eval").message == "waits for train-2 (succeeded)"  # the latest train, not the done one


def test_an_unknown_dependency_waits_then_is_rejected() -> None:
    j = Journal(folded_state(nodes=1))
    j.feed(submit("eval", after=after("train")))
    assert status(j, "eval").message == "waits for train (succeeded, not known yet)"
    j.feed(submit("train", offset_s=1))  # arrives later (another partition): eval now waits for it
    assert status(j, "eval").message == "waits for train (succeeded)"
    j.feed(submit("report", after=after("nobody")))
    late = j.qs.jobs["report"].submission.submitted_at.timestamp() + UNKNOWN_WAIT_S
    out = run_cycle(j.qs, late, CFG)
    (rej,) = of_type(out.decisions, JobRejected)
    assert (rej.job_id, rej.reason) == ("report", "unknown_dependency")
    assert j.qs.jobs["eval"].state == "pending"  # train is known: eval keeps waiting


def test_jobs_waiting_for_each_other_are_rejected() -> None:
    j = Journal(folded_state(nodes=1))
    j.feed(submit("a", after=after("b")))
    outs = j.feed(submit("b", after=after("a"), offset_s=1))
    assert sorted(r.job_id for r in of_type(outs, JobRejected)) == ["a", "b"]
    assert j.qs.jobs["a"].reason == "dependency_cycle" and "a -> b -> a" in j.qs.jobs["a"].message


def test_suspend_and_resume_keep_waiting() -> None:
    j = chain()
    j.feed(SuspendJob(job_id="evaluate", requested_by="alice"))
    assert j.qs.jobs["evaluate"].state == "suspended"
    j.feed(ResumeJob(job_id="evaluate", requested_by="alice"))
    assert status(j, "evaluate").reason == "waiting_for_dependencies" and "evaluate" not in j.qs.sched.pending


def test_a_restart_keeps_waiting_jobs_held_and_released_ones_queued() -> None:
    j = chain()
    j.cycle()
    j.feed(RunSucceeded(**run_fields("train")))  # evaluate released, publish still waits
    fresh = folded_state(nodes=2)
    rebuild(fresh, j.records.values())
    assert "evaluate" in fresh.sched.pending and "publish" not in fresh.sched.pending
    assert "publish" in fresh.held
    assert fresh.jobs["publish"].reason == "waiting_for_dependencies"


def test_a_longer_cycle_is_found_and_other_waiting_jobs_stay() -> None:
    j = Journal(folded_state(nodes=1))
    j.feed(submit("other", after=after("train")))
    j.feed(submit("a", after=after("c"), offset_s=1))
    j.feed(submit("b", after=after("a"), offset_s=2))
    outs = j.feed(submit("c", after=after("b"), offset_s=3))
    assert sorted(r.job_id for r in of_type(outs, JobRejected)) == ["a", "b", "c"]
    assert j.qs.jobs["other"].state == "pending" and "other" in j.qs.held
