"""The firing loop on an in-memory publisher with a hand-moved clock."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import httpx
import pytest
from pydantic import ValidationError

from schemas.config import ConfigItemDeleted, QueueConfig, QueueDefined, RecurringJobDefined
from schemas.intents import SubmitJob
from schemas.jobspec import DependencySpec, JobSpec
from schemas.topics import INTENTS_TOPIC
from services.gateway.cron import firing_job_id
from services.gateway.firing_loop import FiringLoop
from tests.builders.clock import T0, FakeClock
from tests.builders.jobspecs import job_spec
from tests.gateway.builders import (
    Harness,
    auth,
    feed,
    harness,
    recurring_job,
    spec_json,
    status_changed,
)
from tests.integration.builders import eventually

MINUTE = timedelta(minutes=1)


def define(gw: Harness, **kwargs: object) -> None:
    feed(gw.ctx.config, RecurringJobDefined(item=recurring_job(**kwargs)))  # type: ignore[arg-type]


def submitted(gw: Harness) -> list[SubmitJob]:
    return [m for m in gw.publisher.on(INTENTS_TOPIC) if isinstance(m, SubmitJob)]


def expected_id(minute: int) -> str:
    return firing_job_id("team-a.nightly", "nightly", T0 + minute * MINUTE)


async def test_each_firing_is_submitted_once_with_its_time_and_id() -> None:
    clock = FakeClock()
    gw = harness(clock=clock)
    define(gw)
    loop = FiringLoop(gw.ctx)
    for _ in range(3):
        await loop.tick()
        clock.advance(seconds=20)
    assert [s.job_id for s in submitted(gw)] == [expected_id(0)]
    clock.advance(seconds=1)  # 12:01:01
    [fired] = await loop.tick()
    assert (fired.job_id, fired.submitted_at, fired.spec.schedule) == (expected_id(1), T0 + MINUTE, None)
    assert [s.job_id for s in submitted(gw)] == [expected_id(0), expected_id(1)]
    assert gw.registry.get_sample_value("muster_gateway_recurring_firings_total", {"outcome": "submitted"}) == 2
    assert gw.registry.get_sample_value("muster_gateway_recurring_jobs") == 1


async def test_two_replicas_and_a_restart_derive_the_same_ids() -> None:
    clock = FakeClock(T0 + timedelta(seconds=3))
    replicas = [harness(clock=clock) for _ in range(2)]
    for gw in replicas:
        define(gw)
    loops = [FiringLoop(gw.ctx) for gw in replicas]
    ids: list[list[str]] = [[], []]
    for _ in range(3):
        for n, loop in enumerate(loops):
            ids[n] += [s.job_id for s in await loop.tick()]
        clock.advance(minutes=1)
    assert ids[0] == ids[1] == [expected_id(0), expected_id(1), expected_id(2)]
    # a restarted replica (nothing remembered) fires the latest firing again under the same id
    restarted = harness(clock=clock)
    define(restarted)
    clock.advance(seconds=-50)  # 12:02:13
    assert [s.job_id for s in await FiringLoop(restarted.ctx).tick()] == [expected_id(2)]


async def test_a_firing_the_status_view_already_shows_is_not_published_again() -> None:
    clock = FakeClock(T0 + timedelta(seconds=3))
    gw = harness(clock=clock)
    define(gw)
    feed(gw.ctx.status, status_changed(expected_id(0), name="nightly"))
    loop = FiringLoop(gw.ctx)
    assert await loop.tick() == []
    assert gw.registry.get_sample_value("muster_gateway_recurring_firings_total",
                                        {"outcome": "already_submitted"}) == 1
    assert await loop.tick() == []


async def test_catch_up_after_a_restart_fires_no_backlog_and_skips_old_firings() -> None:
    clock = FakeClock(T0 + timedelta(hours=2, seconds=30))
    gw = harness(clock=clock)
    define(gw, created_at=T0 - timedelta(days=1))
    define(gw, name="daily", schedule="0 12 * * *", created_at=T0 - timedelta(days=1))  # fired 2 h ago: missed
    fired = await FiringLoop(gw.ctx).tick()
    assert [s.job_id for s in fired] == [expected_id(120)]
    assert gw.registry.get_sample_value("muster_gateway_recurring_firings_total", {"outcome": "missed"}) == 1


async def test_suspended_and_deleted_jobs_are_not_fired() -> None:
    clock = FakeClock(T0 + timedelta(seconds=3))
    gw = harness(clock=clock)
    define(gw, suspended=True)
    define(gw, name="weekly")
    loop = FiringLoop(gw.ctx)
    feed(gw.ctx.config, ConfigItemDeleted(kind="recurring-job", name="team-a.weekly"))
    assert await loop.tick() == []
    assert gw.publisher.sent == []


async def test_a_spec_its_tenant_may_no_longer_submit_is_not_fired() -> None:
    clock = FakeClock(T0 + timedelta(seconds=3))
    gw = harness(clock=clock)
    define(gw)
    feed(gw.ctx.config, QueueDefined(item=QueueConfig(name="team-a", tenant="team-b")))  # the queue changed hands
    assert await FiringLoop(gw.ctx).tick() == []
    assert gw.registry.get_sample_value("muster_gateway_recurring_firings_total", {"outcome": "rejected"}) == 1


async def test_a_failed_publication_is_retried_on_the_next_tick() -> None:
    clock = FakeClock(T0 + timedelta(seconds=3))
    gw = harness(clock=clock)
    define(gw)
    loop = FiringLoop(gw.ctx)
    gw.publisher.fail = ConnectionError("broker down")
    assert await loop.tick() == []
    gw.publisher.fail = None
    clock.advance(seconds=10)
    assert [s.job_id for s in await loop.tick()] == [expected_id(0)]


async def test_the_loop_sleeps_until_the_next_firing_at_most_max_sleep() -> None:
    clock = FakeClock(T0 + timedelta(seconds=45))
    gw = harness(clock=clock)
    loop = FiringLoop(gw.ctx, max_sleep=30)
    assert loop.delay() == 30  # nothing defined
    define(gw)
    assert loop.delay() == 15  # 12:01:00
    define(gw, name="hourly", schedule="@hourly")
    define(gw, suspended=True)
    assert loop.delay() == 30


async def test_run_fires_on_wake_and_stops() -> None:
    clock = FakeClock(T0 + timedelta(seconds=50))
    gw = harness(clock=clock)
    loop = FiringLoop(gw.ctx, max_sleep=30)
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    try:
        await eventually(lambda: loop.ticks >= 1, within=5)
        define(gw, created_at=T0 + timedelta(seconds=50))
        clock.advance(seconds=15)  # 12:01:05
        loop.wake()  # without it the loop would sleep its full 30 s
        await eventually(lambda: bool(submitted(gw)), within=5)
    finally:
        stop.set()
        async with asyncio.timeout(5):
            await task
    assert [s.job_id for s in submitted(gw)] == [expected_id(1)]


# ---------------------------------------------------------------- after_previous: each firing waits for the one before


def define_chained(gw: Harness, on: str = "finished", created_at: datetime = T0) -> None:
    item = recurring_job(created_at=created_at)
    spec = item.spec.model_copy(update={"after_previous": on})
    feed(gw.ctx.config, RecurringJobDefined(item=item.model_copy(update={"spec": spec})))


async def test_each_firing_waits_for_the_previous_one() -> None:
    clock = FakeClock(T0 + timedelta(seconds=3))
    gw = harness(clock=clock)
    define_chained(gw, "succeeded")
    loop = FiringLoop(gw.ctx)
    [first] = await loop.tick()
    assert first.spec.after == [] and first.spec.after_previous is None and first.spec.schedule is None
    clock.advance(minutes=1)
    [second] = await loop.tick()  # the first is only in this gateway's recent submissions
    assert second.spec.after == [DependencySpec(job=expected_id(0), on="succeeded")]
    clock.advance(minutes=1)
    feed(gw.ctx.status, status_changed(expected_id(1), name="nightly", state="failed"))
    [third] = await loop.tick()
    assert third.spec.after == [DependencySpec(job=expected_id(1), on="succeeded")]


async def test_the_latest_known_firing_is_waited_for_and_none_before_the_definition() -> None:
    clock = FakeClock(T0 + timedelta(minutes=10, seconds=3))
    gw = harness(clock=clock)
    define_chained(gw, created_at=T0 + timedelta(minutes=2))
    # firings of an earlier definition (before 12:02), one of this one (12:05), and a job of the same name
    for minute in (0, 1, 5):
        feed(gw.ctx.status, status_changed(expected_id(minute), name="nightly", state="succeeded"))
    feed(gw.ctx.status, status_changed("nightly-by-hand", name="nightly", state="running"))
    [fired] = await FiringLoop(gw.ctx).tick()  # 12:06 to 12:09 were missed (the gateway was down)
    assert fired.job_id == expected_id(10)
    assert fired.spec.after == [DependencySpec(job=expected_id(5), on="finished")]
    # defined afresh at 12:10: nothing earlier is waited for
    clock.advance(minutes=1)
    restarted = harness(clock=clock)
    define_chained(restarted, created_at=T0 + timedelta(minutes=11))
    for minute in (5, 10):
        feed(restarted.ctx.status, status_changed(expected_id(minute), name="nightly", state="failed"))
    [again] = await FiringLoop(restarted.ctx).tick()
    assert again.spec.after == []


def test_after_previous_needs_a_schedule() -> None:
    with pytest.raises(ValidationError, match="after_previous needs schedule"):
        JobSpec.model_validate({**job_spec().model_dump(), "after_previous": "finished"})
    with pytest.raises(ValidationError):
        JobSpec.model_validate({**job_spec().model_dump(), "schedule": "* * * * *", "after_previous": "failed"})


async def test_a_one_off_submission_with_after_previous_is_refused() -> None:
    gw = harness()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as client:
        refused = await client.post("/v1/jobs", json=spec_json(after_previous="finished"), headers=auth("alice"))
        defined = await client.post("/v1/jobs", json=spec_json("nightly", schedule="0 2 * * *",
                                                               after_previous="finished"), headers=auth("alice"))
    assert refused.status_code == 422 and "after_previous needs schedule" in refused.text
    assert defined.status_code in (200, 201, 202), defined.text
    item = gw.ctx.config.recurring("team-a.nightly")
    assert item is not None and item.spec.after_previous == "finished"
