"""CompactedTable (read a compacted topic whole, then follow it) and the ServiceRunner shell."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from schemas.envelope import make_envelope
from schemas.status import JobStatusChanged
from schemas.topics import STATUS_TOPIC
from services.runtime.kafka import ConsumerLoop, EnvelopeProducer, KafkaSettings, LoopSettings, Topics
from services.runtime.kafka.table import CompactedTable
from services.runtime.service import ServiceRunner
from tests.builders.messages import example_messages
from tests.integration.builders import TopicFactory, eventually

pytestmark = pytest.mark.integration


def _status(job_id: str, state: str) -> JobStatusChanged:
    base = next(m for m in example_messages() if isinstance(m, JobStatusChanged))
    return base.model_copy(update={"job_id": job_id, "state": state})


async def test_table_reads_history_then_follows(kafka_settings: KafkaSettings, topics: TopicFactory) -> None:
    topic = await topics.create("status", partitions=3, config={"cleanup.policy": "compact"})
    async with EnvelopeProducer(kafka_settings) as producer:
        for i in range(20):
            await producer.send_and_wait(topic, make_envelope(_status(f"j-{i % 5}", "pending"), "t"))
        await producer.send_and_wait(topic, make_envelope(_status("j-0", "running"), "t"))
        await producer.send_raw(topic, key=b"j-1", value=None)  # tombstone: the job is forgotten
        await producer.flush()

        changes: list[tuple[str, str | None]] = []
        table = CompactedTable(kafka_settings, topic, on_change=lambda k, e: changes.append((k, e and e.type)))
        await table.start()
        stop = asyncio.Event()
        task = asyncio.create_task(table.run(stop))
        async with asyncio.timeout(20):
            await table.wait_caught_up()
        assert set(table) == {"j-0", "j-2", "j-3", "j-4"}
        assert table["j-0"].payload.state == "running"  # type: ignore[attr-defined]

        await producer.send_and_wait(topic, make_envelope(_status("j-9", "pending"), "t"))
        await eventually(lambda: "j-9" in table)
        stop.set()
        await task
    assert ("j-1", None) in changes and changes[-1][0] == "j-9"


async def test_empty_table_is_caught_up_at_once(kafka_settings: KafkaSettings, topics: TopicFactory) -> None:
    topic = await topics.create("empty", partitions=2, config={"cleanup.policy": "compact"})
    table = CompactedTable(kafka_settings, topic)
    await table.start()
    async with asyncio.timeout(5):
        await table.wait_caught_up()
    await table.close()
    assert len(table) == 0


async def test_missing_topic_is_a_clear_error(kafka_settings: KafkaSettings) -> None:
    table = CompactedTable(kafka_settings, "muster.does-not-exist.v1")
    with pytest.raises(RuntimeError, match="does not exist"):
        await table.start()


async def test_service_runner_serves_metrics_and_stops(kafka_settings: KafkaSettings, topics: TopicFactory) -> None:
    topic = await topics.create("in")
    seen: list[str] = []

    async def handler(envelope, delivery) -> None:  # type: ignore[no-untyped-def]
        seen.append(envelope.type)

    async with EnvelopeProducer(kafka_settings) as producer:
        loop = ConsumerLoop(kafka_settings, LoopSettings(Topics([topic]), group_id=topics.name("g")), handler, producer)
        ticks: list[int] = []

        async def ticker(stop: asyncio.Event) -> None:
            while not stop.is_set():
                ticks.append(1)
                await asyncio.sleep(0.05)

        runner = ServiceRunner("test-service", loops=[loop], tasks=[ticker])
        task = asyncio.create_task(runner.run(handle_signals=False))
        await eventually(lambda: runner.url is not None)
        await producer.send_and_wait(topic, make_envelope(_status("j-1", "pending"), "t"))
        await eventually(lambda: seen == ["JobStatusChanged"])
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{runner.url}/metrics") as resp:
                body = await resp.text()
            async with http.get(f"{runner.url}/healthz") as resp:
                assert (await resp.json())["status"] == "ok"
        assert 'muster_service_up{service="test-service"} 1.0' in body
        runner.stop()
        async with asyncio.timeout(15):
            await task
    assert ticks
    assert STATUS_TOPIC  # the registry names the real status topic this table type is built for
