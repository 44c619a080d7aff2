"""The raw broker round trip: aiokafka produce -> consume of the same messages, paced the same way."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.system.measure import Spread
from bench.system.pacing import paced
from services.runtime.kafka import KafkaSettings, TopicPlan, create_topics

PARTITIONS = 12  # as many as muster.intents


@dataclass(frozen=True)
class RoundTrip:
    count: int
    seconds: float  # first produce to last consume
    latency: Spread

    @property
    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0


async def round_trip(settings: KafkaSettings, payloads: Sequence[bytes], rate: float | None) -> RoundTrip:
    """Produce ``payloads`` (idempotent, ``acks=all``, as Muster's producers) and consume them back."""
    topic = f"bench.roundtrip.{uuid.uuid4().hex[:8]}"
    await create_topics(settings, [TopicPlan(topic, PARTITIONS, {})])
    options = settings.client_options()
    consumer = AIOKafkaConsumer(**options, enable_auto_commit=False, isolation_level="read_committed")
    producer = AIOKafkaProducer(**options, acks="all", enable_idempotence=True, linger_ms=5)
    await consumer.start()
    await producer.start()
    sent_at: dict[bytes, float] = {}
    latencies: list[float] = []
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        done = asyncio.Event()

        async def consume() -> float:
            while len(latencies) < len(payloads):
                batch = await consumer.getmany(timeout_ms=100, max_records=5000)
                now = time.perf_counter()
                for records in batch.values():
                    latencies.extend(now - sent_at[r.key] for r in records if r.key is not None)
            done.set()
            return time.perf_counter()

        reader = asyncio.create_task(consume(), name="bench round trip")
        started = time.perf_counter()
        futures = []
        async for due in paced(len(payloads), rate):
            for i in due:
                key = f"m{i}".encode()
                sent_at[key] = time.perf_counter()
                futures.append(await producer.send(topic, payloads[i], key=key))
        await asyncio.gather(*futures)
        async with asyncio.timeout(300):
            ended = await reader
        return RoundTrip(len(payloads), ended - started, Spread.of(latencies))
    finally:
        await producer.stop()
        await consumer.stop()
