"""Requests from ``muster.intents`` folded into the queue state. Each is idempotent by the job's state:
applying the same request twice changes nothing the second time."""

from __future__ import annotations

import logging

from schemas.decisions import JobRejected
from schemas.envelope import Message
from schemas.intents import CancelJob, ChangePriority, ResumeJob, ScaleJob, SubmitJob, SuspendJob
from schemas.topics import DECISIONS_TOPIC
from services.core import Preempt
from services.queue_manager.dependencies import queue_or_hold
from services.queue_manager.entries import JobEntry
from services.queue_manager.state import Out, QueueState
from services.spec.preemptibility import NON_PREEMPTIBLE_NOT_ALLOWED, class_preemptible, non_preemptible_refusal
from services.spec.roles import roles_refusal

log = logging.getLogger(__name__)

UNKNOWN_PRIORITY_CLASS = "unknown_priority_class"
FORBIDDEN_QUEUE = "forbidden_queue"
PRIVILEGED_NOT_ALLOWED = "privileged_not_allowed"
_ELEVATED_FIELDS = ("privileged", "run_as_root", "host_network", "host_pid", "host_ipc", "host_path_volumes")


def on_intent(qs: QueueState, message: Message, now: float) -> list[Out]:
    if isinstance(message, SubmitJob):
        return submit(qs, message, now)
    entry = qs.jobs.get(getattr(message, "job_id", ""))
    if entry is None or entry.terminal:
        log.info("ignoring %s for %s: unknown or finished job", message.TYPE, getattr(message, "job_id", "?"))
        return []
    if isinstance(message, CancelJob):
        return cancel(qs, entry, message, now)
    if isinstance(message, SuspendJob):
        if entry.state != "pending":
            return []
        qs.sched.suspend(entry.job_id)
        entry.state, entry.reason, entry.message = "suspended", "suspended", f"suspended by {message.requested_by}"
        return [qs.record(entry)]
    if isinstance(message, ResumeJob):
        if entry.state != "suspended":
            return []
        entry.state, entry.reason, entry.message = "pending", "", ""
        if entry.spec.after:  # judged again: it may still wait for the jobs it depends on
            qs.sched.cancel(entry.job_id)
            return queue_or_hold(qs, entry, now) or [qs.record(entry)]
        qs.sched.resume(entry.job_id)
        return [qs.record(entry)]
    if isinstance(message, ChangePriority):
        return change_priority(qs, entry, message)
    if isinstance(message, ScaleJob):
        return scale(qs, entry, message)
    return []


def submit(qs: QueueState, msg: SubmitJob, now: float) -> list[Out]:
    if not qs.config.owns_queue(msg.spec.queue):
        return []  # another shard's pool: that shard records and schedules it
    if msg.job_id in qs.jobs:
        return []  # a job id is submitted once; repeats (retries, redelivery) are no-ops
    priority = qs.config.priority_value(msg.spec.priority_class)
    entry = JobEntry(submission=msg, priority=priority or 0, state="pending")
    qs.add(entry)
    refusal = refuse(qs, msg)
    if refusal is None and priority is None:
        refusal = UNKNOWN_PRIORITY_CLASS, f"unknown priority class {msg.spec.priority_class!r}"
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
        return FORBIDDEN_QUEUE, f"queue {queue.name!r} belongs to tenant {queue.tenant!r}, not {msg.tenant!r}"
    securities = [t.security for t in msg.spec.templates()]
    elevated = [] if not any(s.elevated for s in securities) else [
        name for name in _ELEVATED_FIELDS if any(getattr(s, name) for s in securities)]
    if elevated and not queue.allow_privileged:
        return PRIVILEGED_NOT_ALLOWED, f"queue {queue.name!r} does not allow {', '.join(elevated)}"
    refusal = _non_preemptible_refusal(qs, msg.tenant, msg.spec.priority_class, preemptible=msg.spec.preemptible)
    if refusal is not None:
        return NON_PREEMPTIBLE_NOT_ALLOWED, refusal
    return None


def _non_preemptible_refusal(qs: QueueState, tenant: str, priority_class: str, *, preemptible: bool) -> str | None:
    classes = qs.config.priority_classes
    refusal = non_preemptible_refusal(tenant, qs.config.tenants.get(tenant), preemptible=preemptible,
                                      priority_class=priority_class, class_config=classes.get(priority_class))
    return None if refusal is None else refusal[1]


def cancel(qs: QueueState, entry: JobEntry, msg: CancelJob, now: float) -> list[Out]:
    text = msg.reason or f"cancelled by {msg.requested_by}"
    if not entry.holding:
        qs.sched.cancel(entry.job_id)
        entry.finish("cancelled", now, "cancelled", text)
        return [qs.record(entry)]
    grace = entry.grace_period_s
    if entry.state == "preempting" and entry.reason == "cancelled":
        return [qs.preemption(entry, grace)]  # repeated: the same request again, harmless downstream
    if entry.state != "preempting":
        qs.sched.apply(Preempt(entry.job_id, entry.attempt, "cancelled", grace, requeue=False), now)
    entry.state, entry.reason, entry.message = "preempting", "cancelled", text
    return [qs.record(entry), qs.preemption(entry, grace)]


def change_priority(qs: QueueState, entry: JobEntry, msg: ChangePriority) -> list[Out]:
    value = qs.config.priority_value(msg.priority_class)
    if value is None:
        log.warning("ignoring ChangePriority of %s: unknown priority class %r", entry.job_id, msg.priority_class)
        return []
    if value == entry.priority and msg.priority_class == entry.spec.priority_class:
        return []
    refusal = _non_preemptible_refusal(qs, entry.submission.tenant, msg.priority_class, preemptible=True)
    if refusal is not None:
        log.warning("ignoring ChangePriority of %s: %s", entry.job_id, refusal)
        return []
    classes = qs.config.priority_classes
    new_class = class_preemptible(classes.get(msg.priority_class))
    unchanged = new_class == class_preemptible(classes.get(entry.spec.priority_class))
    preemptible = None if unchanged else new_class and entry.spec.preemptible  # the spec's own false still holds
    if not qs.sched.set_priority(entry.job_id, value, preemptible):
        log.warning("ignoring ChangePriority of %s to %r: it runs on borrowed quota, which only preemptible work "
                    "may use", entry.job_id, msg.priority_class)
        return []
    spec = entry.spec.model_copy(update={"priority_class": msg.priority_class})
    entry.submission = entry.submission.model_copy(update={"spec": spec})
    entry.priority = value
    return [qs.record(entry)]


def scale(qs: QueueState, entry: JobEntry, msg: ScaleJob) -> list[Out]:
    """Resize a waiting job (its gang size, of its main role for a job of several roles, for the next
    admission). Running jobs are not resized."""
    if entry.state not in ("pending", "suspended"):
        log.warning("ignoring ScaleJob of %s: only waiting jobs are resized (state %s)", entry.job_id, entry.state)
        return []
    if msg.replicas == entry.spec.main_replicas:
        return []
    spec = entry.spec.resized(msg.replicas)
    entry.submission = entry.submission.model_copy(update={"spec": spec})
    suspended = entry.state == "suspended"
    qs.sched.cancel(entry.job_id)
    qs.sched.submit(qs.core_job(entry))
    if suspended:
        qs.sched.suspend(entry.job_id)
    return [qs.record(entry)]
