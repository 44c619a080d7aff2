"""Requests from ``muster.intents`` folded into the queue state. Each is idempotent by the job's state:
applying the same request twice changes nothing the second time."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from schemas.decisions import JobRejected
from schemas.envelope import MAX_REASON, MAX_TEXT, Message
from schemas.intents import ACTION_OF, CancelJob, ChangePriority, ResumeJob, ScaleJob, SubmitJob, SuspendJob
from schemas.status import ActionOutcome, OutcomeName
from schemas.topics import DECISIONS_TOPIC
from services.core import Preempt
from services.queue_manager.dependencies import queue_or_hold
from services.queue_manager.entries import JobEntry, utc
from services.queue_manager.queue_state import Out, QueueState
from services.spec.preemptibility import NON_PREEMPTIBLE_NOT_ALLOWED, class_preemptible, non_preemptible_refusal
from services.spec.roles import roles_refusal

log = logging.getLogger(__name__)



class Refusal(StrEnum):
    """Why the queue manager refuses a request: the ``reason`` of a refused ``ActionOutcome`` (a request about
    an existing job) or of the dead letter of a submission it will not queue."""

    UNKNOWN_PRIORITY_CLASS = "unknown_priority_class"
    FORBIDDEN_QUEUE = "forbidden_queue"  # the queue belongs to another tenant
    PRIVILEGED_NOT_ALLOWED = "privileged_not_allowed"
    NON_PREEMPTIBLE_NOT_ALLOWED = NON_PREEMPTIBLE_NOT_ALLOWED  # the gateway refuses it for the same reason
    JOB_FINISHED = "job_finished"
    NOT_WAITING = "not_waiting"  # only a waiting job is suspended or resized
    NOT_SUSPENDED = "not_suspended"  # only a suspended job is resumed
    RUNS_ON_BORROWED_QUOTA = "runs_on_borrowed_quota"  # non-preemptible while it runs on borrowed quota


_ELEVATED_FIELDS = ("privileged", "run_as_root", "host_network", "host_pid", "host_ipc", "host_path_volumes")


@dataclass(frozen=True, slots=True)
class Answer:
    """What became of a request about an existing job (``ActionOutcome`` without its bookkeeping)."""

    outcome: OutcomeName
    reason: str = ""
    message: str = ""


APPLIED = Answer("applied")
UNCHANGED = Answer("unchanged")


def on_intent(qs: QueueState, message: Message, now: float, event_id: str = "") -> list[Out]:
    """Fold one intent. A request about an existing job is answered (``JobEntry.last_action``, published
    in its status) when it carries the ``event_id`` of its envelope."""
    if isinstance(message, SubmitJob):
        return submit(qs, message, now)
    entry = qs.jobs.get(getattr(message, "job_id", ""))
    if entry is None:
        log.info("ignoring %s for %s: unknown job", message.TYPE, getattr(message, "job_id", "?"))
        return []
    outs: list[Out] = []
    if entry.terminal:
        already = isinstance(message, CancelJob) and entry.state == "cancelled"
        answer = UNCHANGED if already else Answer("refused", Refusal.JOB_FINISHED, f"the job is already {entry.state}")
    else:
        outs, answer = act(qs, entry, message, now)
    return outs + answered(qs, entry, message, answer, event_id, now)


def act(qs: QueueState, entry: JobEntry, message: Message, now: float) -> tuple[list[Out], Answer]:
    """Apply a request to an unfinished job: what to publish, and the answer."""
    if isinstance(message, CancelJob):
        return cancel(qs, entry, message, now)
    if isinstance(message, SuspendJob):
        return suspend(qs, entry, message)
    if isinstance(message, ResumeJob):
        return resume(qs, entry, now)
    if isinstance(message, ChangePriority):
        return change_priority(qs, entry, message)
    if isinstance(message, ScaleJob):
        return scale(qs, entry, message)
    return [], UNCHANGED


def answered(qs: QueueState, entry: JobEntry, message: Message, answer: Answer, event_id: str,
             now: float) -> list[Out]:
    """Keep the answer on the job, whose next status carries it; a refusal is logged. Nothing for a request
    without an event id (a direct call) or of a type that is no request about a job."""
    action = ACTION_OF.get(message.TYPE)
    if action is None or not event_id:
        return []
    if answer.outcome == "refused":
        log.warning("refusing %s of %s: %s", message.TYPE, entry.job_id, answer.message)
    entry.last_action = ActionOutcome(
        event_id=event_id, action=action, outcome=answer.outcome, reason=answer.reason[:MAX_REASON],
        message=answer.message[:MAX_TEXT], requested_by=getattr(message, "requested_by", "?"), at=utc(now))
    qs.dirty[entry.job_id] = None
    return []


def suspend(qs: QueueState, entry: JobEntry, msg: SuspendJob) -> tuple[list[Out], Answer]:
    if entry.state == "suspended":
        return [], UNCHANGED
    if entry.state != "pending":
        return [], Answer("refused", Refusal.NOT_WAITING, f"only a waiting job is suspended; this one is {entry.state} "
                          "(cancel it, or let it be preempted)")
    qs.sched.suspend(entry.job_id)
    entry.state, entry.reason, entry.message = "suspended", "suspended", f"suspended by {msg.requested_by}"
    return [qs.record(entry)], APPLIED


def resume(qs: QueueState, entry: JobEntry, now: float) -> tuple[list[Out], Answer]:
    if entry.state == "pending":
        return [], UNCHANGED
    if entry.state != "suspended":
        return [], Answer("refused", Refusal.NOT_SUSPENDED,
                          f"only a suspended job is resumed; this one is {entry.state}")
    entry.state, entry.reason, entry.message = "pending", "", ""
    if entry.spec.after:  # judged again: it may still wait for the jobs it depends on
        qs.sched.cancel(entry.job_id)
        return queue_or_hold(qs, entry, now) or [qs.record(entry)], APPLIED
    qs.sched.resume(entry.job_id)
    return [qs.record(entry)], APPLIED


def submit(qs: QueueState, msg: SubmitJob, now: float) -> list[Out]:
    if not qs.config.owns_queue(msg.spec.queue):
        return []  # another shard's pool: that shard records and schedules it
    if msg.job_id in qs.jobs:
        return []  # a job id is submitted once; repeats (retries, redelivery) are no-ops
    priority = qs.config.priority_value(msg.spec.priority_class)
    entry = JobEntry(submission=msg, priority=priority or 0, state="pending")
    qs.add(entry)
    refusal = refuse(qs, msg)
    if refusal is None and priority is None and qs.config.priority_classes:
        # with no priority class configured at all every job has priority 0, as the gateway accepts it
        refusal = Refusal.UNKNOWN_PRIORITY_CLASS, f"unknown priority class {msg.spec.priority_class!r}"
    if refusal is not None:
        reason, text = refusal
        log.warning("rejecting submission %s: %s", msg.job_id, text)
        entry.finish("rejected", now, reason, text)
        rejected = JobRejected(job_id=msg.job_id, attempt=0, reason=reason, message=text)
        return [qs.record(entry), Out(DECISIONS_TOPIC, rejected)]
    queued = queue_or_hold(qs, entry, now)  # its first record already says whether it waits for others
    return queued or [qs.record(entry)]


def refuse(qs: QueueState, msg: SubmitJob) -> tuple[str, str] | None:
    """Why a submission must not be queued, checked again here because external producers write the
    intents topic directly: the queue belongs to another tenant (whose namespace the job would run
    in), the pod asks for elevated security the queue does not allow, or the job would not be
    preemptible and its tenant may not run such work. Unknown queues are left to the scheduler, which
    rejects them."""
    roles = roles_refusal(msg.spec)
    if roles is not None:
        return roles
    queue = qs.config.queues.get(msg.spec.queue)
    if queue is None:
        return None
    if queue.tenant != msg.tenant:
        return Refusal.FORBIDDEN_QUEUE, f"queue {queue.name!r} belongs to tenant {queue.tenant!r}, not {msg.tenant!r}"
    securities = [t.security for t in msg.spec.templates()]
    elevated = [] if not any(s.elevated for s in securities) else [
        name for name in _ELEVATED_FIELDS if any(getattr(s, name) for s in securities)]
    if elevated and not queue.allow_privileged:
        return Refusal.PRIVILEGED_NOT_ALLOWED, f"queue {queue.name!r} does not allow {', '.join(elevated)}"
    refusal = _non_preemptible_refusal(qs, msg.tenant, msg.spec.priority_class, preemptible=msg.spec.preemptible)
    if refusal is not None:
        return Refusal.NON_PREEMPTIBLE_NOT_ALLOWED, refusal
    return None


def _non_preemptible_refusal(qs: QueueState, tenant: str, priority_class: str, *, preemptible: bool) -> str | None:
    classes = qs.config.priority_classes
    refusal = non_preemptible_refusal(tenant, qs.config.tenants.get(tenant), preemptible=preemptible,
                                      priority_class=priority_class, class_config=classes.get(priority_class))
    return None if refusal is None else refusal[1]


def cancel(qs: QueueState, entry: JobEntry, msg: CancelJob, now: float) -> tuple[list[Out], Answer]:
    text = msg.reason or f"cancelled by {msg.requested_by}"
    if not entry.holding:
        qs.sched.cancel(entry.job_id)
        entry.finish("cancelled", now, "cancelled", text)
        return [qs.record(entry)], APPLIED
    grace = entry.grace_period_s
    if entry.state == "preempting" and entry.reason == "cancelled":
        return [qs.preemption(entry, grace)], UNCHANGED  # repeated: the same request again, harmless downstream
    if entry.state != "preempting":
        qs.sched.apply(Preempt(entry.job_id, entry.attempt, "cancelled", grace, requeue=False), now)
    entry.state, entry.reason, entry.message = "preempting", "cancelled", text
    return [qs.record(entry), qs.preemption(entry, grace)], APPLIED


def change_priority(qs: QueueState, entry: JobEntry, msg: ChangePriority) -> tuple[list[Out], Answer]:
    value = qs.config.priority_value(msg.priority_class)
    if value is None:
        return [], Answer("refused", Refusal.UNKNOWN_PRIORITY_CLASS, f"no priority class named {msg.priority_class!r}")
    if value == entry.priority and msg.priority_class == entry.spec.priority_class:
        return [], UNCHANGED
    refusal = _non_preemptible_refusal(qs, entry.submission.tenant, msg.priority_class, preemptible=True)
    if refusal is not None:
        return [], Answer("refused", Refusal.NON_PREEMPTIBLE_NOT_ALLOWED, refusal)
    classes = qs.config.priority_classes
    new_class = class_preemptible(classes.get(msg.priority_class))
    unchanged = new_class == class_preemptible(classes.get(entry.spec.priority_class))
    preemptible = None if unchanged else new_class and entry.spec.preemptible  # the spec's own false still holds
    if not qs.sched.set_priority(entry.job_id, value, preemptible):
        return [], Answer("refused", Refusal.RUNS_ON_BORROWED_QUOTA,
                          f"priority class {msg.priority_class!r} is not preemptible, and the job runs on borrowed "
                          "quota, which only preemptible work may use; change it while it waits, or cancel and "
                          "resubmit it")
    spec = entry.spec.model_copy(update={"priority_class": msg.priority_class})
    entry.submission = entry.submission.model_copy(update={"spec": spec})
    entry.priority = value
    return [qs.record(entry)], APPLIED


def scale(qs: QueueState, entry: JobEntry, msg: ScaleJob) -> tuple[list[Out], Answer]:
    """Resize a waiting job (its gang size, of its main role for a job of several roles, for the next
    admission). Running jobs are not resized."""
    if entry.state not in ("pending", "suspended"):
        return [], Answer("refused", Refusal.NOT_WAITING, f"only a waiting job is resized; this one is {entry.state}")
    if msg.replicas == entry.spec.main_replicas:
        return [], UNCHANGED
    spec = entry.spec.resized(msg.replicas)
    entry.submission = entry.submission.model_copy(update={"spec": spec})
    suspended = entry.state == "suspended"
    qs.sched.cancel(entry.job_id)
    qs.sched.submit(qs.core_job(entry))
    if suspended:
        qs.sched.suspend(entry.job_id)
    return [qs.record(entry)], APPLIED
