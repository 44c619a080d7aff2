"""What every dispatcher handler works with: the cluster, its Kubernetes operations, the runs, the outbox."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from schemas.envelope import Envelope, Message, clip_reason, clip_text, make_envelope
from schemas.runs import DispatchFailed, JobDispatched
from schemas.topics import DISPATCHES_TOPIC
from services.dispatcher.binder import Binder
from services.dispatcher.book import Run
from services.dispatcher.kube_ops import KubeOps
from services.dispatcher.metrics import DispatcherMetrics
from services.dispatcher.plans import DispatchSettings
from services.dispatcher.reports import PRODUCER, Reporter
from services.dispatcher.tracked import TrackedTasks
from services.dispatcher.workload_book import WorkloadRun
from services.runtime.clock import Clock, utc_now
from services.runtime.kafka import Delivery
from services.runtime.kube.errors import is_retryable, status_of

FINISHED_MEMORY = 10_000


@dataclass
class Context:
    """Shared state of one dispatcher; handlers and background tasks run on one event loop."""

    cluster: str
    ops: KubeOps
    reporter: Reporter
    settings: DispatchSettings = field(default_factory=DispatchSettings)
    metrics: DispatcherMetrics = field(default_factory=DispatcherMetrics.unexported)
    clock: Clock = utc_now
    runs: dict[str, Run] = field(default_factory=dict)
    #: job id -> its attempt's workload object (a JobSet, a RayJob...: see ``workloads``)
    workloads: dict[str, WorkloadRun] = field(default_factory=dict)
    tasks: TrackedTasks = field(default_factory=TrackedTasks)
    #: job id -> last attempt that was stopped or given up here, so a replayed decision does not revive it
    finished: OrderedDict[str, int] = field(default_factory=OrderedDict)
    #: the binder of Muster's pods, where it runs: the pods the dispatcher creates itself go onto their node
    #: at creation when it has room (``Binder.place``)
    binder: Binder | None = None

    def base(self, job_id: str, attempt: int) -> dict[str, Any]:
        """The fields every run report starts with."""
        return {"job_id": job_id, "attempt": attempt, "cluster": self.cluster, "observed_at": self.clock()}

    def dispatched(self, run: Run) -> JobDispatched:
        return JobDispatched(**self.base(run.job_id, run.attempt), namespace=run.namespace, object_name=run.name)

    def set_run(self, run: Run) -> None:
        self.runs[run.job_id] = run
        self._count_runs()

    async def take_over(self, job_id: str) -> Run | None:
        """Stop the job's background task (a pending restart, a release) and return its current run then.

        A restart cancelled mid-replacement finishes the switch first, so the run returned is the
        revision that really exists on the cluster, not the one the caller saw before.
        """
        await self.tasks.stop(job_id)
        return self.runs.get(job_id)

    def drop_run(self, run: Run, *, finished: bool) -> None:
        """Forget ``run`` (if it is still the job's current one); ``finished`` remembers its attempt as over."""
        if self.runs.get(run.job_id) is run:
            del self.runs[run.job_id]
        if finished:
            self.finished[run.job_id] = max(run.attempt, self.finished.get(run.job_id, -1))
            self.finished.move_to_end(run.job_id)
            while len(self.finished) > FINISHED_MEMORY:
                self.finished.popitem(last=False)
        self._count_runs()

    def is_finished(self, job_id: str, attempt: int) -> bool:
        return self.finished.get(job_id, -1) >= attempt

    def _count_runs(self) -> None:
        self.metrics.runs.labels(self.cluster).set(len(self.runs))

    def outcome(self, kind: str, outcome: str) -> None:
        self.metrics.decision(kind, outcome)

    def failure(self, job_id: str, attempt: int, reason: str, message: str, *, retryable: bool) -> DispatchFailed:
        self.metrics.failures.labels(self.cluster, reason).inc()
        return DispatchFailed(**self.base(job_id, attempt), reason=clip_reason(reason), message=clip_text(message),
                              retryable=retryable)


async def report_failure(ctx: Context, delivery: Delivery, cause: Envelope, reason: str, message: str, *,
                         retryable: bool) -> None:
    """Report ``DispatchFailed`` for the decision ``cause`` carries (caused by it) and count the outcome."""
    decision = cause.payload
    job_id, attempt = getattr(decision, "job_id", ""), getattr(decision, "attempt", 0)
    await emit(delivery, cause, ctx.failure(job_id, attempt, reason, message, retryable=retryable))
    ctx.outcome(decision.TYPE, "failed")


async def emit(delivery: Delivery, cause: Envelope, message: Message) -> None:
    """Report ``message`` as caused by the consumed ``cause``."""
    correlation = cause.correlation_id or cause.event_id
    envelope: Envelope = make_envelope(message, PRODUCER, correlation_id=correlation, causation_id=cause.event_id)
    await delivery.emit(DISPATCHES_TOPIC, envelope)


def api_failure(exc: BaseException) -> tuple[str, bool] | None:
    """``(reason, retryable)`` for a Kubernetes API failure worth reporting as DispatchFailed, else None."""
    status = status_of(exc)
    if status is not None and 400 <= status < 500 and status not in (409, 429):
        return f"rejected_{status}", False
    if is_retryable(exc):
        return "api_unavailable", True
    return None
