"""``KeyedLanes``: a consumer's records in hand across fetches, one lane per key, a bounded number handled
at once, each partition's offsets released up to its first record not yet handled.

The loop keeps fetching while lanes run, so a slow record (an API call that waits) holds back only the
records of its own key, not the next fetch: there is no barrier at the end of a fetched batch. What may be
committed is per partition the offset after its unbroken handled run (``on_advance``), so a crash re-delivers
every record not yet handled and nothing is lost (at-least-once)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TypeAlias

from aiokafka.structs import ConsumerRecord, TopicPartition

Record: TypeAlias = "ConsumerRecord[bytes, bytes]"


@dataclass(eq=False)
class _Partition:
    """One owned partition's records in hand: their offsets in fetch order, those handled out of order, and
    how many are being handled now. ``taking`` False: being given up, its queued records are not started."""

    tp: TopicPartition
    offsets: deque[int] = field(default_factory=deque)
    handled: set[int] = field(default_factory=set)
    running: int = 0
    taking: bool = True


class KeyedLanes:
    """Records of the same key (unkeyed: of the same partition) are handled one after another in the order
    they were added; different keys up to ``concurrency`` at once. ``limit``: records in hand (queued or
    being handled) past which ``room`` waits, so a slow handler slows the fetching instead of filling memory.

    A lane stops after its record in hand once ``stopping`` is set or a handler has raised (``failure``: the
    first exception; the loop stops with it)."""

    def __init__(self, handle: Callable[[Record], Awaitable[None]], *, concurrency: int, limit: int,
                 stopping: asyncio.Event, on_advance: Callable[[TopicPartition, int], None]) -> None:
        self._handle = handle
        self._slots = asyncio.Semaphore(concurrency)
        self._limit = limit
        self._stopping = stopping
        self._on_advance = on_advance
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._lanes: dict[object, deque[tuple[Record, _Partition]]] = {}
        self._tasks: dict[object, asyncio.Task[None]] = {}
        self._changed = asyncio.Event()  # a record finished or a lane stopped
        self._closing = False
        self.in_hand = 0
        self.failure: BaseException | None = None

    def add(self, records: Iterable[Record], *, passed_over: Callable[[Record], bool] | None = None) -> None:
        """Queue fetched records (in fetch order) behind their key's lane, starting the lane if idle. Those
        ``passed_over`` says need no handling count as handled at once: they neither wait in a lane nor take
        a place among the ``concurrency``, and are committed once the records before them are handled."""
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            part = self._partitions.get(tp)
            if part is None:
                part = self._partitions[tp] = _Partition(tp)
            part.offsets.append(record.offset)
            if passed_over is not None and passed_over(record):
                self._handled(part, record.offset)
                continue
            key: object = record.key if record.key is not None else tp
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = deque()
            lane.append((record, part))
            self.in_hand += 1
            if key not in self._tasks:
                self._tasks[key] = asyncio.create_task(self._run(key, lane), name=f"lane {key!r}")

    async def room(self, *, timeout_s: float) -> bool:
        """Whether more records may be fetched: wait until fewer than ``limit`` are in hand (True), or until a
        handler failed, the loop is stopping or ``timeout_s`` passed (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.in_hand >= self._limit:
            left = deadline - loop.time()
            if left <= 0 or self.failure is not None or self._stopping.is_set():
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return self.failure is None and not self._stopping.is_set()

    async def release(self, partitions: Collection[TopicPartition]) -> None:
        """Give ``partitions`` up: their queued records are not started, those being handled are waited for
        (their offsets released as they finish), then the partitions are forgotten."""
        parts = [self._partitions.pop(tp) for tp in partitions if tp in self._partitions]
        for part in parts:
            part.taking = False
        while any(part.running for part in parts):
            self._changed.clear()
            await self._changed.wait()

    async def close(self) -> None:
        """Let every lane finish its record in hand and stop; cancelled, cancel them."""
        self._closing = True
        tasks = list(self._tasks.values())
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise

    def _halted(self) -> bool:
        return self._closing or self.failure is not None or self._stopping.is_set()

    async def _run(self, key: object, lane: deque[tuple[Record, _Partition]]) -> None:
        try:
            while lane and not self._halted():
                record, part = lane[0]
                if part.taking:  # else given up: the partition's next owner handles it
                    async with self._slots:
                        if self._halted():
                            break
                        if part.taking:
                            part.running += 1
                            try:
                                await self._handle(record)
                            finally:
                                part.running -= 1
                            self._handled(part, record.offset)
                lane.popleft()
                self.in_hand -= 1
                self._changed.set()
        except Exception as exc:  # the loop stops with the first one
            if self.failure is None:
                self.failure = exc
        finally:
            self.in_hand -= len(lane)  # not started: their offsets stay uncommitted and are delivered again
            lane.clear()
            del self._lanes[key]
            del self._tasks[key]
            self._changed.set()

    def _handled(self, part: _Partition, offset: int) -> None:
        part.handled.add(offset)
        done = None
        while part.offsets and part.offsets[0] in part.handled:
            done = part.offsets.popleft()
            part.handled.discard(done)
        if done is not None:
            self._on_advance(part.tp, done + 1)
