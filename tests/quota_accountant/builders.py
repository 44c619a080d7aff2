"""Builders of the accountant's input messages with explicit times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas.config import QueueConfig, QueueDefined, ResourceQuotaConfig, TenantConfig, TenantDefined
from schemas.decisions import JobAdmitted, JobScaled, NodePods, PlacementPlan
from schemas.envelope import Envelope, Message, make_envelope
from schemas.runs import DispatchFailed, JobStopped, RunFailed, RunStarted, RunSucceeded
from services.quota_accountant.windows import WindowKind
from tests.builders.jobspecs import job_spec

T0 = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def placement(pods: int, cluster: str = "east", node: str = "east-a100-0") -> PlacementPlan:
    return PlacementPlan(cluster=cluster, nodes=[NodePods(node=node, pods=pods)])


def admitted(
    job: str = "j-1", attempt: int = 1, *, queue: str = "team-a", tenant: str = "team-a", replicas: int = 4,
    gpus: int = 8, gpu_type: str | None = "a100", when: float = 0.0,
) -> Envelope:
    msg = JobAdmitted(
        job_id=job, attempt=attempt, tenant=tenant, queue=queue, namespace=tenant, priority=0, replicas=replicas,
        placement=placement(replicas),
        spec=job_spec("train", queue, replicas=replicas, gpus=gpus, gpu_type=gpu_type),
    )
    return wrap(msg, when)


def scaled(job: str, attempt: int, replicas: int, when: float) -> Envelope:
    return wrap(JobScaled(job_id=job, attempt=attempt, replicas=replicas, placement=placement(replicas)), when)


def started(job: str = "j-1", attempt: int = 1, *, when: float = 0.0) -> Envelope:
    msg = RunStarted(job_id=job, attempt=attempt, cluster="east", observed_at=at(when), pods_running=1, pods_total=4)
    return wrap(msg, when)


def succeeded(job: str = "j-1", attempt: int = 1, *, when: float = 0.0) -> Envelope:
    return wrap(RunSucceeded(job_id=job, attempt=attempt, cluster="east", observed_at=at(when)), when)


def failed(job: str = "j-1", attempt: int = 1, *, when: float = 0.0, reason: str = "Error",
           infrastructure: bool = False) -> Envelope:
    msg = RunFailed(job_id=job, attempt=attempt, cluster="east", observed_at=at(when), reason=reason,
                    classification="infrastructure" if infrastructure else "job")
    return wrap(msg, when)


def gave_up(job: str = "j-1", attempt: int = 1, *, when: float = 0.0) -> Envelope:
    """The dispatcher's report that the job's restart budget is spent."""
    msg = DispatchFailed(job_id=job, attempt=attempt, cluster="east", observed_at=at(when),
                         reason="restarts_exhausted", message="gang failed 4 times")
    return wrap(msg, when)


def stopped(job: str = "j-1", attempt: int = 1, *, when: float = 0.0, reason: str = "higher_priority",
            requeue: bool = True) -> Envelope:
    msg = JobStopped(job_id=job, attempt=attempt, cluster="east", observed_at=at(when), reason=reason, requeue=requeue)
    return wrap(msg, when)


def wrap(msg: Message, when: float) -> Envelope:
    return make_envelope(msg, "test", occurred_at=at(when))


def queue_defined(name: str = "team-a", nominal: int = 16, cohort: str | None = None, tenant: str = "team-a",
                  gpu_type: str = "a100") -> QueueDefined:
    quotas = {f"gpu:{gpu_type}": ResourceQuotaConfig(nominal=nominal)}
    return QueueDefined(item=QueueConfig(name=name, cohort=cohort, tenant=tenant, quotas=quotas))


def tenant_defined(name: str = "team-a", budget: float | None = 10.0, window: WindowKind = "month") -> TenantDefined:
    return TenantDefined(item=TenantConfig(name=name, namespace=name, gpu_hour_budget=budget,
                                           budget_window=window))
