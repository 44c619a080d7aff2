"""Raw Kafka access for hostile tests: a producer that bypasses every Muster check, and a DLQ reader."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Iterable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord, TopicPartition

from schemas.topics import dlq_topic
from services.runtime.kafka import KafkaSettings
from services.runtime.kafka.headers import (
    DLQ_DETAIL,
    DLQ_GROUP,
    DLQ_ORIGINAL_BYTES,
    DLQ_REASON,
    DLQ_TOPIC,
    header_value,
)
from tests.hostile.records import HostileRecord

#: far above the broker's max.message.bytes: gzip lets an oversized value through the broker
RAW_MAX_REQUEST_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One record of a ``.dlq`` topic, as far as the tests look at it."""

    topic: str
    key: bytes | None
    reason: str | None
    source_topic: str | None
    group: str | None
    value_bytes: int
    original_bytes: int | None
    detail: str | None = None


@contextlib.asynccontextmanager
async def raw_producer(settings: KafkaSettings) -> AsyncIterator[AIOKafkaProducer]:
    """A plain gzip producer, as an external pipeline would run one."""
    producer = AIOKafkaProducer(**settings.client_options(), compression_type="gzip",
                                max_request_size=RAW_MAX_REQUEST_BYTES, acks="all")
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


async def produce(settings: KafkaSettings, topic: str, records: Iterable[HostileRecord]) -> int:
    """Write ``records`` to ``topic`` (keyed by their case) and wait for every acknowledgement."""
    sent = 0
    async with raw_producer(settings) as producer:
        for record in records:
            await producer.send_and_wait(topic, record.value, key=record.key)
            sent += 1
    return sent


async def read_dead_letters(settings: KafkaSettings, topics: Iterable[str], *, count: int,
                            within: float = 60.0, settle_s: float = 2.0,
                            keys: Collection[bytes] | None = None) -> list[DeadLetter]:
    """Every record of the topics' DLQs (only those keyed by one of ``keys`` when given): at least ``count`` of
    them, then whatever arrives in ``settle_s``."""
    consumer = AIOKafkaConsumer(*(dlq_topic(t) for t in topics), **settings.client_options(), group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    found: list[DeadLetter] = []

    def fetched(batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]) -> list[DeadLetter]:
        return [d for d in _letters(batch) if keys is None or d.key in keys]

    try:
        async with asyncio.timeout(within):
            while len(found) < count:
                found += fetched(await consumer.getmany(timeout_ms=200))
        await asyncio.sleep(settle_s)
        found += fetched(await consumer.getmany(timeout_ms=500))
    except TimeoutError:
        raise AssertionError(f"only {len(found)} of {count} dead letters within {within}s: {found}") from None
    finally:
        await consumer.stop()
    return found


def _letters(batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]) -> list[DeadLetter]:
    letters = []
    for records in batch.values():
        for r in records:
            headers = [(name, bytes(value)) for name, value in r.headers]
            original = header_value(headers, DLQ_ORIGINAL_BYTES)
            letters.append(DeadLetter(
                topic=r.topic, key=r.key, reason=header_value(headers, DLQ_REASON),
                source_topic=header_value(headers, DLQ_TOPIC), group=header_value(headers, DLQ_GROUP),
                value_bytes=len(r.value or b""), original_bytes=int(original) if original else None,
                detail=header_value(headers, DLQ_DETAIL),
            ))
    return letters
