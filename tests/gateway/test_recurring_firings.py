"""Firing computation of recurring jobs (pure): cron times, deterministic job ids, the firing rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from pydantic import TypeAdapter

from schemas.envelope import JobId
from services.gateway.cron import (
    RECURRING_LABEL,
    fired_spec,
    firing_job_id,
    firing_submission,
    firing_time_of,
    latest_firing,
    next_firings,
    valid_schedule,
)
from services.gateway.firings import FiringPlanner
from tests.gateway.builders import T0, recurring_job

MINUTE = timedelta(minutes=1)
_JOB_ID: TypeAdapter[str] = TypeAdapter(JobId)


def at(hour: int, minute: int, second: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


def test_next_and_latest_firings_in_utc() -> None:
    assert next_firings("0 2 * * *", at(12, 0), 3) == [at(2, 0, day=2), at(2, 0, day=3), at(2, 0, day=4)]
    assert next_firings("*/15 * * * *", at(12, 0), 2) == [at(12, 15), at(12, 30)]  # strictly after
    assert latest_firing("*/15 * * * *", at(12, 15)) == at(12, 15)  # at or before
    assert latest_firing("*/15 * * * *", at(12, 29, 59)) == at(12, 15)
    assert latest_firing("@hourly", at(12, 0, 1)) == at(12, 0)
    local = datetime(2026, 11, 1, 14, 0, tzinfo=UTC).astimezone(ZoneInfo("Europe/Berlin"))
    assert next_firings("0 15 * * *", local, 1) == [at(15, 0)]  # schedules are read in UTC
    assert valid_schedule("0 2 * * MON") and not valid_schedule("61 * * * *")


def test_firing_job_ids_are_deterministic_valid_and_distinct() -> None:
    first = firing_job_id("team-a.nightly", "nightly", at(2, 0))
    assert first == firing_job_id("team-a.nightly", "nightly", at(2, 0))
    assert first.startswith("nightly-202611010200-")
    others = {firing_job_id("team-a.nightly", "nightly", at(2, 1)),
              firing_job_id("team-b.nightly", "nightly", at(2, 0))}
    assert first not in others and len(others) == 2
    long_name = "a-very-long-recurring-evaluation-job-name-that-goes-on-and-on"
    long_id = firing_job_id(f"team-a.{long_name}", long_name, at(2, 0))
    odd = firing_job_id("t.x--", "X--", at(2, 0))
    for job_id in (first, long_id, odd):
        assert _JOB_ID.validate_python(job_id) == job_id  # DNS-1123, at most 48 characters
    assert len(long_id) == 48 and odd.startswith("x-2026")


def test_firing_time_is_recovered_only_from_ids_of_that_recurring_job() -> None:
    job_id = firing_job_id("team-a.nightly", "nightly", at(2, 0))
    assert firing_time_of(job_id, "team-a.nightly", "nightly") == at(2, 0)
    assert firing_time_of(job_id, "team-b.nightly", "nightly") is None
    assert firing_time_of("nightly-3f2a9c1b", "team-a.nightly", "nightly") is None
    assert firing_time_of("nightly-202613010200-00000000", "team-a.nightly", "nightly") is None


def test_a_firing_submits_the_spec_without_schedule_at_the_firing_time() -> None:
    config = recurring_job("nightly", "0 2 * * *")
    submission = firing_submission(config, at(2, 0, day=2))
    assert submission.job_id == firing_job_id("team-a.nightly", "nightly", at(2, 0, day=2))
    assert (submission.tenant, submission.user, submission.submitted_at) == ("team-a", "alice", at(2, 0, day=2))
    assert submission.spec.schedule is None and submission.spec.labels[RECURRING_LABEL] == "team-a.nightly"
    assert submission.spec.model_copy(update={"labels": {}}) == config.spec.model_copy(
        update={"schedule": None, "labels": {}})
    assert fired_spec(config).replicas == config.spec.replicas


def test_fires_once_at_each_firing_time() -> None:
    planner, jobs = FiringPlanner(), [recurring_job(created_at=T0)]
    fired: list[datetime] = []
    now = T0
    for _ in range(10 * 6):  # ten minutes in steps of ten seconds
        for firing in planner.due(jobs, now):
            assert not firing.missed
            fired.append(firing.at)
            planner.handled(firing)
        now += timedelta(seconds=10)
    assert fired == [T0 + i * MINUTE for i in range(10)]


def test_unhandled_firing_is_due_again_until_handled() -> None:
    planner, jobs = FiringPlanner(), [recurring_job()]
    [first] = planner.due(jobs, T0 + timedelta(seconds=5))
    [again] = planner.due(jobs, T0 + timedelta(seconds=20))  # e.g. the publication failed
    assert first.at == again.at == T0
    planner.handled(again)
    assert planner.due(jobs, T0 + timedelta(seconds=40)) == []


def test_firings_before_creation_are_not_fired() -> None:
    planner = FiringPlanner()
    job = recurring_job(created_at=T0 + timedelta(seconds=30))
    assert planner.due([job], T0 + timedelta(seconds=40)) == []
    assert [f.at for f in planner.due([job], T0 + MINUTE)] == [T0 + MINUTE]


def test_catch_up_fires_only_the_latest_firing_within_the_deadline() -> None:
    planner, jobs = FiringPlanner(starting_deadline=timedelta(seconds=300)), [recurring_job()]
    # restarted 10 min 20 s later: one firing (the latest), no backlog of ten
    [firing] = planner.due(jobs, T0 + timedelta(minutes=10, seconds=20))
    assert (firing.at, firing.missed) == (T0 + 10 * MINUTE, False)


def test_a_firing_older_than_the_deadline_is_missed() -> None:
    planner = FiringPlanner(starting_deadline=timedelta(seconds=300))
    daily = recurring_job(schedule="0 12 * * *", created_at=T0 - timedelta(days=1))
    [firing] = planner.due([daily], T0 + timedelta(seconds=301))
    assert firing.missed and firing.at == T0
    planner.handled(firing)
    assert planner.due([daily], T0 + timedelta(seconds=400)) == []
    assert [f.missed for f in planner.due([daily], T0 + timedelta(days=1, seconds=299))] == [False]


def test_suspended_jobs_do_not_fire_and_resume_within_the_deadline() -> None:
    planner = FiringPlanner()
    job = recurring_job(suspended=True)
    assert planner.due([job], T0 + timedelta(seconds=5)) == []
    assert planner.next_wake([job], T0) is None
    resumed = job.model_copy(update={"suspended": False})
    assert [f.at for f in planner.due([resumed], T0 + 3 * MINUTE + timedelta(seconds=5))] == [T0 + 3 * MINUTE]


def test_deleted_jobs_do_not_fire_and_are_forgotten() -> None:
    planner, job = FiringPlanner(), recurring_job()
    for firing in planner.due([job], T0):
        planner.handled(firing)
    assert planner.last_handled(job.name) == T0
    assert planner.due([], T0 + MINUTE) == []
    assert planner.last_handled(job.name) is None
    again = recurring_job(created_at=T0 + MINUTE + timedelta(seconds=30))  # defined anew
    assert planner.due([again], T0 + MINUTE + timedelta(seconds=40)) == []


def test_next_wake_is_the_earliest_upcoming_firing() -> None:
    jobs = [recurring_job("hourly", "@hourly"), recurring_job("quarter", "*/15 * * * *")]
    assert FiringPlanner.next_wake(jobs, T0 + timedelta(minutes=1)) == T0 + timedelta(minutes=15)
    assert FiringPlanner.next_wake([], T0) is None


@pytest.mark.parametrize("schedule", ["0 2 * * *", "*/5 * * * *", "@daily", "0 0 1 * *"])
def test_ids_are_wire_valid(schedule: str) -> None:
    job = recurring_job("nightly-evaluation-of-all-checkpoints-x", schedule)
    for when in next_firings(schedule, T0, 3):
        assert firing_submission(job, when).job_id == firing_job_id(job.name, job.spec.name, when)
