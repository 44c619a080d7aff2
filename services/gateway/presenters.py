"""Turning views into API bodies, pure: job views, explanations, queue summaries."""

from __future__ import annotations

from collections import Counter

from schemas.api import Explanation, HistoryItem, JobView, QueueUsage, QueueView
from schemas.config import QueueConfig
from schemas.status import JobStatusChanged, role_statuses
from schemas.usage import QueueUsageReported
from services.gateway.submissions import Submitted
from services.gateway.views import HistoryEntry

_HOLDING_GPUS = frozenset({"admitted", "running", "preempting"})


def job_from_status(status: JobStatusChanged) -> JobView:
    return JobView(**status.model_dump(exclude={"estimated_start"}), estimated_start=status.estimated_start)


def job_from_submission(entry: Submitted) -> JobView:
    """A job the status view does not show yet: state ``submitted``."""
    sub = entry.submission
    return JobView(
        job_id=sub.job_id, tenant=sub.tenant, queue=sub.spec.queue, name=sub.spec.name, state="submitted",
        priority_class=sub.spec.priority_class, replicas=sub.spec.main_replicas, gpus=sub.spec.total_gpus,
        gpu_share=sub.spec.resources.gpu_share(sub.spec.main_replicas),
        reason="Submitted", message="accepted by the gateway; waiting for the queue manager",
        submitted_at=sub.submitted_at, updated_at=sub.submitted_at,
        roles=role_statuses(sub.spec, sub.spec.main_replicas),
    )


def summary(job: JobView) -> str:
    """One human-readable line: where the job is and why."""
    why = f": {job.message}" if job.message else (f" ({job.reason})" if job.reason else "")
    if job.state == "pending":
        # counted from 1 for the next job, as every text a person reads (the API's ``position`` counts from 0)
        place = f"position {job.position + 1} in queue {job.queue}" if job.position is not None \
            else f"queue {job.queue}"
        # the time itself, not "in N min": a client shows the estimate once, counted from its own clock
        start = "unknown" if job.estimated_start is None else f"{job.estimated_start:%Y-%m-%d %H:%M:%S}Z"
        return f"pending at {place}{why}; estimated start {start}"
    if job.state == "submitted":
        return f"submitted to queue {job.queue}; not yet seen by the queue manager"
    where = f" on cluster {job.cluster}" if job.cluster else ""
    return f"{job.state}{where} (attempt {job.attempt}){why}"


def explanation(job: JobView, history: list[HistoryEntry]) -> Explanation:
    items = [HistoryItem(state=h.state, reason=h.reason, message=h.message, attempt=h.attempt, at=h.at)
             for h in history]
    if not items:
        items = [HistoryItem(state=job.state, reason=job.reason, message=job.message, attempt=job.attempt,
                             at=job.updated_at)]
    return Explanation(job=job, summary=summary(job), reason=job.reason, message=job.message,
                       position=job.position, estimated_start=job.estimated_start, history=items)


def queue_view(queue: QueueConfig, usage: QueueUsageReported | None, jobs: list[JobStatusChanged]) -> QueueView:
    mine = [j for j in jobs if j.queue == queue.name]
    return QueueView(
        name=queue.name, tenant=queue.tenant, cohort=queue.cohort, weight=queue.weight, quotas=queue.quotas,
        allow_privileged=queue.allow_privileged,
        usage=None if usage is None else QueueUsage(
            as_of=usage.as_of, allocated=usage.allocated, nominal=usage.nominal, borrowed=usage.borrowed,
            decayed_gpu_seconds=usage.decayed_gpu_seconds),
        jobs=dict(sorted(Counter(j.state for j in mine).items())),
        gpus_running=sum(j.gpus for j in mine if j.state in _HOLDING_GPUS),
        gpus_pending=sum(j.gpus for j in mine if j.state == "pending"),
    )
