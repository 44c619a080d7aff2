"""The dispatcher's memory of the runs it manages, and how it is read back from the Jobs. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas import kube as ann

KubeObject = dict[str, Any]

#: annotation on an object its owner created (a kube-native Job, JobSet, Deployment...) whose job was cancelled
#: while it ran: when the cancel was asked for. The object is left in place, held back; its job is over, so a
#: restarted dispatcher does not take it up again
CANCELLED = ann.MUSTER_PREFIX + "cancelled"


@dataclass(frozen=True, slots=True)
class Preemption:
    """A preemption handshake in progress on one Job."""

    requested_at: datetime
    reason: str
    requeue: bool
    grace_s: float
    event_id: str

    @property
    def deadline(self) -> float:
        return self.requested_at.timestamp() + self.grace_s


@dataclass(slots=True)
class Run:
    """The current Job of one job's attempt on this cluster."""

    job_id: str
    attempt: int
    namespace: str
    name: str
    revision: int = 0
    restarts: int = 0
    max_restarts: int = 0
    decision_event: str = ""
    correlation_id: str = ""
    restart_at: datetime | None = None
    preemption: Preemption | None = None
    replaces: str = ""  # a suspended revision waiting for the pods of this earlier revision to be gone
    reported: bool = False  # JobDispatched sent for this revision by this process

    @property
    def order(self) -> tuple[int, int]:
        return self.attempt, self.revision


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def preemption_of(annotations: dict[str, str]) -> Preemption | None:
    requested = _time(annotations.get(ann.PREEMPT_REQUESTED))
    if requested is None:
        return None
    try:
        grace = float(annotations.get(ann.PREEMPT_GRACE, "0"))
    except ValueError:
        grace = 0.0
    return Preemption(requested_at=requested, reason=annotations.get(ann.PREEMPT_REASON) or "higher_priority",
                      requeue=annotations.get(ann.PREEMPT_REQUEUE, "true") == "true", grace_s=grace,
                      event_id=annotations.get(ann.PREEMPT_EVENT, ""))


def run_from_job(job: KubeObject) -> Run | None:
    """The run a Muster Job stands for (None for other Jobs)."""
    meta = job.get("metadata") or {}
    annotations: dict[str, str] = meta.get("annotations") or {}
    job_id = annotations.get(ann.JOB_ID)
    attempt = annotations.get(ann.ATTEMPT)
    if not job_id or attempt is None or not attempt.isdigit():
        return None
    return Run(
        job_id=job_id,
        attempt=int(attempt),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name")),
        revision=_int(annotations.get(ann.REVISION)),
        restarts=_int(annotations.get(ann.RESTARTS)),
        max_restarts=_int(annotations.get(ann.MAX_RESTARTS)),
        decision_event=annotations.get(ann.DECISION_EVENT, ""),
        correlation_id=annotations.get(ann.CORRELATION, ""),
        restart_at=_time(annotations.get(ann.RESTART_AT)),
        preemption=preemption_of(annotations),
        replaces=annotations.get(ann.REPLACES, ""),
    )


@dataclass(frozen=True, slots=True)
class Leftover:
    """A Job that is no longer its job's current one and should be deleted with ``reason``."""

    run: Run
    reason: str


def rebuild(jobs: list[KubeObject]) -> tuple[dict[str, Run], list[Leftover]]:
    """The current run of every job (its latest attempt and revision) and the Jobs to delete.

    Left to delete are: Jobs marked ``deleted-by: muster`` whose deletion did not go through; older
    revisions of the current attempt (the process stopped between creating a replacement and deleting
    the one it replaced); older attempts (a new attempt was admitted). A user's Job left suspended by a
    cancel (``CANCELLED``) is neither: it is its owner's, and its job is over.
    """
    live: list[Run] = []
    leftovers: list[Leftover] = []
    for job in jobs:
        run = run_from_job(job)
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        if run is None or (job.get("metadata") or {}).get("deletionTimestamp") or CANCELLED in annotations:
            continue
        if annotations.get(ann.DELETED_BY) == ann.MUSTER:
            leftovers.append(Leftover(run, annotations.get(ann.DELETE_REASON) or "superseded"))
        else:
            live.append(run)
    current: dict[str, Run] = {}
    for run in sorted(live, key=lambda r: r.order):
        current[run.job_id] = run
    for run in live:
        latest = current[run.job_id]
        if run is not latest:
            leftovers.append(Leftover(run, "restart" if run.attempt == latest.attempt else "superseded"))
    return current, leftovers
