"""The Kafka kit against the real broker: topics, envelope producer, consumer loop, dead letters."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from dataclasses import dataclass

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.structs import TopicPartition

from schemas.codec import encode
from schemas.envelope import Envelope
from schemas.topics import STATUS_TOPIC, TOPICS, dlq_topic
from services.runtime.kafka import (
    Batched,
    ConsumerLoop,
    Delivery,
    EnvelopeProducer,
    KafkaSettings,
    LoopSettings,
    Outgoing,
    OutputOrder,
    RetryPolicy,
    Topics,
    ensure_registry_topics,
)
from services.runtime.kafka.headers import TYPE_HEADER, VERSION_HEADER, header_value
from tests.builders.messages import example_envelopes
from tests.integration.builders import (
    Record,
    Seen,
    TopicFactory,
    collector,
    committed,
    eventually,
    group,
    input_with_dead_letters,
    produce,
    read_all,
    running,
)

pytestmark = pytest.mark.integration

#: how long the loop goes on polling with the service's turn held before the test looks: nothing signals
#: "no commit", so its absence is shown over this bounded time, several of the loop's polls
TURN_HELD_S = 0.5


@dataclass
class Pipe:
    """A source and a sink topic of the test's own, and ``forward``: a handler emitting each input onto the sink."""

    settings: KafkaSettings
    source: str
    sink: str

    async def forward(self, envelope: Envelope, delivery: Delivery) -> None:
        await delivery.emit(self.sink, envelope)

    async def feed(self, producer: EnvelopeProducer, envelopes: list[Envelope]) -> None:
        """Put ``envelopes`` on the source topic, in order, and wait until the broker has them all."""
        for envelope in envelopes:
            await producer.send(self.source, envelope)
        await producer.flush()

    async def forwarded(self) -> list[bytes | None]:
        """The values on the sink topic, in order."""
        return [record.value for record in await read_all(self.settings, self.sink, idle_s=0.4)]


@pytest.fixture
async def pipe(kafka_settings: KafkaSettings, topics: TopicFactory) -> Pipe:
    return Pipe(kafka_settings, await topics.create("source"), await topics.create("sink"))

async def test_registry_topics_are_created_once_with_their_settings(kafka_settings: KafkaSettings) -> None:
    await ensure_registry_topics(kafka_settings)
    assert await ensure_registry_topics(kafka_settings) == []
    admin = AIOKafkaAdminClient(**kafka_settings.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        assert {name for name in TOPICS} | {dlq_topic(name) for name in TOPICS} <= existing
        described = await admin.describe_topics([STATUS_TOPIC])
        assert len(described[0]["partitions"]) == TOPICS[STATUS_TOPIC].partitions
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, STATUS_TOPIC)])
        entries = {entry[0]: entry[1] for response in responses for res in response.resources for entry in res[4]}
        assert entries["cleanup.policy"] == TOPICS[STATUS_TOPIC].cleanup_policy
    finally:
        await admin.close()


async def test_every_message_type_round_trips_through_its_topic(kafka_settings: KafkaSettings) -> None:
    await ensure_registry_topics(kafka_settings)
    examples = example_envelopes()
    seen: Seen = []
    async with EnvelopeProducer(kafka_settings) as producer:
        every_topic = LoopSettings(Topics(sorted(TOPICS)), group_id=group())
        loop = ConsumerLoop(kafka_settings, every_topic, collector(seen), producer)
        async with running(loop):
            for topic, envelope in examples:
                await producer.send(topic, envelope)
            await producer.flush()
            wanted = {envelope.event_id for _, envelope in examples}
            await eventually(lambda: wanted <= {envelope.event_id for envelope, _ in seen})
    received = {envelope.event_id: (envelope, delivery) for envelope, delivery in seen}
    for topic, envelope in examples:
        got, delivery = received[envelope.event_id]
        assert got == envelope
        assert type(got.payload) is type(envelope.payload)
        assert delivery.topic == topic
        assert delivery.key == envelope.key().encode()
    assert loop.stats.dead_lettered == 0


