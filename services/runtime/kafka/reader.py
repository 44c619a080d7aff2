"""Topics read once, from the beginning (or from a time) up to the end they had when the read started (no
group, no commits)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from services.runtime.kafka.settings import KafkaSettings

__all__ = ["KafkaError", "RawRecord", "read_to_end"]


@dataclass(frozen=True)
class RawRecord:
    """One record as stored: where it was read and its undecoded value (None for a tombstone)."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    #: the record's headers as stored (name, value), e.g. a dead letter's reason
    headers: tuple[tuple[str, bytes], ...] = ()


async def read_to_end(settings: KafkaSettings, partitions: Mapping[str, int], *,
                      within_s: float = 120.0, from_ms: Mapping[str, int] | None = None) -> list[RawRecord]:
    """Every record of ``partitions`` (topic -> partition count) below the end offsets seen on entry, in
    fetch order. A topic in ``from_ms`` (topic -> epoch milliseconds) is read from the first record whose
    timestamp is at or after that time (``offsets_for_times``) instead of from the beginning. Raises
    ``TimeoutError`` after ``within_s``, ``KafkaError`` when the broker fails."""
    consumer = AIOKafkaConsumer(**settings.client_options(), group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    try:
        await consumer.start()
    except BaseException:
        await consumer.stop()  # a consumer that could not start still holds its client
        raise
    try:
        tps = [TopicPartition(t, p) for t, count in partitions.items() for p in range(count)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        starts = dict.fromkeys(tps, 0)
        timed = {tp: (from_ms or {})[tp.topic] for tp in tps if tp.topic in (from_ms or {})}
        if timed:
            found = await consumer.offsets_for_times(timed)
            for tp in timed:
                at = found.get(tp)
                starts[tp] = ends[tp] if at is None else at.offset  # None: nothing at or after that time
                consumer.seek(tp, starts[tp])
        todo = {tp for tp, end in ends.items() if end > starts[tp]}
        records: list[RawRecord] = []
        async with asyncio.timeout(within_s):
            while todo:
                batch = await consumer.getmany(*todo, timeout_ms=500)
                for tp, fetched in batch.items():
                    records.extend(RawRecord(tp.topic, tp.partition, r.offset, r.value, tuple(r.headers or ()))
                                   for r in fetched if r.offset < ends[tp])
                for tp in list(todo):
                    if await consumer.position(tp) >= ends[tp]:
                        todo.discard(tp)
        return records
    finally:
        await consumer.stop()
