"""Folding inputs and cycles into the queue state (no broker)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from schemas.config import PriorityClassDefined
from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobRejected
from schemas.envelope import Message
from schemas.intents import CancelJob, ChangePriority, ResumeJob, ScaleJob, SuspendJob
from schemas.jobs import JobRecorded
from schemas.runs import DispatchFailed, JobStopped, RunEvicted, RunFailed, RunStarted, RunSucceeded
from schemas.status import JobStatusChanged
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import CycleOutcome, run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import Out, QueueState
from services.queue_manager.status import WAITING_REFRESH_S
from tests.queue_manager.builders import (
    NOW,
    T0,
    config_messages,
    folded_state,
    node,
    of_type,
    run_fields,
    submit,
)

CFG = SchedulerConfig(min_runtime_s=0.0)


def feed(qs: QueueState, msg: Message, now: float = NOW, event_id: str | None = None) -> list[Out]:
    return on_input(qs, msg, event_id or uuid.uuid4().hex, now)


def cycle(qs: QueueState, now: float = NOW) -> CycleOutcome:
    return run_cycle(qs, now, CFG)


def admitted_running(qs: QueueState, job_id: str, **kw: object) -> JobAdmitted:
    feed(qs, submit(job_id, **kw))  # type: ignore[arg-type]
    out = cycle(qs)
    (admitted,) = of_type(out.decisions, JobAdmitted)
    feed(qs, RunStarted(**run_fields(job_id, admitted.attempt), pods_running=1, pods_total=1))
    assert isinstance(admitted, JobAdmitted)
    return admitted


def test_submit_then_cycle_admits_with_record_first() -> None:
    qs = folded_state()
    outs = feed(qs, submit("j1"))
    assert [type(o.message) for o in outs] == [JobRecorded, JobStatusChanged]
    assert of_type(outs, JobRecorded)[0].record.state == "pending"
    out = cycle(qs)
    (admitted,) = of_type(out.decisions, JobAdmitted)
    assert (admitted.job_id, admitted.attempt, admitted.namespace) == ("j1", 0, "ns-team-a")
    assert admitted.placement.cluster == "east" and admitted.placement.nodes[0].node == "east-a100-0"
    assert of_type(out.records, JobRecorded)[0].record.state == "admitted"
    assert of_type(out.statuses, JobStatusChanged)[0].state == "admitted"
    assert qs.sched.free_gpus("east-a100-0") == 0
    assert out.waits == [("team-a", 10.0)]


def test_running_then_succeeded_frees_capacity() -> None:
    qs = folded_state()
    admitted_running(qs, "j1")
    assert qs.jobs["j1"].state == "running"
    outs = feed(qs, RunSucceeded(**run_fields("j1")))
    assert of_type(outs, JobStatusChanged)[0].state == "succeeded"
    assert qs.sched.free_gpus("east-a100-0") == 8 and "j1" not in qs.sched.running


def test_duplicate_submit_and_redelivered_event_are_no_ops() -> None:
    qs = folded_state()
    assert feed(qs, submit("j1"), event_id="e1")
    assert feed(qs, submit("j1"), event_id="e1") == []
    assert feed(qs, submit("j1", gpus=4), event_id="e2") == []
    assert qs.jobs["j1"].spec.template.resources.gpus == 8


def test_stale_attempt_is_ignored() -> None:
    qs = folded_state()
    admitted_running(qs, "j1")
    assert feed(qs, RunSucceeded(**run_fields("j1", attempt=3))) == []
    assert feed(qs, RunFailed(**run_fields("j1", attempt=1), reason="Error")) == []
    assert qs.jobs["j1"].state == "running"


def test_cancel_pending_job() -> None:
    qs = folded_state(nodes=0)
    feed(qs, submit("j1"))
    outs = feed(qs, CancelJob(job_id="j1", requested_by="alice"))
    assert of_type(outs, JobRecorded)[0].record.state == "cancelled"
    assert not of_type(outs, JobPreemptionRequested)
    assert "j1" not in qs.sched.pending
    assert of_type(outs, JobStatusChanged)[0].last_action.outcome == "applied"  # type: ignore[union-attr]
    again = feed(qs, CancelJob(job_id="j1", requested_by="alice"), event_id="second")
    assert not of_type(again, JobRecorded)  # nothing changed: only the answer is told
    (status,) = of_type(again, JobStatusChanged)
    assert status.last_action is not None
    assert (status.last_action.event_id, status.last_action.outcome) == ("second", "unchanged")
    assert feed(qs, CancelJob(job_id="j1", requested_by="alice"), event_id="second") == []  # redelivered


def test_cancel_running_job_preempts_without_requeue_then_cancels() -> None:
    qs = folded_state()
    admitted_running(qs, "j1")
    outs = feed(qs, CancelJob(job_id="j1", requested_by="alice", reason="wrong data"))
    (req,) = of_type(outs, JobPreemptionRequested)
    assert (req.reason, req.requeue, req.attempt, req.cluster) == ("cancelled", False, 0, "east")
    assert qs.jobs["j1"].state == "preempting"
    again = feed(qs, CancelJob(job_id="j1", requested_by="alice"))
    assert of_type(again, JobPreemptionRequested) and not of_type(again, JobRecorded)
    outs = feed(qs, JobStopped(**run_fields("j1"), reason="cancelled", requeue=True))
    assert of_type(outs, JobRecorded)[0].record.state == "cancelled"
    assert qs.sched.free_gpus("east-a100-0") == 8 and "j1" not in qs.sched.pending


def test_eviction_requeues_with_next_attempt_and_readmits() -> None:
    qs = folded_state()
    admitted_running(qs, "j1")
    outs = feed(qs, RunEvicted(**run_fields("j1"), reason="NodeLost", node="east-a100-0"))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.attempt, rec.placement) == ("pending", 1, None)
    (admitted,) = of_type(cycle(qs).decisions, JobAdmitted)
    assert admitted.attempt == 1
    assert feed(qs, RunEvicted(**run_fields("j1", 0), reason="NodeLost")) == []  # the old attempt


def test_run_failed_shows_the_restart_and_the_dispatcher_ends_the_job() -> None:
    qs = folded_state()
    admitted_running(qs, "j1", max_restarts=1)
    outs = feed(qs, RunFailed(**run_fields("j1"), reason="Error", exit_code=1, restarts=0))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.restarts, rec.reason) == ("running", 1, "restarting")
    # the restarted revision fails too: the budget is spent, but the dispatcher says when the job is over
    assert feed(qs, RunFailed(**run_fields("j1"), reason="Error", message="exit 1", restarts=1)) == []
    assert qs.jobs["j1"].state == "running" and qs.sched.free_gpus("east-a100-0") == 0
    outs = feed(qs, DispatchFailed(**run_fields("j1"), reason="restarts_exhausted", message="gang failed 2 times"))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.reason) == ("failed", "restarts_exhausted")
    assert qs.sched.free_gpus("east-a100-0") == 8


def test_a_failure_reported_twice_counts_one_restart_and_keeps_the_gpus() -> None:
    # two pods of one gang, or a re-report after the node watcher restarts: the dispatcher restarts once,
    # so the job must keep its GPUs while it does
    qs = folded_state()
    admitted_running(qs, "j1", max_restarts=1)
    first = feed(qs, RunFailed(**run_fields("j1"), reason="Error", pod="j1-a0-0-abcde", restarts=0))
    assert of_type(first, JobRecorded)[0].record.restarts == 1
    assert feed(qs, RunFailed(**run_fields("j1"), reason="Error", pod="j1-a0-1-fghij", restarts=0)) == []
    assert (qs.jobs["j1"].state, qs.jobs["j1"].restarts) == ("running", 1)
    assert qs.sched.free_gpus("east-a100-0") == 0


def test_a_job_out_of_time_fails_at_once() -> None:
    qs = folded_state()
    admitted_running(qs, "j1", max_restarts=3)
    outs = feed(qs, RunFailed(**run_fields("j1"), reason="DeadlineExceeded", message="too long", restarts=0))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.reason, rec.message) == ("failed", "DeadlineExceeded", "too long")
    assert qs.sched.free_gpus("east-a100-0") == 8


def test_non_retryable_dispatch_failure_fails_the_job() -> None:
    qs = folded_state()
    feed(qs, submit("j1"))
    cycle(qs)
    outs = feed(qs, DispatchFailed(**run_fields("j1"), reason="invalid", message="webhook denied"))
    assert of_type(outs, JobRecorded)[0].record.state == "failed"


def test_a_retryable_dispatch_failure_requeues_the_attempt_and_frees_its_gpus() -> None:
    qs = folded_state()
    feed(qs, submit("j1"))
    cycle(qs)
    assert qs.jobs["j1"].state == "admitted" and qs.sched.free_gpus("east-a100-0") < 8
    outs = feed(qs, DispatchFailed(**run_fields("j1"), reason="api_unavailable", message="503", retryable=True))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.attempt, rec.reason) == ("pending", 1, "api_unavailable")
    assert rec.restarts == 0  # not the job's fault: no restart spent
    assert qs.sched.free_gpus("east-a100-0") == 8
    (again,) = of_type(cycle(qs).decisions, JobAdmitted)
    assert (again.job_id, again.attempt) == ("j1", 1)


def test_a_retryable_failure_of_a_running_jobs_rescale_changes_nothing() -> None:
    qs = folded_state()
    admitted_running(qs, "j1")
    assert feed(qs, DispatchFailed(**run_fields("j1"), reason="api_unavailable", message="x", retryable=True)) == []
    assert qs.jobs["j1"].state == "running"


def test_unknown_priority_class_and_unknown_queue_are_rejected() -> None:
    qs = folded_state()
    outs = feed(qs, submit("j1", priority_class="urgent"))
    (rej,) = of_type(outs, JobRejected)
    assert rej.reason == "unknown_priority_class" and "urgent" in rej.message
    feed(qs, submit("j2", queue="nowhere"))
    (rej2,) = of_type(cycle(qs).decisions, JobRejected)
    assert (rej2.job_id, rej2.reason) == ("j2", "unknown_queue")
    assert qs.jobs["j2"].state == "rejected"


def test_with_no_priority_class_configured_any_class_is_queued_at_priority_zero() -> None:
    """As the gateway accepts it: a cluster file without priority classes does not reject every job."""
    qs = QueueState()
    for msg in config_messages(64):
        if not isinstance(msg, PriorityClassDefined):
            qs.fold_config(msg.key(), msg)
    n = node("east-a100-0", 8)
    qs.fold_capacity(n.key(), n)
    feed(qs, submit("j1", priority_class="normal"))
    assert qs.jobs["j1"].state == "pending" and qs.jobs["j1"].priority == 0
    (adm,) = of_type(cycle(qs).decisions, JobAdmitted)
    assert adm.job_id == "j1" and adm.priority == 0


def test_unchanged_status_is_not_republished() -> None:
    qs = folded_state(nodes=0)
    feed(qs, submit("j1"))
    first = cycle(qs)
    (status,) = of_type(first.statuses, JobStatusChanged)
    assert status.state == "pending" and status.reason and status.position == 0
    assert cycle(qs).statuses == []
    assert cycle(qs, NOW + 1).statuses == []


def test_a_waiting_jobs_position_is_republished_at_most_every_refresh_but_changes_of_state_at_once() -> None:
    qs = folded_state(nodes=0)
    for i in range(3):
        feed(qs, submit(f"j{i}", offset_s=i))
    positions = {s.job_id: s.position for s in of_type(cycle(qs).statuses, JobStatusChanged)}
    assert positions == {"j0": 0, "j1": 1, "j2": 2}
    cancelled = of_type(feed(qs, CancelJob(job_id="j0", requested_by="alice"), NOW + 1), JobStatusChanged)
    assert [(s.job_id, s.state) for s in cancelled] == [("j0", "cancelled")]  # j1 and j2 move up, but
    assert cycle(qs, NOW + 1).statuses == []  # their new positions wait for the refresh
    later = NOW + WAITING_REFRESH_S
    assert {s.job_id: s.position for s in of_type(cycle(qs, later).statuses, JobStatusChanged)} == {"j1": 0, "j2": 1}
    outs = feed(qs, ChangePriority(job_id="j2", priority_class="high", requested_by="alice"), later + 1)
    (changed,) = of_type(outs, JobStatusChanged)
    assert (changed.job_id, changed.priority_class) == ("j2", "high")  # at once
    (moved,) = of_type(cycle(qs, later + 1).statuses, JobStatusChanged)
    assert (moved.job_id, moved.position) == ("j2", 0)  # and its first new position with the next cycle


def test_the_status_key_read_from_an_entry_is_the_key_of_the_status_built_from_it() -> None:
    """``StatusBook`` compares keys read straight from entries and builds a status only to publish it."""
    from services.queue_manager.status import build_status, entry_key, status_key

    qs = folded_state(nodes=1)
    keys = []

    def check(now: float) -> None:
        for entry in qs.jobs.values():
            keys.append(entry_key(entry))
            assert keys[-1] == status_key(build_status(entry, now))

    for i in range(3):
        feed(qs, submit(f"j{i}", offset_s=i, gpus=4))
    check(NOW)
    cycle(qs)  # two admitted, one waiting with a position and an estimated start
    check(NOW)
    feed(qs, RunStarted(**run_fields("j0"), pods_running=1, pods_total=1))
    feed(qs, RunSucceeded(**run_fields("j0")))
    feed(qs, SuspendJob(job_id="j2", requested_by="alice"))
    check(NOW + 1)
    assert len(set(keys)) >= 5


def test_high_priority_preempts_then_victim_requeues_and_returns() -> None:
    qs = folded_state()
    admitted_running(qs, "low")
    feed(qs, submit("high", priority_class="high", offset_s=1))
    out = cycle(qs)
    (req,) = of_type(out.decisions, JobPreemptionRequested)
    assert (req.job_id, req.reason, req.preemptor, req.requeue) == ("low", "higher_priority", "high", True)
    assert not of_type(out.decisions, JobAdmitted)
    feed(qs, JobStopped(**run_fields("low"), reason="higher_priority", requeue=True, checkpointed=True))
    assert (qs.jobs["low"].state, qs.jobs["low"].attempt) == ("pending", 1)
    (adm,) = of_type(cycle(qs).decisions, JobAdmitted)
    assert adm.job_id == "high"
    feed(qs, RunSucceeded(**run_fields("high")))
    (again,) = of_type(cycle(qs).decisions, JobAdmitted)
    assert (again.job_id, again.attempt) == ("low", 1)


def test_suspend_resume_priority_and_scale_of_waiting_job() -> None:
    qs = folded_state(nodes=0)
    feed(qs, submit("j1", replicas=2))
    entry = qs.jobs["j1"]
    assert entry.state == "pending"
    feed(qs, SuspendJob(job_id="j1", requested_by="alice"))
    assert "j1" in qs.sched.suspended and qs.jobs["j1"].record().state == "suspended"
    feed(qs, ScaleJob(job_id="j1", replicas=3, requested_by="alice"))
    assert qs.sched.suspended["j1"].replicas == 3
    feed(qs, ResumeJob(job_id="j1", requested_by="alice"))
    assert qs.sched.pending["j1"].replicas == 3
    outs = feed(qs, ChangePriority(job_id="j1", priority_class="high", requested_by="admin"))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.priority, rec.submission.spec.priority_class) == (1000, "high")
    assert qs.sched.pending["j1"].priority == 1000
    again = feed(qs, ChangePriority(job_id="j1", priority_class="high", requested_by="admin"))
    assert not of_type(again, JobRecorded)
    assert of_type(again, JobStatusChanged)[0].last_action.outcome == "unchanged"  # type: ignore[union-attr]


def test_an_unhealthy_node_preempts_with_requeue_once_its_grace_is_over() -> None:
    qs = folded_state()
    admitted_running(qs, "j1")
    sick = node("east-a100-0", healthy=False)  # observed at T0, which says since when
    qs.fold_capacity(sick.key(), sick)
    grace = SchedulerConfig().node_unhealthy_grace_s
    assert not of_type(cycle(qs, T0.timestamp() + grace - 1).decisions, JobPreemptionRequested)
    (req,) = of_type(cycle(qs, T0.timestamp() + grace).decisions, JobPreemptionRequested)
    assert (req.reason, req.requeue) == ("node_unhealthy", True)


def test_a_node_not_ready_for_a_moment_preempts_nothing() -> None:
    qs = folded_state()
    admitted_running(qs, "j1")
    sick = node("east-a100-0", healthy=False, unhealthy_since=datetime.fromtimestamp(NOW - 1, UTC))
    qs.fold_capacity(sick.key(), sick)
    assert not of_type(cycle(qs).decisions, JobPreemptionRequested)
    well = node("east-a100-0")
    qs.fold_capacity(well.key(), well)
    assert not of_type(cycle(qs, NOW + 3600).decisions, JobPreemptionRequested)


def test_a_retried_delivery_resends_the_current_record_and_preemption() -> None:
    qs = folded_state()
    admitted_running(qs, "j1")
    cancel = CancelJob(job_id="j1", requested_by="alice")
    first = on_input(qs, cancel, "cancel-1", NOW)
    assert on_input(qs, cancel, "cancel-1", NOW) == []
    again = on_input(qs, cancel, "cancel-1", NOW, retry=True)
    assert [type(o.message) for o in again] == [JobRecorded, JobPreemptionRequested, JobStatusChanged]
    assert of_type(again, JobRecorded)[0].record == of_type(first, JobRecorded)[0].record
