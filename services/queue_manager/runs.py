"""What happened on a cluster (``muster.runs``, ``muster.dispatches``) folded into the queue state.

Events of any other attempt than the job's current one are stale and ignored. Restart rule: the
dispatcher restarts a failed gang itself, up to ``spec.max_restarts`` times per attempt, and it alone
decides when the budget is spent: its ``DispatchFailed(reason="restarts_exhausted")`` makes the job
``failed`` and frees its GPUs. A ``RunFailed`` only updates the restart count shown, taken from the
failed revision (``RunFailed.restarts``), so a failure reported twice is counted once; only a reason in
``NOT_RESTARTED_REASONS`` (the job ran out of time) ends the job at once.
"""

from __future__ import annotations

import logging

from schemas.envelope import Message
from schemas.runs import (
    NOT_RESTARTED_REASONS,
    DispatchFailed,
    JobStopped,
    RunAllPodsReady,
    RunDeleted,
    RunEvicted,
    RunFailed,
    RunStarted,
    RunSucceeded,
)
from services.queue_manager.entries import JobEntry
from services.queue_manager.state import Out, QueueState

log = logging.getLogger(__name__)


def on_run(qs: QueueState, message: Message, now: float) -> list[Out]:
    entry = qs.jobs.get(getattr(message, "job_id", ""))
    attempt = getattr(message, "attempt", None)
    if entry is None or entry.terminal or attempt != entry.attempt:
        return []  # unknown, finished, or an event of an earlier attempt
    if isinstance(message, RunStarted | RunAllPodsReady):
        if entry.state != "admitted":
            return []
        entry.state, entry.reason, entry.message = "running", "", ""
        return [qs.record(entry)]
    if not entry.holding:
        return []  # a pending job has no run of this attempt to report on
    if isinstance(message, RunSucceeded):
        qs.sched.job_finished(entry.job_id, now, succeeded=True)
        entry.finish("succeeded", now, "succeeded")
        return [qs.record(entry)]
    if isinstance(message, RunFailed):
        return _failed(qs, entry, message, now)
    if isinstance(message, RunEvicted):
        where = f" from node {message.node}" if message.node else ""
        return _stopped(qs, entry, now, entry.state != "preempting" or entry.requeue_on_stop, message.reason,
                        f"evicted{where}: {message.reason}")
    if isinstance(message, JobStopped):
        requeue = message.requeue and entry.requeue_on_stop
        return _stopped(qs, entry, now, requeue, message.reason,
                        "stopped after checkpoint" if message.checkpointed else "stopped")
    if isinstance(message, DispatchFailed):
        if message.retryable:
            return []
        qs.sched.job_finished(entry.job_id, now)
        entry.finish("failed", now, message.reason, message.message)
        return [qs.record(entry)]
    if isinstance(message, RunDeleted) and message.by == "muster" and entry.state == "preempting":
        # the dispatcher deleted the gang it was stopping (its JobStopped may follow, or be lost in a crash)
        return _stopped(qs, entry, now, entry.requeue_on_stop, entry.reason or "preempted", "stopped")
    if isinstance(message, RunDeleted) and message.by == "external":
        qs.sched.job_finished(entry.job_id, now)
        entry.finish("failed", now, "deleted_externally", "the job's objects were deleted outside Muster")
        return [qs.record(entry)]
    return []


def _failed(qs: QueueState, entry: JobEntry, msg: RunFailed, now: float) -> list[Out]:
    if msg.reason in NOT_RESTARTED_REASONS:
        qs.sched.job_finished(entry.job_id, now)
        entry.finish("failed", now, msg.reason, msg.message or f"failed: {msg.reason}")
        return [qs.record(entry)]
    limit = entry.spec.max_restarts
    done = entry.restarts if msg.restarts is None else msg.restarts
    if done >= limit or entry.state == "preempting":
        return []  # the dispatcher gives up and reports restarts_exhausted, or the job is being stopped anyway
    restarts = max(entry.restarts, done + 1)
    if restarts == entry.restarts and entry.reason == "restarting":
        return []  # a repeat of a failure already counted
    entry.restarts = restarts
    entry.reason = "restarting"
    entry.message = f"restart {restarts}/{limit} after {msg.reason}"
    return [qs.record(entry)]


def _stopped(qs: QueueState, entry: JobEntry, now: float, requeue: bool, reason: str, text: str) -> list[Out]:
    qs.sched.job_stopped(entry.job_id, now, requeue=requeue)
    if requeue:
        entry.requeue(reason, text)
        requeued = qs.sched.pending.get(entry.job_id)
        if requeued is not None:
            entry.attained_gpu_s = requeued.attained_gpu_s
    elif entry.reason == "cancelled" or reason == "cancelled":
        entry.finish("cancelled", now, "cancelled", entry.message or text)
    else:
        entry.finish("failed", now, entry.reason or reason, text)
    return [qs.record(entry)]
