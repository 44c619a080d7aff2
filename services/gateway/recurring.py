"""Recurring jobs at the door, pure: authorising a scheduled spec, naming it, and presenting it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from schemas.api import FiringView, RecurringView
from schemas.config import RecurringJobConfig
from schemas.jobspec import JobSpec
from schemas.status import JobStatusChanged
from services.gateway.auth import Principal
from services.gateway.cron import firing_time_of, next_firings, valid_schedule
from services.gateway.errors import ApiError
from services.gateway.submission_rules import check_env, check_spec, queue_for_submission
from services.gateway.views import ConfigView

MAX_NAME = 63
UPCOMING = 3
RECENT_FIRINGS = 10


def recurring_name(tenant: str, spec_name: str) -> str:
    """``<tenant>.<spec name>``, unique across tenants; 422 when longer than a name may be."""
    name = f"{tenant}.{spec_name}"
    if len(name) > MAX_NAME:
        raise ApiError(422, "name_too_long", f"recurring job name {name!r} is longer than {MAX_NAME} characters; "
                       "shorten the spec's name", field="spec.name")
    return name


@dataclass(frozen=True, slots=True)
class RecurringPlan:
    """The recurring job a scheduled spec defines; ``created`` when the name is new, ``changed`` to publish."""

    item: RecurringJobConfig
    created: bool
    changed: bool


def plan_recurring(spec: JobSpec, principal: Principal, config: ConfigView, now: datetime) -> RecurringPlan:
    """Authorise ``spec`` as a submission would (403, 422) and decide what to publish for it."""
    queue = queue_for_submission(spec, principal, config)
    check_spec(spec, queue, config)
    check_env(spec)
    if spec.schedule is None or not valid_schedule(spec.schedule):
        raise ApiError(422, "invalid_schedule", f"not a cron expression: {spec.schedule!r}", field="spec.schedule")
    name = recurring_name(queue.tenant, spec.name)
    existing = config.recurring(name)
    if existing is None:
        item = RecurringJobConfig(name=name, tenant=queue.tenant, user=principal.user, spec=spec, created_at=now)
        return RecurringPlan(item, created=True, changed=True)
    if existing.spec == spec:
        return RecurringPlan(existing, created=False, changed=False)
    item = RecurringJobConfig(name=name, tenant=queue.tenant, user=principal.user, spec=spec,
                              suspended=existing.suspended, created_at=existing.created_at)
    return RecurringPlan(item, created=False, changed=True)


def visible_recurring(config: ConfigView, name: str, principal: Principal) -> RecurringJobConfig:
    """The recurring job if the caller may see it; 404 when unknown or another tenant's."""
    item = config.recurring(name)
    if item is None or not principal.owns(item.tenant):
        raise ApiError(404, "not_found", f"no recurring job {name!r}", field="name")
    return item


def with_suspended(item: RecurringJobConfig, suspended: bool) -> RecurringJobConfig:
    return RecurringJobConfig.model_validate({**item.model_dump(), "suspended": suspended})


def upcoming(item: RecurringJobConfig, now: datetime, count: int = UPCOMING) -> list[datetime]:
    """The next firing times; none while suspended."""
    if item.suspended or item.spec.schedule is None:
        return []
    return next_firings(item.spec.schedule, now, count)


def recent_firings(item: RecurringJobConfig, jobs: Iterable[JobStatusChanged],
                   limit: int = RECENT_FIRINGS) -> list[FiringView]:
    """The jobs in the status view that are firings of ``item``, newest first."""
    found: list[FiringView] = []
    for job in jobs:
        if job.tenant != item.tenant or job.name != item.spec.name:
            continue
        at = firing_time_of(job.job_id, item.name, item.spec.name)
        if at is not None:
            found.append(FiringView(job_id=job.job_id, fired_at=at, state=job.state))
    found.sort(key=lambda f: f.fired_at, reverse=True)
    return found[:limit]


def previous_firing(item: RecurringJobConfig, at: datetime, jobs: Iterable[tuple[str, str, str]]) -> str | None:
    """The job id of the latest firing of ``item`` before ``at`` among ``jobs`` (job id, tenant, name), not
    older than the recurring job's definition (defining it afresh starts a new series); None when there is
    none (the first firing, or only missed ones before)."""
    best: tuple[datetime, str] | None = None
    for job_id, tenant, name in jobs:
        if tenant != item.tenant or name != item.spec.name:
            continue
        fired = firing_time_of(job_id, item.name, item.spec.name)
        if fired is not None and item.created_at <= fired < at and (best is None or fired > best[0]):
            best = (fired, job_id)
    return None if best is None else best[1]


def recurring_view(item: RecurringJobConfig, jobs: Iterable[JobStatusChanged], now: datetime) -> RecurringView:
    return RecurringView(
        name=item.name, tenant=item.tenant, user=item.user, queue=item.spec.queue, schedule=item.spec.schedule or "",
        suspended=item.suspended, created_at=item.created_at, next_firings=upcoming(item, now),
        recent_firings=recent_firings(item, jobs), spec=item.spec,
    )
