"""Rebuilding the queue state from ``muster.jobs`` after a restart.

Pending and suspended jobs are queued again; admitted, running and preempting jobs are re-admitted
on their recorded placement (at their recorded admission time), preempting ones marked terminating.
Decisions whose delivery the record cannot prove (admitted but never seen running, preemption
under way) are returned to be published again with the same job id and attempt: records are
produced before their decisions, so a crash between the two leaves exactly these, and the
dispatcher treats a repeated decision as a no-op.
"""

from __future__ import annotations

from collections.abc import Iterable

from schemas.jobs import JobRecord
from schemas.status import JobStatusChanged
from services.core import Admit, Preempt
from services.queue_manager.dependencies import WAITING, queue_or_hold
from services.queue_manager.entries import JobEntry
from services.queue_manager.queue_state import Out, QueueState
from services.spec.core_types import main_role_name, placement_from_plan


def rebuild(qs: QueueState, records: Iterable[tuple[JobRecord, str | None]]) -> list[Out]:
    """Fold recorded jobs (with the id of the input that last changed each) into an empty state."""
    republish: list[Out] = []
    waiting: list[JobEntry] = []  # held for their dependencies when recorded
    entries = [(JobEntry.from_record(rec), cause) for rec, cause in records]
    entries.sort(key=lambda e: e[0].admitted_at.timestamp() if e[0].admitted_at is not None else 0.0)
    for entry, cause in entries:
        if not qs.config.owns_queue(entry.spec.queue):
            continue  # recorded by the shard of another pool
        qs.add(entry)
        entry.last_action = qs.statuses.answer(entry.job_id)
        qs.remember(cause)
        qs.dirty[entry.job_id] = None
        if entry.terminal:
            runtime = entry.full_size_runtime()
            if runtime is not None:
                qs.sched.learn(qs.core_job(entry), runtime)  # what finished jobs taught survives a restart
            continue
        if entry.spec.after and (entry.state == "suspended" or entry.reason == WAITING):
            if entry.state == "pending":
                waiting.append(entry)  # judged once every record is in
            continue  # a suspended one is judged when it is resumed
        job = qs.core_job(entry)
        qs.sched.submit(job)
        if entry.state == "suspended":
            qs.sched.suspend(entry.job_id)
            continue
        if not entry.holding:
            continue
        if entry.placement is None or entry.admitted_at is None:
            entry.requeue("recovered", "record of an admitted job had no placement")
            qs.sched.cancel(entry.job_id)
            qs.sched.submit(qs.core_job(entry))
            republish.append(qs.record(entry))
            continue
        admitted_at = entry.admitted_at.timestamp()
        placement = placement_from_plan(entry.placement, main_role_name(entry.spec))
        qs.sched.apply(Admit(entry.job_id, entry.attempt, placement, entry.replicas, entry.borrowed,
                             bought=entry.bought), admitted_at)
        if entry.state == "admitted":
            republish.append(qs.admitted(entry))
        elif entry.state == "preempting":
            grace = entry.grace_period_s
            preempt = Preempt(entry.job_id, entry.attempt, entry.reason, grace, requeue=entry.requeue_on_stop)
            qs.sched.apply(preempt, admitted_at)
            republish.append(qs.preemption(entry, grace))
    for entry in waiting:
        republish += queue_or_hold(qs, entry, None)
    qs.woken.clear()  # every held job was just judged
    return republish


def seed_statuses(qs: QueueState, statuses: Iterable[JobStatusChanged]) -> None:
    """Remember what ``muster.status`` already says, so unchanged statuses are not published again (read
    before or after ``rebuild``)."""
    qs.statuses.seed(statuses)
    for job_id, entry in qs.jobs.items():
        if entry.last_action is None:
            entry.last_action = qs.statuses.answer(job_id)
