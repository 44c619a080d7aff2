"""Every request about an existing job is answered in the job's status: applied, unchanged or refused with
the reason, so whoever asked is told (the gateway waits for it) instead of the queue manager's log alone."""

from __future__ import annotations

from schemas.config import QueueConfig, QueueDefined, ResourceQuotaConfig, TenantConfig, TenantDefined
from schemas.envelope import Message
from schemas.intents import CancelJob, ChangePriority, ResumeJob, ScaleJob, SuspendJob
from schemas.jobs import JobRecorded
from schemas.runs import RunStarted, RunSucceeded
from schemas.status import ActionOutcome, JobStatusChanged
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import Out, QueueState
from services.queue_manager.recovery import rebuild, seed_statuses
from tests.queue_manager.builders import NOW, folded_state, of_type, run_fields, submit
from tests.queue_manager.test_non_preemptible import INFERENCE

CFG = SchedulerConfig(min_runtime_s=0.0)


def ask(qs: QueueState, msg: Message, event_id: str) -> tuple[list[Out], ActionOutcome]:
    outs = on_input(qs, msg, event_id, NOW)
    (status,) = of_type(outs, JobStatusChanged)
    assert status.last_action is not None and status.last_action.event_id == event_id
    return outs, status.last_action


def running(qs: QueueState, job_id: str, **kw: object) -> None:
    on_input(qs, submit(job_id, **kw), f"submit-{job_id}", NOW)  # type: ignore[arg-type]
    run_cycle(qs, NOW, CFG)
    on_input(qs, RunStarted(**run_fields(job_id), pods_running=1, pods_total=1), f"started-{job_id}", NOW)
    assert qs.jobs[job_id].state == "running"


def test_requests_a_running_job_cannot_take_are_refused_with_the_reason() -> None:
    qs = folded_state()
    running(qs, "j1")
    for n, (msg, reason) in enumerate([
        (SuspendJob(job_id="j1", requested_by="alice"), "not_waiting"),
        (ScaleJob(job_id="j1", replicas=2, requested_by="alice"), "not_waiting"),
        (ResumeJob(job_id="j1", requested_by="alice"), "not_suspended"),
        (ChangePriority(job_id="j1", priority_class="nope", requested_by="alice"), "unknown_priority_class"),
    ]):
        outs, answer = ask(qs, msg, f"req-{n}")
        assert (answer.outcome, answer.reason, answer.requested_by) == ("refused", reason, "alice"), msg
        assert answer.message and not of_type(outs, JobRecorded)  # told why; nothing about the job changed
    assert qs.jobs["j1"].state == "running"


def test_applied_and_unchanged_requests_are_told_apart() -> None:
    qs = folded_state(nodes=0)
    on_input(qs, submit("j1"), "submit", NOW)
    outs, answer = ask(qs, SuspendJob(job_id="j1", requested_by="alice"), "suspend-1")
    assert answer.outcome == "applied" and of_type(outs, JobRecorded)[0].record.state == "suspended"
    assert ask(qs, SuspendJob(job_id="j1", requested_by="alice"), "suspend-2")[1].outcome == "unchanged"
    assert ask(qs, ResumeJob(job_id="j1", requested_by="bob"), "resume")[1].outcome == "applied"
    assert ask(qs, ResumeJob(job_id="j1", requested_by="bob"), "resume-2")[1].outcome == "unchanged"
    assert ask(qs, ScaleJob(job_id="j1", replicas=2, requested_by="bob"), "scale")[1].outcome == "applied"
    assert on_input(qs, ScaleJob(job_id="j1", replicas=2, requested_by="bob"), "scale", NOW) == []  # redelivery


def test_a_request_about_a_finished_job_is_refused() -> None:
    qs = folded_state()
    running(qs, "j1")
    on_input(qs, RunSucceeded(**run_fields("j1")), "done", NOW)
    _, answer = ask(qs, ChangePriority(job_id="j1", priority_class="high", requested_by="alice"), "late")
    assert (answer.outcome, answer.reason) == ("refused", "job_finished")
    assert "succeeded" in answer.message
    assert ask(qs, CancelJob(job_id="j1", requested_by="alice"), "cancel")[1].reason == "job_finished"


def test_a_non_preemptible_class_is_refused_to_a_job_running_on_borrowed_quota() -> None:
    """The issue's case: the queue manager used to log "ignoring ChangePriority" and tell nobody."""
    qs = folded_state(nodes=2, quota=8)
    for msg in (INFERENCE, TenantDefined(item=TenantConfig(name="team-a", namespace="ns-team-a",
                                                           allow_non_preemptible=True)),
                QueueDefined(item=QueueConfig(name="team-b", cohort="research", tenant="team-a",
                                              quotas={"gpu:a100": ResourceQuotaConfig(nominal=8)}))):
        qs.fold_config(msg.key(), msg)
    running(qs, "own")
    running(qs, "borrower")  # team-a's nominal 8 is used by "own": this one borrows team-b's
    assert qs.jobs["borrower"].borrowed
    _, answer = ask(qs, ChangePriority(job_id="borrower", priority_class="inference", requested_by="alice"), "p")
    assert (answer.outcome, answer.reason) == ("refused", "runs_on_borrowed_quota")
    assert "borrowed" in answer.message
    assert qs.jobs["borrower"].spec.priority_class == "normal"


def test_the_answer_is_not_held_back_by_the_waiting_refresh() -> None:
    """A waiting job's new position waits for the refresh; an answer is published at once."""
    qs = folded_state(nodes=0)
    on_input(qs, submit("j1"), "submit", NOW)
    run_cycle(qs, NOW, CFG)  # its position is published
    _, answer = ask(qs, ChangePriority(job_id="j1", priority_class="nope", requested_by="alice"), "soon")
    assert answer.outcome == "refused"


def test_the_last_answer_survives_a_restart_without_being_published_again() -> None:
    qs = folded_state(nodes=0)
    on_input(qs, submit("j1"), "submit", NOW)
    outs, answer = ask(qs, ChangePriority(job_id="j1", priority_class="nope", requested_by="alice"), "before")
    (status,) = of_type(outs, JobStatusChanged)
    records = [(qs.jobs["j1"].record(), "before")]
    for order in ("seed first", "rebuild first"):
        fresh = folded_state(nodes=0)
        if order == "seed first":
            seed_statuses(fresh, [status])
            rebuild(fresh, records)
        else:
            rebuild(fresh, records)
            seed_statuses(fresh, [status])
        assert fresh.jobs["j1"].last_action == answer, order
        assert all(o.message.last_action == answer for o in run_cycle(fresh, NOW, CFG).statuses), order
