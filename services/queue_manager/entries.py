"""One job as the queue manager tracks it: the durable part (``JobRecord``) plus its latest pending info."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from schemas.decisions import PlacementPlan
from schemas.envelope import MAX_REASON, MAX_TEXT
from schemas.intents import SubmitJob
from schemas.jobs import MAX_AVOIDED_NODES, JobRecord, JobRecorded
from schemas.jobspec import JobSpec
from schemas.status import TERMINAL_STATES, ActionOutcome, JobState
from services.core import Job, PendingInfo
from services.spec.core_types import job_from_submit

#: Preemption reasons after which the stopped job does not come back.
NO_REQUEUE_REASONS = frozenset({"cancelled", "max_runtime_exceeded"})
#: States in which a job holds capacity in the scheduler state.
HOLDING_STATES = frozenset({"admitted", "running", "preempting"})


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


@dataclass
class JobEntry:
    """Mutable bookkeeping of one job; ``record()`` is what goes to ``muster.jobs``."""

    submission: SubmitJob
    priority: int
    state: JobState
    attempt: int = 0
    restarts: int = 0
    attained_gpu_s: float = 0.0  # service earlier attempts received (orders the queue, teaches runtimes)
    infrastructure_retries: int = 0
    avoid_nodes: tuple[str, ...] = ()  # oldest first, at most MAX_AVOIDED_NODES
    replicas: int = 0
    placement: PlacementPlan | None = None
    borrowed: bool = False
    bought: bool = False  # runs on nodes bought for it (outside its queue's quota)
    admitted_at: datetime | None = None
    finished_at: datetime | None = None
    reason: str = ""
    message: str = ""
    info: PendingInfo | None = None  # latest cycle's pending status (not durable)
    last_action: ActionOutcome | None = None  # the answer to the last request about the job (not durable)

    @property
    def job_id(self) -> str:
        return self.submission.job_id

    @property
    def spec(self) -> JobSpec:
        return self.submission.spec

    @property
    def grace_period_s(self) -> float:
        """How long a preemption waits for the job's checkpoint: its grace period if it checkpoints, else 0.

        A job that does not checkpoint never acknowledges one, so waiting would only hold its GPUs idle;
        its pods still get the grace period as their termination grace when deleted.
        """
        checkpoint = self.spec.checkpoint
        return float(checkpoint.grace_period_s) if checkpoint.enabled else 0.0

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def holding(self) -> bool:
        return self.state in HOLDING_STATES

    @property
    def requeue_on_stop(self) -> bool:
        """Whether a preempted job comes back: not after a cancel or its max runtime."""
        return self.reason not in NO_REQUEUE_REASONS

    def record(self) -> JobRecord:
        return JobRecord(
            submission=self.submission,
            priority=self.priority,
            state=self.state,
            attempt=self.attempt,
            restarts=self.restarts,
            attained_gpu_s=self.attained_gpu_s,
            infrastructure_retries=self.infrastructure_retries,
            avoid_nodes=list(self.avoid_nodes),
            replicas=self.replicas,
            placement=self.placement,
            borrowed=self.borrowed,
            bought=self.bought,
            admitted_at=self.admitted_at,
            finished_at=self.finished_at,
            reason=self.reason[:MAX_REASON],
            message=self.message[:MAX_TEXT],
        )

    def recorded(self) -> JobRecorded:
        return JobRecorded(job_id=self.job_id, queue=self.spec.queue, record=self.record())

    @classmethod
    def from_record(cls, rec: JobRecord) -> JobEntry:
        return cls(
            submission=rec.submission,
            priority=rec.priority,
            state=rec.state,
            attempt=rec.attempt,
            restarts=rec.restarts,
            attained_gpu_s=rec.attained_gpu_s,
            infrastructure_retries=rec.infrastructure_retries,
            avoid_nodes=tuple(rec.avoid_nodes),
            replicas=rec.replicas,
            placement=rec.placement,
            borrowed=rec.borrowed,
            bought=rec.bought,
            admitted_at=rec.admitted_at,
            finished_at=rec.finished_at,
            reason=rec.reason,
            message=rec.message,
        )

    def core_job(self) -> Job:
        """The job as the core sees it, before the configuration's part (``QueueState.core_job``); submit time
        is the submission's own timestamp."""
        job = job_from_submit(
            self.submission,
            priority=self.priority,
            submit_time=self.submission.submitted_at.timestamp(),
            attempt=self.attempt,
        )
        return replace(
            job,
            avoid_nodes=frozenset(self.avoid_nodes),
            attained_gpu_s=self.attained_gpu_s,
        )

    def full_size_runtime(self) -> float | None:
        """What a succeeded job needed at its full size (the figure ``core.runtimes`` learns), from its
        record: earlier attempts' service plus its last run. None when the record cannot tell."""
        if self.state != "succeeded" or self.admitted_at is None or self.finished_at is None:
            return None
        spec = self.spec
        last = (self.finished_at - self.admitted_at).total_seconds() * spec.gpus_for(self.replicas)
        total = max(spec.total_gpus, 1)
        return max(self.attained_gpu_s + last, 0.0) / total

    def finish(self, state: JobState, now: float, reason: str, message: str = "") -> None:
        """Move to a terminal state; capacity is released by the caller."""
        self.state = state
        self.finished_at = utc(now)
        self.reason = reason
        self.message = message
        self.info = None

    def avoid(self, nodes: Iterable[str]) -> None:
        """Remember ``nodes`` (blamed for an infrastructure failure) for later attempts to avoid."""
        fresh = list(dict.fromkeys(nodes))
        kept = [n for n in self.avoid_nodes if n not in fresh]
        self.avoid_nodes = tuple([*kept, *fresh][-MAX_AVOIDED_NODES:])

    def requeue(self, reason: str, message: str = "", *, keep_restarts: bool = False) -> None:
        """Back to pending as the next attempt (after an eviction, a preemption or an infrastructure failure).

        The restarts spent on the job's own failures are kept after an infrastructure failure (the next
        attempt continues the count), and start over after a preemption."""
        self.state = "pending"
        self.attempt += 1
        if not keep_restarts:
            self.restarts = 0
        self.replicas = 0
        self.placement = None
        self.borrowed = False
        self.bought = False
        self.admitted_at = None
        self.reason = reason
        self.message = message
        self.info = None
