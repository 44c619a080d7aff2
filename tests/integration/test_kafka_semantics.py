"""What Muster relies on from Apache Kafka, proven with aiokafka against the real broker."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import TopicPartition

from services.runtime.kafka import KafkaSettings
from tests.integration.builders import TopicFactory, consumer, eventually, produce, read_all, read_until

pytestmark = pytest.mark.integration


async def test_group_rebalance_splits_then_hands_over(kafka_settings: KafkaSettings, topics: TopicFactory) -> None:
    topic = await topics.create("rebalance", partitions=4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    first = consumer(kafka_settings, topic, group_id=group)
    second = consumer(kafka_settings, topic, group_id=group)
    await first.start()
    try:
        await eventually(lambda: len(first.assignment()) == 4)
        await second.start()
        try:
            await eventually(lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2)
            assert first.assignment().isdisjoint(second.assignment())
            assert {tp.partition for tp in first.assignment() | second.assignment()} == {0, 1, 2, 3}
        finally:
            await second.stop()
        await eventually(lambda: len(first.assignment()) == 4)
    finally:
        await first.stop()


async def test_manual_commit_survives_consumer_restart(kafka_settings: KafkaSettings, topics: TopicFactory) -> None:
    topic = await topics.create("commits")
    group = f"g-{uuid.uuid4().hex[:8]}"
    await produce(kafka_settings, topic, [(b"k", str(i).encode()) for i in range(10)])
    tp = TopicPartition(topic, 0)

    reader = consumer(kafka_settings, topic, group_id=group)
    await reader.start()
    try:
        records = await read_until(reader, 10)
        assert [r.offset for r in records] == list(range(10))
        await reader.commit({tp: 6})  # processed 0..5; 6..9 were read but not processed
    finally:
        await reader.stop()

    again = consumer(kafka_settings, topic, group_id=group)
    await again.start()
    try:
        redelivered = await read_until(again, 4)
        assert [r.value for r in redelivered] == [b"6", b"7", b"8", b"9"]
        assert await again.committed(tp) == 6
    finally:
        await again.stop()


async def test_compaction_keeps_last_value_and_tombstones_remove_keys(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create(
        "compact",
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "100",
        },
    )
    history = [(b"a", b"a1"), (b"b", b"b1"), (b"a", b"a2"), (b"b", b"b2"), (b"a", b"a3"), (b"b", None)]
    await produce(kafka_settings, topic, history)
    await asyncio.sleep(0.3)
    await produce(kafka_settings, topic, [(b"c", b"c1")])  # rolls the segment so the old one is cleanable

    async def compacted() -> dict[bytes, list[bytes | None]] | None:
        values: dict[bytes, list[bytes | None]] = {}
        for record in await read_all(kafka_settings, topic, idle_s=0.4):
            assert record.key is not None
            values.setdefault(record.key, []).append(record.value)
        if values.get(b"a") == [b"a3"] and values.get(b"b", [None]) == [None]:
            return values
        return None

    async with asyncio.timeout(60):
        result = await compacted()
        while result is None:
            await asyncio.sleep(0.5)
            result = await compacted()
    assert result[b"a"] == [b"a3"]
    assert all(value is None for value in result.get(b"b", []))
    assert result[b"c"] == [b"c1"]


async def test_idempotent_producer_writes_each_record_once_in_order(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create("idempotent")
    producer = AIOKafkaProducer(**kafka_settings.client_options(), acks="all", enable_idempotence=True)
    await producer.start()
    try:
        # The broker granted a producer id: idempotent produce is supported (InitProducerId succeeded).
        assert producer._txn_manager is not None and producer._txn_manager.producer_id >= 0
        futures = [await producer.send(topic, key=b"job", value=str(i).encode()) for i in range(200)]
        offsets = [meta.offset for meta in await asyncio.gather(*futures)]
    finally:
        await producer.stop()
    assert offsets == list(range(200))
    values = [r.value for r in await read_all(kafka_settings, topic, idle_s=0.5)]
    assert values == [str(i).encode() for i in range(200)]


async def test_transactions_hide_aborted_records_from_read_committed(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create("txn")
    producer = AIOKafkaProducer(
        **kafka_settings.client_options(), transactional_id=f"txn-{uuid.uuid4().hex[:8]}"
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, key=b"k", value=b"aborted")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(topic, key=b"k", value=b"committed")
    finally:
        await producer.stop()
    committed_view = [r.value for r in await read_all(kafka_settings, topic, isolation_level="read_committed")]
    raw_view = [r.value for r in await read_all(kafka_settings, topic, isolation_level="read_uncommitted")]
    assert committed_view == [b"committed"]
    assert raw_view == [b"aborted", b"committed"]