async def test_envelope_records_carry_type_and_version_headers(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create("headers")
    _, envelope = example_envelopes()[0]
    async with EnvelopeProducer(kafka_settings) as producer:
        await producer.send_and_wait(topic, envelope)
    (record,) = await read_all(kafka_settings, topic, idle_s=0.4)
    assert record.key == envelope.key().encode()
    assert header_value(record.headers, TYPE_HEADER) == envelope.type
    assert header_value(record.headers, VERSION_HEADER) == str(envelope.schema_version)
    assert record.value == encode(envelope)


async def test_undecodable_messages_go_to_the_dlq_and_the_consumer_continues(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic, dlq, valid = await input_with_dead_letters(topics, "input")
    invalid = orjson.loads(encode(valid))
    invalid["payload"]["job_id"] = "Not A Valid Id!"
    await produce(
        kafka_settings,
        topic,
        [(b"bad", b"{not json"), (b"bad", orjson.dumps(invalid)), (valid.key().encode(), encode(valid))],
    )
    seen: Seen = []
    group_id = group()
    async with EnvelopeProducer(kafka_settings) as producer:
        loop = ConsumerLoop(kafka_settings, LoopSettings(Topics([topic]), group_id=group_id), collector(seen), producer)
        async with running(loop):
            await eventually(lambda: len(seen) == 1)
    assert seen[0][0] == valid and seen[0][1].offset == 2
    dead = await read_all(kafka_settings, dlq, idle_s=0.4)
    assert [header_value(r.headers, "muster-dlq-reason") for r in dead] == ["malformed", "invalid_payload"]
    assert [r.value for r in dead] == [b"{not json", orjson.dumps(invalid)]
    assert "job_id" in (header_value(dead[1].headers, "muster-dlq-detail") or "")
    for offset, record in enumerate(dead):
        assert header_value(record.headers, "muster-dlq-topic") == topic
        assert header_value(record.headers, "muster-dlq-partition") == "0"
        assert header_value(record.headers, "muster-dlq-offset") == str(offset)
    assert await committed(kafka_settings, group_id, TopicPartition(topic, 0)) == 3


async def test_records_skip_passes_over_are_committed_without_decoding(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic, dlq, valid = await input_with_dead_letters(topics, "skipping")
    # the skipped one would be dead-lettered if it were decoded
    await produce(kafka_settings, topic, [(b"other", b"{not json"), (valid.key().encode(), encode(valid))])
    seen: Seen = []
    looked_at: list[tuple[str, bytes | None]] = []
    group_id = group()

    def skip(record_topic: str, key: bytes | None, value: bytes | None) -> bool:
        looked_at.append((record_topic, key))
        return key == b"other"

    async with EnvelopeProducer(kafka_settings) as producer:
        loop = ConsumerLoop(kafka_settings, LoopSettings(Topics([topic]), settle=Batched(), group_id=group_id),
                            collector(seen), producer, skip=skip)
        async with running(loop):
            await eventually(lambda: len(seen) == 1)
    assert seen[0][0] == valid and looked_at == [(topic, b"other"), (topic, valid.key().encode())]
    assert loop.stats.passed_over == 1 and loop.stats.handled == 1 and loop.stats.dead_lettered == 0
    assert await read_all(kafka_settings, dlq, idle_s=0.4) == []
    assert await committed(kafka_settings, group_id, TopicPartition(topic, 0)) == 2


async def test_failing_handler_is_retried_then_dead_lettered(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create("retry")
    dlq = await topics.create(name=dlq_topic(topic))
    envelopes = [envelope for _, envelope in example_envelopes()[:3]]
    poison, flaky, fine = (envelope.event_id for envelope in envelopes)
    calls: dict[str, int] = {}
    done: list[str] = []

    async def handle(envelope: Envelope, delivery: Delivery) -> None:
        calls[envelope.event_id] = calls.get(envelope.event_id, 0) + 1
        assert delivery.attempt == calls[envelope.event_id]
        if envelope.event_id == poison or (envelope.event_id == flaky and delivery.attempt == 1):
            raise RuntimeError(f"cannot handle {envelope.type}")
        done.append(envelope.event_id)

    async with EnvelopeProducer(kafka_settings) as producer:
        for envelope in envelopes:
            await producer.send_and_wait(topic, envelope)
        retry = RetryPolicy(attempts=3, initial_backoff_s=0.01)
        config = LoopSettings(Topics([topic]), group_id=group(), retry=retry)
        loop = ConsumerLoop(kafka_settings, config, handle, producer)
        async with running(loop):
            await eventually(lambda: fine in done)
    assert calls == {poison: 3, flaky: 2, fine: 1}
    assert done == [flaky, fine]
    (dead,) = await read_all(kafka_settings, dlq, idle_s=0.4)
    assert header_value(dead.headers, "muster-dlq-reason") == "handler_error"
    assert header_value(dead.headers, "muster-dlq-attempts") == "3"
    assert "RuntimeError: cannot handle" in (header_value(dead.headers, "muster-dlq-detail") or "")
    assert loop.stats.retries == 3 and loop.stats.dead_lettered == 1 and loop.stats.handled == 2


async def test_emitted_messages_are_acknowledged_before_the_input_is_committed(
    kafka_settings: KafkaSettings, pipe: Pipe
) -> None:
    examples = [envelope for _, envelope in example_envelopes()[:5]]
    group_id = group()
    async with EnvelopeProducer(kafka_settings) as producer:
        await pipe.feed(producer, examples)
        config = LoopSettings(Topics([pipe.source]), group_id=group_id)
        loop = ConsumerLoop(kafka_settings, config, pipe.forward, producer)
        async with running(loop):
            await eventually(lambda: loop.stats.handled == len(examples))
    assert await committed(kafka_settings, group_id, TopicPartition(pipe.source, 0)) == len(examples)
    assert await pipe.forwarded() == [encode(envelope) for envelope in examples]


async def test_sigterm_stops_the_loop_gracefully_and_commits(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create("sigterm")
    seen: Seen = []
    group_id = group()
    async with EnvelopeProducer(kafka_settings) as producer:
        _, envelope = example_envelopes()[0]
        await producer.send_and_wait(topic, envelope)
        loop = ConsumerLoop(kafka_settings, LoopSettings(Topics([topic]), group_id=group_id), collector(seen), producer)
        task = asyncio.create_task(loop.run(handle_signals=True))
        await eventually(lambda: len(seen) == 1)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, 30)
    assert await committed(kafka_settings, group_id, TopicPartition(topic, 0)) == 1


async def test_two_loops_share_partitions_and_hand_over_on_leave(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create("members", partitions=4)
    group_id = group()
    seen: Seen = []
    examples = [envelope for _, envelope in example_envelopes()]
    async with EnvelopeProducer(kafka_settings) as producer:
        member = LoopSettings(Topics([topic]), group_id=group_id)
        first = ConsumerLoop(kafka_settings, member, collector(seen), producer)
        second = ConsumerLoop(kafka_settings, member, collector(seen), producer)
        async with running(first):
            async with running(second):
                await eventually(lambda: len(first.assignment) == 2 and len(second.assignment) == 2)
                for index, envelope in enumerate(examples):
                    await producer.send_and_wait(topic, envelope, key=f"k{index}")
                await eventually(lambda: len({e.event_id for e, _ in seen}) == len(examples))
            await eventually(lambda: len(first.assignment) == 4)
            late = examples[0].model_copy(update={"event_id": "late-" + uuid.uuid4().hex})
            for index in range(4):
                await producer.send_and_wait(topic, late, key=f"late{index}")
            await eventually(lambda: sum(e.event_id == late.event_id for e, _ in seen) == 4)
    assert {e.event_id for e, _ in seen} == {e.event_id for e in examples} | {late.event_id}


async def test_tombstones_reach_the_tombstone_handler_or_the_dlq(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    topic = await topics.create("tombstones", config={"cleanup.policy": "compact"})
    dlq = await topics.create(name=dlq_topic(topic))
    await produce(kafka_settings, topic, [(b"job-1", None)])
    deleted: list[bytes | None] = []

    async def on_tombstone(key: bytes | None, delivery: Delivery) -> None:
        deleted.append(key)

    async with EnvelopeProducer(kafka_settings) as producer:
        with_handler = ConsumerLoop(
            kafka_settings, LoopSettings(Topics([topic]), group_id=group()), collector([]), producer,
            on_tombstone=on_tombstone,
        )
        async with running(with_handler):
            await eventually(lambda: deleted == [b"job-1"])
        without = ConsumerLoop(kafka_settings, LoopSettings(Topics([topic]), group_id=group()), collector([]), producer)
        async with running(without):
            await eventually(lambda: without.stats.dead_lettered == 1)
    (dead,) = await read_all(kafka_settings, dlq, idle_s=0.4)
    assert header_value(dead.headers, "muster-dlq-reason") == "malformed"


async def test_batch_settle_forwards_everything_and_commits_after_the_outputs(
    kafka_settings: KafkaSettings, pipe: Pipe
) -> None:
    examples = [envelope for _, envelope in example_envelopes()[:20]]
    group_id = group()
    async with EnvelopeProducer(kafka_settings) as producer:
        await pipe.feed(producer, examples)
        config = LoopSettings(Topics([pipe.source]), settle=Batched(), group_id=group_id)
        loop = ConsumerLoop(kafka_settings, config, pipe.forward, producer)
        async with running(loop):
            await eventually(lambda: loop.stats.handled == len(examples) and loop.stats.commits > 0)
    assert await committed(kafka_settings, group_id, TopicPartition(pipe.source, 0)) == len(examples)
    assert await pipe.forwarded() == [encode(envelope) for envelope in examples]


async def test_batch_settle_never_commits_a_batch_whose_outputs_failed(
    kafka_settings: KafkaSettings, pipe: Pipe
) -> None:
    examples = [envelope for _, envelope in example_envelopes()[:3]]
    group_id = group()

    async def emit_to_nowhere(envelope: Envelope, delivery: Delivery) -> None:
        failed: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        failed.set_exception(RuntimeError("broker refused the output"))
        delivery._pending.append(failed)  # type: ignore[arg-type]  # an output the broker did not take

    async with EnvelopeProducer(kafka_settings) as producer:
        await pipe.feed(producer, examples)
        loop = ConsumerLoop(kafka_settings, LoopSettings(Topics([pipe.source]), settle=Batched(), group_id=group_id),
                            emit_to_nowhere, producer)
        with pytest.raises(RuntimeError, match="broker refused"):
            await asyncio.wait_for(loop.run(), 30)
    assert await committed(kafka_settings, group_id, TopicPartition(pipe.source, 0)) in (None, 0)


async def test_send_many_lands_where_send_would_and_keeps_the_order_per_partition(
    kafka_settings: KafkaSettings, topics: TopicFactory
) -> None:
    """More envelopes than fit in one record batch, spread over several partitions by their keys."""
    one_by_one = await topics.create("one-by-one", partitions=6)
    batched = await topics.create("batched", partitions=6)
    examples = [envelope for _, envelope in example_envelopes()]
    keys = [f"job-{i % 97}" for i in range(4_000)]
    items = [(keys[i], examples[i % len(examples)]) for i in range(len(keys))]
    async with EnvelopeProducer(kafka_settings) as producer:
        await asyncio.gather(*[await producer.send(one_by_one, envelope, key=key) for key, envelope in items])
        futures = await producer.send_many(Outgoing(batched, envelope, key) for key, envelope in items)
        await asyncio.gather(*futures)
    assert len(futures) < len(items) / 10  # record batches, not one future per record

    def by_partition(records: list[Record]) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
        out: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        for record in records:
            out.setdefault(record.partition, []).append((record.key, record.value))
        return out

    expected = by_partition(await read_all(kafka_settings, one_by_one, idle_s=0.4))
    assert len(expected) > 1
    assert by_partition(await read_all(kafka_settings, batched, idle_s=0.4)) == expected


async def test_batch_settle_produces_deferred_outputs_before_what_the_service_sends_itself(
    kafka_settings: KafkaSettings, pipe: Pipe
) -> None:
    """A service producing outside the loop (a cycle) mid-batch catches up first, during its turn of the
    output order: on the topic, the outputs of the inputs handled before it come first, those handled
    after it follow."""
    examples = [envelope for _, envelope in example_envelopes()[:6]]
    marker = examples[-1]
    group_id = group()
    order = OutputOrder()

    async with EnvelopeProducer(kafka_settings) as producer:

        async def forward(envelope: Envelope, delivery: Delivery) -> None:
            if envelope.event_id == examples[2].event_id:  # the service's own output, between two inputs
                async with order.turn():
                    await order.catch_up()
                    await producer.send(pipe.sink, marker)
            await pipe.forward(envelope, delivery)

        await pipe.feed(producer, examples[:5])
        config = LoopSettings(Topics([pipe.source]), settle=Batched(order=order), group_id=group_id)
        loop = ConsumerLoop(kafka_settings, config, forward, producer)
        async with running(loop):
            await eventually(lambda: loop.stats.handled == 5 and loop.stats.commits > 0)
    expected = [*examples[:2], marker, *examples[2:5]]
    assert await pipe.forwarded() == [encode(envelope) for envelope in expected]


async def test_batch_settle_keeps_handling_while_the_service_has_its_turn_at_the_producer(
    kafka_settings: KafkaSettings, pipe: Pipe
) -> None:
    """Inputs go on being handled while the service produces (has its turn of the output order); their
    outputs and commits wait for the turn, and nothing is committed ahead of its outputs."""
    examples = [envelope for _, envelope in example_envelopes()[:8]]
    group_id = group()
    order = OutputOrder()
    async with EnvelopeProducer(kafka_settings) as producer:
        config = LoopSettings(Topics([pipe.source]), settle=Batched(order=order), group_id=group_id)
        loop = ConsumerLoop(kafka_settings, config, pipe.forward, producer)
        async with running(loop):
            async with order.turn():
                await pipe.feed(producer, examples)
                await eventually(lambda: loop.stats.handled == len(examples))
                await asyncio.sleep(TURN_HELD_S)
                assert loop.stats.commits == 0
                assert await read_all(kafka_settings, pipe.sink, idle_s=0.2) == []
            await eventually(lambda: loop.stats.commits > 0)
    assert await committed(kafka_settings, group_id, TopicPartition(pipe.source, 0)) == len(examples)
    assert await pipe.forwarded() == [encode(envelope) for envelope in examples]
