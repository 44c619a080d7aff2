"""The system's output topics read whole, from the beginning to their current end."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas.codec import DecodeError, decode
from schemas.envelope import Envelope
from schemas.topics import DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC, STATUS_TOPIC, TOPICS
from services.runtime.kafka import KafkaSettings

LOG_TOPICS = (STATUS_TOPIC, DECISIONS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)


@dataclass(frozen=True)
class LoggedEvent:
    """One decoded envelope, the topic it was read from, and its position there."""

    topic: str
    partition: int
    offset: int
    envelope: Envelope


@dataclass
class EventLog:
    """Every event of the read topics, ordered by when it occurred; ``undecodable`` counts bad records."""

    events: list[LoggedEvent]
    undecodable: int = 0
    dead_letters: int = 0


async def read_log(settings: KafkaSettings, topics: tuple[str, ...] = LOG_TOPICS, *,
                   within_s: float = 120.0) -> EventLog:
    """Read ``topics`` (and count their dead-letter topics) from offset 0 up to the end seen on entry."""
    dlqs = tuple(TOPICS[t].dlq for t in topics)
    consumer = AIOKafkaConsumer(**settings.client_options(), group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in range(TOPICS[t].partitions)]
        partitions += [TopicPartition(TOPICS[t].dlq, p) for t in topics for p in range(TOPICS[t].partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        todo = {tp for tp, end in ends.items() if end > 0}
        events: list[LoggedEvent] = []
        log = EventLog(events)
        async with asyncio.timeout(within_s):
            while todo:
                batch = await consumer.getmany(*todo, timeout_ms=500)
                for tp, records in batch.items():
                    for record in records:
                        if record.offset >= ends[tp]:
                            continue
                        if tp.topic in dlqs:
                            log.dead_letters += 1
                        elif record.value is not None:
                            try:
                                envelope = decode(record.value, topic=tp.topic)
                            except DecodeError:
                                log.undecodable += 1
                                continue
                            events.append(LoggedEvent(tp.topic, tp.partition, record.offset, envelope))
                for tp in list(todo):
                    if await consumer.position(tp) >= ends[tp]:
                        todo.discard(tp)
        events.sort(key=lambda e: (e.envelope.occurred_at, e.topic, e.partition, e.offset))
        return log
    finally:
        await consumer.stop()

