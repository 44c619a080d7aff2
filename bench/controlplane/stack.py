"""What every benchmark runs on: a private broker, Muster's topics, the configuration and the nodes'
capacity published, the queue manager in this event loop, and the fake cluster answering it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from bench.controlplane.cluster import FakeCluster, RuntimeOf
from bench.controlplane.measure import Timeline
from bench.controlplane.workload import Fleet, QueueLayout
from schemas.envelope import Message, make_envelope
from schemas.intents import SubmitJob
from schemas.topics import CAPACITY_TOPIC, CONFIG_TOPIC, INTENTS_TOPIC
from services.core import SchedulerConfig
from services.queue_manager.main import build as build_queue_manager
from services.queue_manager.service import QueueManager
from services.runtime.broker import resolve_broker
from services.runtime.kafka import DeliveryFuture, EnvelopeProducer, KafkaSettings, ensure_registry_topics
from services.runtime.options import ServeOptions

log = logging.getLogger(__name__)

SUBMITTER = "bench_pipeline"  # an external pipeline producing onto the intents topic
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
#: The cycle period the queue manager runs with when nothing changes (its default).
PERIOD_S = 5.0


@dataclass
class Broker:
    """A private broker for one benchmark run, with Muster's topics."""

    settings: KafkaSettings
    started_s: float


@contextlib.asynccontextmanager
async def private_broker(bootstrap: str | None = None) -> AsyncIterator[Broker]:
    """Start an Apache Kafka broker in a temporary directory (or use ``bootstrap``) and create the topics."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="muster-bench-") as log_dir:
        broker = await asyncio.to_thread(resolve_broker, bootstrap, log_dir=log_dir)
        try:
            settings = KafkaSettings(bootstrap=broker.bootstrap, client_id="muster-bench", request_timeout_ms=30_000)
            await ensure_registry_topics(settings)
            yield Broker(settings, time.perf_counter() - started)
        finally:
            await asyncio.to_thread(broker.close)


async def publish(producer: EnvelopeProducer, topic: str, messages: Sequence[Message], producer_name: str) -> None:
    """Produce ``messages`` onto ``topic`` and wait for every acknowledgement."""
    futures = [await producer.send(topic, make_envelope(m, producer_name)) for m in messages]
    if futures:
        await asyncio.gather(*futures)


@dataclass
class Stack:
    """The queue manager and the fake cluster around it, and a producer of submissions."""

    settings: KafkaSettings
    manager: QueueManager
    cluster: FakeCluster
    submitter: EnvelopeProducer
    timeline: Timeline
    setup_s: dict[str, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.time

    async def submit(self, job: SubmitJob) -> DeliveryFuture:
        """Stamp and buffer one submission (its moment is recorded as it is handed to the producer)."""
        self.timeline.submitted[job.job_id] = job.submitted_at.timestamp()
        return await self.submitter.send(INTENTS_TOPIC, make_envelope(job, SUBMITTER, occurred_at=job.submitted_at))


@contextlib.asynccontextmanager
async def running_stack(broker: Broker, fleet: Fleet, layout: QueueLayout, runtime_of: RuntimeOf, *,
                        scheduler: SchedulerConfig | None = None) -> AsyncIterator[Stack]:
    """Publish configuration and capacity, start the fake cluster and the queue manager; stop them after."""
    settings = broker.settings
    timeline = Timeline()
    setup: dict[str, float] = {"broker": broker.started_s}
    async with contextlib.AsyncExitStack() as stack:
        submitter = await stack.enter_async_context(
            EnvelopeProducer(settings.with_identity(client_id="bench-pipeline"), linger_ms=2))
        started = time.perf_counter()
        await publish(submitter, CONFIG_TOPIC, layout.messages(), "gateway")
        await publish(submitter, CAPACITY_TOPIC, fleet.node_states(), "node_watcher")
        setup["config + capacity published"] = time.perf_counter() - started

        cluster = FakeCluster(settings, timeline, runtime_of, clock=time.time)
        await stack.enter_async_context(cluster.producer)
        stop_cluster = asyncio.Event()
        cluster_ready = asyncio.Event()
        cluster_task = asyncio.create_task(cluster.run(cluster_ready, stop_cluster), name="bench fake cluster")

        async def stop_fake_cluster() -> None:
            stop_cluster.set()
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await cluster_task

        stack.push_async_callback(stop_fake_cluster)
        await _started(cluster_task, cluster_ready.wait)

        started = time.perf_counter()
        options = ServeOptions(kafka=settings.with_identity(client_id="muster-queue-manager"), http_port=0)
        manager, runner = build_queue_manager(options, scheduler_config=scheduler or SchedulerConfig(),
                                              period_s=PERIOD_S)
        await stack.enter_async_context(manager.producer)

        qm_task = asyncio.create_task(runner.run(handle_signals=False), name="bench queue manager")

        async def stop_queue_manager() -> None:
            runner.stop()
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await qm_task

        stack.push_async_callback(stop_queue_manager)
        await _started(qm_task, manager.ready.wait)
        setup["queue manager recovered"] = time.perf_counter() - started
        yield Stack(settings, manager, cluster, submitter, timeline, setup)


async def _started(task: asyncio.Task[None], ready: Callable[[], Awaitable[object]]) -> None:
    """Wait for ``ready()`` unless ``task`` ends first (its error is raised)."""
    waiter = asyncio.ensure_future(ready())
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not waiter.done():
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
    if task.done():
        task.result()
        raise RuntimeError(f"{task.get_name()} stopped while starting")
