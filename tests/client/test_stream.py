"""``watch`` and ``wait`` on the gateway's live stream (the app served in this loop; the synchronous client
runs in a worker thread while the test feeds changes)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from muster.client import (
    AsyncClient,
    Client,
    JobEnded,
    JobsChanged,
    NotFound,
    QueuesChanged,
    StreamOpened,
    WaitTimeout,
)
from schemas.envelope import Message, make_envelope
from schemas.topics import INTENTS_TOPIC
from schemas.usage import QueueUsageReported
from services.gateway.dashboard_state import DashboardFeeds
from tests.builders.clock import T0
from tests.builders.jobspecs import job_spec
from tests.gateway.builders import TOKENS, Harness, feed, status_changed


def send(fold: object, message: Message) -> None:
    """Fold ``message`` through one of the gateway's table callbacks, as the compacted table would."""
    assert callable(fold)
    fold(message.key(), make_envelope(message, "test"))


async def when_streaming(gw: Harness, streams: int = 1) -> None:
    """Until ``streams`` streams are open on the gateway."""
    for _ in range(1000):
        if len(gw.ctx.dashboard.hub) >= streams:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{streams} stream(s) not open within 10 s")


async def test_sync_wait_follows_the_stream_until_the_state(served: str, gw: Harness, feeds: DashboardFeeds) -> None:
    send(feeds.status, status_changed("a-1", state="pending", position=0))

    async def progress() -> None:
        await when_streaming(gw)
        send(feeds.status, status_changed("a-1", state="running", minutes=1))
        send(feeds.status, status_changed("b-1", tenant="team-b", queue="team-b", state="succeeded"))  # not a-1
        await asyncio.sleep(0.3)
        send(feeds.status, status_changed("a-1", state="succeeded", minutes=2))

    feeding = asyncio.create_task(progress())
    with Client(served, TOKENS["alice"]) as client:
        started = time.monotonic()
        done = await asyncio.to_thread(client.wait, "a-1", "succeeded", 20)
    await feeding
    assert (done.job_id, done.state, done.updated_at) == ("a-1", "succeeded", T0 + timedelta(minutes=2))
    assert time.monotonic() - started < 10


async def test_wait_returns_at_once_for_a_job_already_there(served: str, feeds: DashboardFeeds) -> None:
    send(feeds.status, status_changed("a-1", state="running"))
    async with AsyncClient(served, TOKENS["alice"]) as client:
        job = await client.wait("a-1", ["admitted", "running"], timeout=5)
    assert job.state == "running"


async def test_wait_raises_when_the_job_ends_otherwise(served: str, gw: Harness, feeds: DashboardFeeds) -> None:
    send(feeds.status, status_changed("a-1", state="running"))

    async def fail() -> None:
        await when_streaming(gw)
        send(feeds.status, status_changed("a-1", state="failed", reason="pod_failed", message="exit code 3",
                                          minutes=1))

    feeding = asyncio.create_task(fail())
    async with AsyncClient(served, TOKENS["alice"]) as client:
        with pytest.raises(JobEnded) as ended:
            await client.wait("a-1", "succeeded", timeout=20)
    await feeding
    assert (ended.value.job.state, ended.value.job.message) == ("failed", "exit code 3")
    assert "ended failed: exit code 3" in str(ended.value)


async def test_wait_times_out_with_the_last_view(served: str, feeds: DashboardFeeds) -> None:
    send(feeds.status, status_changed("a-1", state="pending", reason="quota_exhausted"))
    with Client(served, TOKENS["alice"]) as client:
        started = time.monotonic()
        with pytest.raises(WaitTimeout) as timed_out:
            await asyncio.to_thread(client.wait, "a-1", "running", 0.8)
        assert 0.7 < time.monotonic() - started < 5
    assert timed_out.value.job is not None and timed_out.value.job.reason == "quota_exhausted"
    async with AsyncClient(served, TOKENS["alice"]) as aclient:
        with pytest.raises(WaitTimeout):
            await aclient.wait("a-1", "running", timeout=0.5)


async def test_wait_for_an_unknown_job(served: str, gw: Harness, feeds: DashboardFeeds) -> None:
    async with AsyncClient(served, TOKENS["alice"]) as client:
        with pytest.raises(NotFound):
            await client.wait("later-1", timeout=5)
        with pytest.raises(NotFound):  # another tenant's job is not revealed either
            send(feeds.status, status_changed("b-1", tenant="team-b", queue="team-b"))
            await client.wait("b-1", timeout=5)

        async def appear() -> None:  # as a job produced onto Kafka reaches the gateway through its status
            await when_streaming(gw)
            send(feeds.status, status_changed("later-1", state="succeeded"))

        feeding = asyncio.create_task(appear())
        job = await client.wait("later-1", timeout=20, must_exist=False)
        await feeding
    assert job.state == "succeeded"


async def test_wait_reads_again_when_the_stream_ends(served: str, gw: Harness) -> None:
    """A gateway that ends its streams (shutting down) does not end the wait: it reconnects and reads."""
    feed(gw.ctx.status, status_changed("a-1", state="running"))
    gw.ctx.dashboard.hub.close()  # every stream now ends right after it opens

    async def finish() -> None:
        await asyncio.sleep(0.5)
        feed(gw.ctx.status, status_changed("a-1", state="succeeded", minutes=1))  # the view only: no stream news

    feeding = asyncio.create_task(finish())
    with Client(served, TOKENS["alice"]) as client:
        job = await asyncio.to_thread(client.wait, "a-1", "succeeded", 20)
    await feeding
    assert job.state == "succeeded"


async def test_watch_yields_typed_events_the_caller_may_see(served: str, gw: Harness, feeds: DashboardFeeds) -> None:
    events: list[object] = []

    async def changes() -> None:
        await when_streaming(gw)
        send(feeds.status, status_changed("b-1", tenant="team-b", queue="team-b"))  # bob's
        send(feeds.status, status_changed("a-1", state="pending", position=2))
        send(feeds.usage, QueueUsageReported(queue="team-a", cohort="research", as_of=T0,
                                             allocated={"gpu:a100": 8}, nominal={"gpu:a100": 16},
                                             decayed_gpu_seconds=0, half_life_s=3600))

    feeding = asyncio.create_task(changes())
    async with AsyncClient(served, TOKENS["alice"]) as client:
        async for event in client.watch(kinds=("job", "queue")):
            events.append(event)
            if {JobsChanged, QueuesChanged} <= {type(e) for e in events}:
                break
    await feeding
    assert isinstance(events[0], StreamOpened) and set(events[0].kinds) == {"job", "queue"}
    jobs = [job for e in events if isinstance(e, JobsChanged) for job in e.jobs]
    assert [(j.job_id, j.position) for j in jobs] == [("a-1", 2)]
    usage = [u for e in events if isinstance(e, QueuesChanged) for u in e.usage]
    assert [(u.queue, u.allocated) for u in usage] == [("team-a", {"gpu:a100": 8})]


async def test_submit_and_wait(served: str, gw: Harness, feeds: DashboardFeeds) -> None:
    async def run_it() -> None:
        await when_streaming(gw)
        [sent] = gw.publisher.on(INTENTS_TOPIC)
        send(feeds.status, status_changed(sent.key(), name="train", state="succeeded"))

    feeding = asyncio.create_task(run_it())
    with Client(served, TOKENS["alice"]) as client:
        done = await asyncio.to_thread(client.submit_and_wait, job_spec("train"), "succeeded",
                                       idempotency_key="step-1", timeout=20)
    await feeding
    assert done.state == "succeeded" and done.name == "train"
