"""``KeyedLanes``, the consumer loop's records in hand across fetches: each key in order, at most
``concurrency`` at once, each partition released only up to its first record not yet handled."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiokafka.structs import ConsumerRecord, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from services.runtime.kafka.lanes import KeyedLanes, Record
from tests.integration.builders import eventually

TOPIC = "muster.decisions.v1"


def record(offset: int, key: str | None, *, partition: int = 0) -> Record:
    encoded = None if key is None else key.encode()
    return ConsumerRecord(TOPIC, partition, offset, 0, 0, encoded, b"{}", None, 0, 2, [])


class Harness:
    """Lanes over a handler that records what it handled, and the offsets they released per partition."""

    def __init__(self, handle: Callable[[Record], Awaitable[None]] | None = None, *, concurrency: int = 4,
                 limit: int = 100) -> None:
        self.started: list[tuple[int, int]] = []  # (partition, offset) in the order handling started
        self.handled: list[tuple[int, int]] = []  # (partition, offset) in the order handling finished
        self.released: dict[int, list[int]] = {}
        self.seen_at_release: list[tuple[int, int, frozenset[tuple[int, int]]]] = []  # what was handled then
        self.stopping = asyncio.Event()
        self._inner = handle

        async def handler(r: Record) -> None:
            self.started.append((r.partition, r.offset))
            if self._inner is not None:
                await self._inner(r)
            self.handled.append((r.partition, r.offset))

        def advance(tp: TopicPartition, offset: int) -> None:
            self.released.setdefault(tp.partition, []).append(offset)
            self.seen_at_release.append((tp.partition, offset, frozenset(self.handled)))

        self.lanes = KeyedLanes(handler, concurrency=concurrency, limit=limit, stopping=self.stopping,
                                on_advance=advance)

    def upto(self, partition: int = 0) -> int | None:
        offsets = self.released.get(partition)
        return offsets[-1] if offsets else None

    async def drained(self) -> None:
        await eventually(lambda: not self.lanes.in_hand, within=5, interval=0, what="every record handled")

    async def in_hand(self, *records: tuple[int, int]) -> None:
        """Once exactly ``records`` (partition, offset) have started."""
        await eventually(lambda: self.started == list(records), within=5, interval=0, what=f"{records} started")


async def test_a_slow_record_holds_back_only_its_key_and_its_partitions_commit_point() -> None:
    gate = asyncio.Event()

    async def handle(r: Record) -> None:
        if r.key == b"slow":
            await gate.wait()

    h = Harness(handle)
    h.lanes.add([record(0, "slow"), record(1, "a"), record(2, "slow"), record(3, "b")])
    h.lanes.add([record(4, "c")])  # a later fetch: not held behind the first one's slow record
    await eventually(lambda: len(h.handled) == 3, within=5, interval=0)
    assert sorted(h.handled) == [(0, 1), (0, 3), (0, 4)]
    assert h.upto() is None  # offset 0 is not handled: nothing may be committed
    gate.set()
    await h.drained()
    assert [o for _, o in h.handled if o in (0, 2)] == [0, 2]  # one key, in order
    assert h.upto() == 5
    await h.lanes.close()


async def test_at_most_concurrency_records_are_handled_at_once() -> None:
    now = most = 0

    async def handle(r: Record) -> None:
        nonlocal now, most
        now += 1
        most = max(most, now)
        await asyncio.sleep(0.01)
        now -= 1

    h = Harness(handle, concurrency=3)
    h.lanes.add([record(n, f"k{n}") for n in range(12)])
    await h.drained()
    assert most == 3
    assert h.upto() == 12


async def test_unkeyed_records_keep_their_partitions_order() -> None:
    async def handle(r: Record) -> None:
        await asyncio.sleep(0.001 * (5 - r.offset % 5))

    h = Harness(handle)
    h.lanes.add([record(n, None, partition=n % 2) for n in range(10)])
    await h.drained()
    for partition in (0, 1):
        assert [o for p, o in h.handled if p == partition] == list(range(partition, 10, 2))


async def test_passed_over_records_take_no_lane_but_wait_for_the_records_before_them() -> None:
    gate = asyncio.Event()
    seen: list[int] = []

    async def handle(r: Record) -> None:
        seen.append(r.offset)
        await gate.wait()

    h = Harness(handle, concurrency=1)
    h.lanes.add([record(0, "a"), record(1, "x"), record(2, "x"), record(3, "b")],
                passed_over=lambda r: r.key == b"x")
    await h.in_hand((0, 0))
    assert seen == [0] and h.lanes.in_hand == 2  # the passed-over two are neither queued nor handled
    assert h.upto() is None
    gate.set()
    await h.drained()
    assert seen == [0, 3]
    assert h.upto() == 4


async def test_room_waits_for_a_place_and_gives_up_after_its_timeout() -> None:
    gate = asyncio.Event()

    async def handle(r: Record) -> None:
        await gate.wait()

    h = Harness(handle, limit=2)
    h.lanes.add([record(0, "a"), record(1, "b")])
    assert not await h.lanes.room(timeout_s=0.05)
    waiting = asyncio.create_task(h.lanes.room(timeout_s=5))
    await asyncio.sleep(0.01)  # nothing to wait for: it must still be waiting after a while
    assert not waiting.done()
    gate.set()
    assert await waiting
    await h.drained()


async def test_a_failing_handler_stops_every_lane_after_its_record_in_hand() -> None:
    gate = asyncio.Event()

    async def handle(r: Record) -> None:
        if r.key == b"bad":
            raise RuntimeError("cannot write the dead letter")
        await gate.wait()

    h = Harness(handle, concurrency=4)
    h.lanes.add([record(0, "a"), record(1, "bad"), record(2, "bad"), record(3, "a")])
    await eventually(lambda: h.lanes.failure is not None, within=5, interval=0)
    assert isinstance(h.lanes.failure, RuntimeError)
    assert not await h.lanes.room(timeout_s=0)
    gate.set()
    await h.lanes.close()
    assert h.handled == [(0, 0)]  # the record in hand finished; offset 3 was not started
    assert h.upto() == 1  # offset 1 failed: nothing past it is released
    assert h.lanes.in_hand == 0


async def test_stopping_lets_the_records_in_hand_finish_and_starts_no_more() -> None:
    gate = asyncio.Event()

    async def handle(r: Record) -> None:
        await gate.wait()

    h = Harness(handle, concurrency=1)
    h.lanes.add([record(0, "a"), record(1, "a"), record(2, "b")])
    await h.in_hand((0, 0))
    h.stopping.set()
    gate.set()
    await h.lanes.close()
    assert h.handled == [(0, 0)]
    assert h.upto() == 1


async def test_release_waits_for_the_partitions_records_in_hand_and_starts_none_of_the_rest() -> None:
    gate = asyncio.Event()

    async def handle(r: Record) -> None:
        if r.offset == 0:
            await gate.wait()

    h = Harness(handle, concurrency=1)
    h.lanes.add([record(0, "a"), record(1, "b"), record(0, "c", partition=1)])
    await h.in_hand((0, 0))
    releasing = asyncio.create_task(h.lanes.release([TopicPartition(TOPIC, 0)]))
    await asyncio.sleep(0.01)  # nothing to wait for: it must still be waiting after a while
    assert not releasing.done()  # offset 0 is being handled
    gate.set()
    await releasing
    assert h.upto() == 1  # released as it finished, before the partition was given up
    await h.drained()
    assert (0, 1) not in h.handled  # queued, not started: the next owner reads it again
    assert (1, 0) in h.handled
    # assigned again later, the partition starts afresh from what the group committed
    h.lanes.add([record(1, "b")])
    await h.drained()
    assert h.upto() == 2
    await h.lanes.close()


async def test_close_cancelled_cancels_the_lanes() -> None:
    async def handle(r: Record) -> None:
        await asyncio.Event().wait()

    h = Harness(handle)
    h.lanes.add([record(0, "a")])
    await h.in_hand((0, 0))
    closing = asyncio.create_task(h.lanes.close())
    await asyncio.sleep(0)  # one turn: close is waiting for the lane
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    await h.drained()
    assert h.upto() is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.sampled_from(["a", "b", "c", None]), st.integers(0, 4),
                          st.booleans()), min_size=1, max_size=30),
       st.integers(1, 4), st.integers(1, 5))
def test_any_mix_keeps_each_keys_order_and_releases_only_handled_prefixes(
        spec: list[tuple[int, str | None, int, bool]], concurrency: int, fetches: int) -> None:
    """Records of random partitions and keys, each taking a random number of event-loop turns (some passed
    over), added in several fetches: each key's records finish in offset order, every released offset of a
    partition is one whose records before it are all handled, and at the end all of them are released."""
    offsets = {0: 0, 1: 0}
    records: list[tuple[Record, int, bool]] = []
    for partition, key, turns, skip in spec:
        records.append((record(offsets[partition], key, partition=partition), turns, skip))
        offsets[partition] += 1
    turns_of = {(r.partition, r.offset): turns for r, turns, _ in records}
    skipped = {(r.partition, r.offset) for r, _, skip in records if skip}

    async def run() -> Harness:
        async def handle(r: Record) -> None:
            for _ in range(turns_of[(r.partition, r.offset)]):
                await asyncio.sleep(0)

        h = Harness(handle, concurrency=concurrency)
        step = max(1, len(records) // fetches)
        for start in range(0, len(records), step):
            h.lanes.add([r for r, _, _ in records[start:start + step]],
                        passed_over=lambda r: (r.partition, r.offset) in skipped)
            await asyncio.sleep(0)
        await h.drained()
        await h.lanes.close()
        return h

    h = asyncio.run(run())
    for partition, offset, handled in h.seen_at_release:
        assert all((partition, o) in handled or (partition, o) in skipped for o in range(offset))
    for key in ("a", "b", "c", None):
        for partition in (0, 1):
            mine = [r.offset for r, _, skip in records
                    if not skip and r.partition == partition and (r.key.decode() if r.key else None) == key]
            assert [o for p, o in h.handled if p == partition and o in mine] == mine
    for partition, count in offsets.items():
        if count:
            assert h.upto(partition) == count
