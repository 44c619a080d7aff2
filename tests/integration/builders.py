"""Shared helpers for the integration tests: unique topics, consumers that read a topic to the end, a
consumer loop run for the length of a block."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TypeAlias

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord, TopicPartition

from schemas.envelope import Envelope
from schemas.topics import dlq_topic
from services.runtime.kafka import ConsumerLoop, Delivery, KafkaSettings, TopicPlan, create_topics
from tests.builders.messages import example_envelopes

Record: TypeAlias = "ConsumerRecord[bytes, bytes]"


class TopicFactory:
    """Makes uniquely named topics for one test (names stay valid Kafka topic names)."""

    def __init__(self, settings: KafkaSettings, test_name: str) -> None:
        self._settings = settings
        self._prefix = "it." + re.sub(r"[^A-Za-z0-9._-]", "-", test_name)[:80]

    def name(self, label: str = "t") -> str:
        return f"{self._prefix}.{label}.{uuid.uuid4().hex[:8]}"

    async def create(
        self,
        label: str = "t",
        *,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> str:
        topic = name or self.name(label)
        await create_topics(self._settings, [TopicPlan(topic, partitions, dict(config or {}))])
        return topic


def consumer(settings: KafkaSettings, *topics: str, group_id: str | None = None, **options: object) -> AIOKafkaConsumer:
    """A manual-commit consumer reading from the earliest offset."""
    return AIOKafkaConsumer(
        *topics,
        **settings.client_options(),
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **options,
    )


async def read_until(source: AIOKafkaConsumer, count: int, *, within: float = 20.0) -> list[Record]:
    """Records from ``source`` until ``count`` have arrived (fails after ``within`` seconds)."""
    received: list[Record] = []
    async with asyncio.timeout(within):
        while len(received) < count:
            batch = await source.getmany(timeout_ms=200)
            for records in batch.values():
                received.extend(records)
    return received


async def read_all(
    settings: KafkaSettings, topic: str, *, idle_s: float = 1.0, isolation_level: str = "read_uncommitted"
) -> list[Record]:
    """Every record in ``topic`` up to its end offsets when called (however slow the first fetches are
    on a busy machine), then any that arrive until ``idle_s`` passes without news. No group."""
    reader = consumer(settings, topic, isolation_level=isolation_level)
    await reader.start()
    try:
        received: list[Record] = []
        async with asyncio.timeout(30):
            while not reader.assignment():  # the topic's partitions, once its metadata is in
                batch = await reader.getmany(timeout_ms=100)
                received.extend(record for records in batch.values() for record in records)
            ends = await reader.end_offsets(list(reader.assignment()))
            for tp, end in ends.items():
                while await reader.position(tp) < end:
                    batch = await reader.getmany(tp, timeout_ms=200)
                    received.extend(record for records in batch.values() for record in records)
        idle = 0.0
        while idle < idle_s:
            batch = await reader.getmany(timeout_ms=200)
            fresh = [record for records in batch.values() for record in records]
            received.extend(fresh)
            idle = 0.0 if fresh else idle + 0.2
        return received
    finally:
        await reader.stop()


async def produce(
    settings: KafkaSettings,
    topic: str,
    items: Sequence[tuple[bytes | None, bytes | None]],
    **options: object,
) -> None:
    """Write (key, value) records with an idempotent acks=all producer and wait for every ack."""
    producer = AIOKafkaProducer(**settings.client_options(), acks="all", enable_idempotence=True, **options)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=key, value=value) for key, value in items]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def committed(settings: KafkaSettings, group_id: str, tp: TopicPartition) -> int | None:
    """The group's committed offset for ``tp``."""
    reader = consumer(settings, group_id=group_id)
    await reader.start()
    try:
        offset: int | None = await reader.committed(tp)
        return offset
    finally:
        await reader.stop()


async def eventually(condition: Callable[[], bool], *, within: float = 30.0, interval: float = 0.05,
                     what: str = "") -> None:
    """Wait until ``condition()`` holds, checking every ``interval`` s; returns as soon as it does. After
    ``within`` seconds the test fails, saying ``what`` it waited for."""
    try:
        async with asyncio.timeout(within):
            while True:
                if condition():
                    return
                await asyncio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"not within {within:g}s: {what or 'the condition'}") from None


Seen: TypeAlias = list[tuple[Envelope, Delivery]]


def collector(seen: Seen) -> Callable[[Envelope, Delivery], Awaitable[None]]:
    async def handle(envelope: Envelope, delivery: Delivery) -> None:
        seen.append((envelope, delivery))

    return handle


@asynccontextmanager
async def running(loop: ConsumerLoop, **run_options: bool) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``loop`` in a task until the block ends, then stop it gracefully."""
    task = asyncio.create_task(loop.run(**run_options))
    assigned = asyncio.create_task(loop.wait_assigned())
    try:
        await asyncio.wait({task, assigned}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert assigned.done(), "the loop got no partitions"
        yield task
    finally:
        assigned.cancel()
        loop.stop()
        await asyncio.wait_for(task, 30)


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


async def input_with_dead_letters(topics: TopicFactory, name: str) -> tuple[str, str, Envelope]:
    """A new input topic, its dead-letter topic, and a valid envelope to put on it."""
    topic = await topics.create(name)
    return topic, await topics.create(name=dlq_topic(topic)), example_envelopes()[0][1]
