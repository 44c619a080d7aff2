"""The consumer-lag gauge and the loop counters a ServiceRunner exposes for its consumer loops."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from schemas.envelope import Envelope, make_envelope
from schemas.status import JobStatusChanged
from services.runtime.kafka import ConsumerLoop, Delivery, EnvelopeProducer, KafkaSettings, LoopSettings, Topics
from services.runtime.service import ServiceRunner
from tests.builders.messages import example_messages
from tests.integration.builders import TopicFactory, eventually

pytestmark = pytest.mark.integration


def _status(job_id: str) -> JobStatusChanged:
    base = next(m for m in example_messages() if isinstance(m, JobStatusChanged))
    return base.model_copy(update={"job_id": job_id})


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_lag_follows_a_stalled_handler_and_drops_to_zero(kafka_settings: KafkaSettings,
                                                               topics: TopicFactory) -> None:
    topic = await topics.create("lagging", partitions=2)
    gate = asyncio.Event()

    async def slow(_: Envelope, __: Delivery) -> None:
        await gate.wait()

    registry = CollectorRegistry()
    async with EnvelopeProducer(kafka_settings) as producer:
        for i in range(10):
            await producer.send_and_wait(topic, make_envelope(_status(f"j-{i}"), "t"))
        loop = ConsumerLoop(kafka_settings, LoopSettings(Topics([topic]), group_id=f"{topic}-group"), slow, producer)

        async def run_loop(stop: asyncio.Event) -> None:
            await loop.run()  # started from a task of the runner: the lag gauge finds it

        runner = ServiceRunner("probe", tasks=[run_loop], registry=registry, http_port=None, lag_interval_s=0.1)
        running = asyncio.create_task(runner.run(handle_signals=False))

        def lag() -> float:
            return sum(_sample(registry, "muster_kafka_consumer_lag", service="probe", group=loop.group_id,
                               topic=topic, partition=str(p)) or 0.0 for p in (0, 1))

        await eventually(lambda: lag() == 10)  # the first record is in hand, none handled
        for i in range(5):
            await producer.send_and_wait(topic, make_envelope(_status(f"k-{i}"), "t"))
        await eventually(lambda: lag() == 15)  # the stalled consumer's lag grows with the topic
        gate.set()
        await eventually(lambda: lag() == 0)
        assert _sample(registry, "muster_kafka_records_handled_total", service="probe", group=loop.group_id) == 15
        assert _sample(registry, "muster_kafka_dead_letters_total", service="probe", group=loop.group_id) == 0
        runner.stop()
        loop.stop()
        await running
