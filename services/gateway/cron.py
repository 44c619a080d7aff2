"""Cron arithmetic of recurring jobs, pure: firing times (UTC), the job id of a firing, its submission."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from croniter import croniter

from schemas.config import RecurringJobConfig
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec
from services.spec.ids import MAX_JOB_ID, name_prefix

RECURRING_LABEL = "muster.io/recurring-job"
"""Label put on every job a recurring job submits; its value is the recurring job's name."""

_STAMP = "%Y%m%d%H%M"
_HASH = 8
_PREFIX = MAX_JOB_ID - len("-yyyymmddhhmm-") - _HASH
_FIRING_ID = re.compile(rf"^(?P<prefix>[a-z0-9-]+)-(?P<stamp>[0-9]{{12}})-[0-9a-f]{{{_HASH}}}$")


def valid_schedule(schedule: str) -> bool:
    """True when croniter understands ``schedule``."""
    return bool(croniter.is_valid(schedule))


def _utc(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise ValueError("firing times are computed from timezone-aware datetimes")
    return at.astimezone(UTC)


def _as_datetime(value: object) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"croniter returned {type(value).__name__}, not a datetime")
    return value.astimezone(UTC)


def next_firings(schedule: str, after: datetime, count: int) -> list[datetime]:
    """The ``count`` firing times strictly after ``after``."""
    it = croniter(schedule, _utc(after))
    return [_as_datetime(it.get_next(datetime)) for _ in range(count)]


def latest_firing(schedule: str, now: datetime) -> datetime:
    """The most recent firing time at or before ``now``."""
    now = _utc(now)
    previous = _as_datetime(croniter(schedule, now).get_prev(datetime))
    following = _as_datetime(croniter(schedule, previous).get_next(datetime))
    return following if following <= now else previous


def firing_job_id(name: str, spec_name: str, at: datetime) -> str:
    """The job id of the firing of recurring job ``name`` at ``at``: ``<spec-name-prefix>-<yyyymmddhhmm>-<hash>``.

    Every replica (and every restart) firing the same time derives the same id.
    """
    at = _utc(at)
    digest = hashlib.sha256("\0".join(("cron", name, at.isoformat())).encode()).hexdigest()[:_HASH]
    prefix = name_prefix(spec_name)[:_PREFIX].rstrip("-") or "job"
    return f"{prefix}-{at:{_STAMP}}-{digest}"


def firing_time_of(job_id: str, name: str, spec_name: str) -> datetime | None:
    """The firing time a job id was derived from, when it is a firing of recurring job ``name``; else None."""
    match = _FIRING_ID.match(job_id)
    if match is None:
        return None
    try:
        at = datetime.strptime(match["stamp"], _STAMP).replace(tzinfo=UTC)
    except ValueError:
        return None
    return at if firing_job_id(name, spec_name, at) == job_id else None


def fired_spec(config: RecurringJobConfig, previous: str | None = None) -> JobSpec:
    """The spec one firing submits: without ``schedule``, labelled with the recurring job's name; with
    ``after_previous``, waiting for ``previous`` (the job id of the previous firing, None for none)."""
    labels = dict(config.spec.labels)
    if RECURRING_LABEL in labels or len(labels) < 64:
        labels[RECURRING_LABEL] = config.name
    data = {**config.spec.model_dump(), "schedule": None, "after_previous": None, "labels": labels}
    on = config.spec.after_previous
    if on is not None and previous is not None and all(dep["job"] != previous for dep in data["after"]):
        data["after"] = [*data["after"], {"job": previous, "on": on}]
    return JobSpec.model_validate(data)


def firing_submission(config: RecurringJobConfig, at: datetime, previous: str | None = None) -> SubmitJob:
    """The ``SubmitJob`` of the firing of ``config`` at ``at`` (``submitted_at`` is the firing time);
    ``previous``: the previous firing's job id, which it waits for when the spec says ``after_previous``."""
    at = _utc(at)
    return SubmitJob(job_id=firing_job_id(config.name, config.spec.name, at), tenant=config.tenant,
                     user=config.user, spec=fired_spec(config, previous), submitted_at=at)

