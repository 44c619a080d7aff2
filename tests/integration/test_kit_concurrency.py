"""The consumer loop's keyed concurrency against the real broker: keys overlap, each key keeps its order,
one key's failure is dead-lettered while the others go on, and every offset is committed."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.structs import TopicPartition

from schemas.envelope import Envelope
from services.runtime.kafka import (
    ConsumerLoop,
    Delivery,
    EnvelopeProducer,
    KafkaSettings,
    LoopSettings,
    PerRecord,
    RetryPolicy,
    Topics,
)
from tests.builders.messages import example_envelopes
from tests.integration.builders import (
    TopicFactory,
    committed,
    eventually,
    group,
    input_with_dead_letters,
    read_all,
    running,
)

pytestmark = pytest.mark.integration


async def test_concurrent_mode_overlaps_keys_keeps_each_keys_order_and_commits_everything(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create("concurrent", partitions=2)
    base = example_envelopes()[0][1]
    keys = [f"job-{k}" for k in range(6)]
    sent = {key: [base.model_copy(update={"event_id": f"{key}-{n}"}) for n in range(4)] for key in keys}
    order: dict[str, list[str]] = {key: [] for key in keys}
    in_flight = 0
    most = 0
    group_id = group()

    async def slow(envelope: Envelope, delivery: Delivery) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.02)
        order[(delivery.key or b"").decode()].append(envelope.event_id)
        in_flight -= 1

    async with EnvelopeProducer(kafka_settings) as producer:
        for n in range(4):
            for key in keys:
                await producer.send(topic, sent[key][n], key=key)
        await producer.flush()
        config = LoopSettings(Topics([topic]), settle=PerRecord(concurrency=3), group_id=group_id)
        loop = ConsumerLoop(kafka_settings, config, slow, producer)
        async with running(loop):
            await eventually(lambda: loop.stats.handled == 24)
    assert order == {key: [e.event_id for e in sent[key]] for key in keys}
    assert 1 < most <= 3
    offsets = [await committed(kafka_settings, group_id, TopicPartition(topic, p)) or 0 for p in range(2)]
    assert sum(offsets) == 24


async def test_concurrent_mode_dead_letters_one_keys_failure_and_handles_the_others(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic, dlq, envelope = await input_with_dead_letters(topics, "concurrent-failing")
    handled: list[str] = []

    async def handle(envelope: Envelope, delivery: Delivery) -> None:
        if delivery.key == b"bad":
            raise RuntimeError("cannot handle this one")
        handled.append(envelope.event_id)

    async with EnvelopeProducer(kafka_settings) as producer:
        for n, key in enumerate(["a", "bad", "b", "c"]):
            await producer.send(topic, envelope.model_copy(update={"event_id": f"e{n}"}), key=key)
        await producer.flush()
        config = LoopSettings(Topics([topic]), settle=PerRecord(concurrency=4), group_id=group(),
                              retry=RetryPolicy(attempts=2, initial_backoff_s=0.01))
        loop = ConsumerLoop(kafka_settings, config, handle, producer)
        async with running(loop):
            await eventually(lambda: loop.stats.handled == 3 and loop.stats.dead_lettered == 1)
    assert sorted(handled) == ["e0", "e2", "e3"]
    dead = await read_all(kafka_settings, dlq, idle_s=0.4)
    assert [record.key for record in dead] == [b"bad"]



async def test_concurrent_mode_keeps_fetching_past_a_slow_record_and_commits_up_to_it(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    """A record whose handler waits (an API call that hangs) holds back only its own key: records produced
    after it, fetched later, are handled meanwhile; the partition is committed only up to the slow record
    until it is done, so a crash then re-delivers it."""
    topic = await topics.create("concurrent-slow", partitions=1)
    base = example_envelopes()[0][1]
    gate = asyncio.Event()
    entered = asyncio.Event()
    handled: list[str] = []
    group_id = group()
    tp = TopicPartition(topic, 0)

    async def handle(envelope: Envelope, delivery: Delivery) -> None:
        if delivery.key == b"slow":
            entered.set()
            await gate.wait()
        handled.append(envelope.event_id)

    async with EnvelopeProducer(kafka_settings) as producer:
        await producer.send(topic, base.model_copy(update={"event_id": "slow"}), key="slow")
        await producer.flush()
        config = LoopSettings(Topics([topic]), settle=PerRecord(concurrency=4), group_id=group_id)
        loop = ConsumerLoop(kafka_settings, config, handle, producer)
        async with running(loop):
            await asyncio.wait_for(entered.wait(), 30)
            for n in range(5):  # produced once the slow record is in hand: a later fetch
                await producer.send(topic, base.model_copy(update={"event_id": f"e{n}"}), key=f"k{n}")
            await producer.flush()
            await eventually(lambda: len(handled) == 5, what="the later records handled past the slow one")
            assert "slow" not in handled
            await asyncio.sleep(0.5)  # a few fetch turns, each of which commits what it may
            assert (await committed(kafka_settings, group_id, tp) or 0) == 0
            gate.set()
            await eventually(lambda: len(handled) == 6)
        assert await committed(kafka_settings, group_id, tp) == 6
