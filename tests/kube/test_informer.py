"""Informer logic against a scripted event source: list, watch, resume, re-list, delivery, shutdown."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from services.runtime.kube import ADDED, DELETED, MODIFIED, Backoff, Informer, KubeObject, Subscription
from services.runtime.kube.errors import api_error
from tests.kube.builders import HANG, FakeSource, bookmark, event, expired, obj

FAST = Backoff(initial=0.001, maximum=0.01)


def names(events: list[tuple[str, KubeObject]]) -> list[tuple[str, str, str]]:
    return [(t, o["metadata"]["name"], o["metadata"]["resourceVersion"]) for t, o in events]


async def take(sub: Subscription, n: int) -> list[tuple[str, KubeObject]]:
    out: list[tuple[str, KubeObject]] = []
    async with asyncio.timeout(2):
        while len(out) < n:
            out.append(await anext(sub))
    return out


async def test_lists_then_watches_from_the_list_version() -> None:
    src = FakeSource(lists=[([obj("a", 1)], "10")],
                     streams=[[event(ADDED, obj("b", 11)), bookmark(15), event(MODIFIED, obj("a", 16)), HANG]])
    async with Informer(src, backoff=FAST) as inf:
        sub = inf.subscribe()
        got = await take(sub, 3)
        assert names(got) == [(ADDED, "a", "1"), (ADDED, "b", "11"), (MODIFIED, "a", "16")]
        assert src.watch_calls == ["10"]
        assert inf.resource_version == "16"
        assert (inf.get("a", "default") or {})["metadata"]["resourceVersion"] == "16"
        assert sorted(o["metadata"]["name"] for o in inf.items()) == ["a", "b"]
        assert inf.synced and inf.lists == 1


async def test_bookmarks_advance_the_resume_point_without_events() -> None:
    src = FakeSource(lists=[([], "5")], streams=[[bookmark(9)], [HANG]])
    async with Informer(src, backoff=FAST) as inf:
        sub = inf.subscribe()
        await src.wait_watch_calls(2)
        assert src.watch_calls == ["5", "9"]
        assert sub._queue.empty()
        assert inf.lists == 1


async def test_expired_watch_relists_and_reports_only_the_difference() -> None:
    src = FakeSource(
        lists=[([obj("keep", 1), obj("edit", 2), obj("drop", 3)], "3"),
               ([obj("keep", 1), obj("edit", 7), obj("late", 8), obj("new", 9)], "9")],
        streams=[[event(ADDED, obj("late", 8)), expired()], [event(ADDED, obj("next", 10)), HANG]],
    )
    async with Informer(src, backoff=FAST) as inf:
        sub = inf.subscribe(replay=False)
        got = await take(sub, 5)
        # "late" was seen on the watch before the 410: the re-list does not report it again
        assert names(got) == [(ADDED, "keep", "1"), (ADDED, "edit", "2"), (ADDED, "drop", "3"),
                              (ADDED, "late", "8"), (DELETED, "drop", "3")]
        got = await take(sub, 3)
        assert names(got) == [(MODIFIED, "edit", "7"), (ADDED, "new", "9"), (ADDED, "next", "10")]
        assert src.list_calls == 2 and inf.lists == 2
        assert src.watch_calls == ["3", "9"]


async def test_http_410_on_watch_relists() -> None:
    src = FakeSource(lists=[([obj("a", 1)], "1"), ([obj("a", 1)], "20")], streams=[[api_error(410, b"{}")]])
    async with Informer(src, backoff=FAST) as inf:
        await src.wait_watch_calls(2)
        assert src.watch_calls == ["1", "20"]
        assert inf.lists == 2


@pytest.mark.parametrize("failure", [
    api_error(500, b'{"reason":"InternalError"}'),
    aiohttp.ClientPayloadError("connection reset"),
    ConnectionResetError(),
    TimeoutError(),
    api_error(503, b"{}"),
])
async def test_transient_failures_resume_from_the_last_version(failure: BaseException) -> None:
    src = FakeSource(lists=[([], "1")],
                     streams=[[event(ADDED, obj("a", 4)), failure], [event(MODIFIED, obj("a", 5)), HANG]])
    async with Informer(src, backoff=FAST) as inf:
        sub = inf.subscribe()
        got = await take(sub, 2)
        assert names(got) == [(ADDED, "a", "4"), (MODIFIED, "a", "5")]
        assert src.watch_calls == ["1", "4"]
        assert inf.lists == 1


async def test_ended_stream_resumes_and_repeated_events_are_dropped() -> None:
    src = FakeSource(lists=[([], "1")],
                     streams=[[event(ADDED, obj("a", 2))], [event(ADDED, obj("a", 2)), event(MODIFIED, obj("a", 3))]])
    async with Informer(src, backoff=FAST) as inf:
        sub = inf.subscribe()
        got = await take(sub, 2)
        assert names(got) == [(ADDED, "a", "2"), (MODIFIED, "a", "3")]
        await src.wait_watch_calls(3)
        assert src.watch_calls == ["1", "2", "3"]


async def test_error_event_other_than_410_resumes_without_relist() -> None:
    err = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "reason": "InternalError"}}
    src = FakeSource(lists=[([], "1")], streams=[[event(ADDED, obj("a", 2)), err]])
    async with Informer(src, backoff=FAST) as inf:
        await src.wait_watch_calls(2)
        assert src.watch_calls == ["1", "2"] and inf.lists == 1


async def test_failed_list_is_retried() -> None:
    src = FakeSource(lists=[api_error(500, b"{}"), aiohttp.ClientConnectionError(), ([obj("a", 1)], "1")])
    async with Informer(src, backoff=FAST) as inf:
        async with asyncio.timeout(2):
            await inf.wait_synced()
        assert src.list_calls == 3 and inf.get("a", "default") is not None


async def test_handlers_sync_async_and_failing() -> None:
    src = FakeSource(lists=[([obj("a", 1)], "1")], streams=[[event(DELETED, obj("a", 2)), HANG]])
    seen_sync: list[tuple[str, str]] = []
    seen_async: list[tuple[str, str]] = []

    async def slow(kind: str, o: KubeObject) -> None:
        await asyncio.sleep(0)
        seen_async.append((kind, o["metadata"]["name"]))

    def broken(kind: str, o: KubeObject) -> None:
        raise RuntimeError("handler bug")

    inf = Informer(src, backoff=FAST)
    inf.add_handler(broken)
    inf.add_handler(lambda kind, o: seen_sync.append((kind, o["metadata"]["name"])))
    remove = inf.add_handler(slow)
    async with inf:
        async with asyncio.timeout(2):
            await inf.wait_for(lambda objs: not objs and inf.lists == 1 and len(seen_async) == 2)
        remove()
    assert seen_sync == seen_async == [(ADDED, "a"), (DELETED, "a")]


async def test_wait_for_a_state() -> None:
    src = FakeSource(lists=[([], "1")], streams=[[event(ADDED, obj("a", 2, status={"phase": "Running"})), HANG]])
    async with Informer(src, backoff=FAST) as inf, asyncio.timeout(2):
        objs = await inf.wait_for(lambda objs: any(o.get("status", {}).get("phase") == "Running" for o in objs))
    assert [o["metadata"]["name"] for o in objs] == ["a"]


async def test_stop_cancels_cleanly_and_ends_subscriptions() -> None:
    src = FakeSource(lists=[([obj("a", 1)], "1")])
    before = asyncio.all_tasks()
    inf = Informer(src, backoff=FAST)
    inf.start()
    sub = inf.subscribe(replay=False)
    await src.wait_watch_calls(1)
    assert src.open_streams == 1
    await inf.stop()
    assert src.open_streams == 0
    assert asyncio.all_tasks() == before
    assert [e async for e in sub] == [(ADDED, inf.get("a", "default"))]


async def test_subscription_replays_the_cache_and_closes() -> None:
    src = FakeSource(lists=[([obj("a", 1), obj("b", 2)], "2")])
    async with Informer(src, backoff=FAST) as inf:
        await inf.wait_synced()
        async with inf.subscribe() as sub:
            got = await take(sub, 2)
        assert names(got) == [(ADDED, "a", "1"), (ADDED, "b", "2")]
        assert sub not in inf._subscriptions


async def test_non_retryable_api_errors_keep_the_informer_alive() -> None:
    src = FakeSource(lists=[ApiException(status=403, reason="Forbidden"), ([], "1")])
    async with Informer(src, backoff=FAST) as inf, asyncio.timeout(2):
        await inf.wait_synced()
