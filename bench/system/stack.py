"""What every benchmark runs on: a private broker, Muster's topics, the configuration and the nodes'
capacity published, the queue manager (one child process per shard), and the fake cluster answering it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench.system.cluster import FakeCluster, RuntimeOf
from bench.system.machine import process_cpu_seconds
from bench.system.measure import Timeline
from bench.system.workload import Fleet
from schemas.envelope import Message, make_envelope
from schemas.intents import SubmitJob
from schemas.topics import CAPACITY_TOPIC, CONFIG_TOPIC, INTENTS_TOPIC
from services.core import SchedulerConfig
from services.queue_manager.main import QueueManagerMain
from services.queue_manager.service import QueueManager
from services.runtime.broker import KafkaBroker, KafkaCluster, ResolvedBroker, resolve_broker
from services.runtime.collector import configure_collector
from services.runtime.kafka import (
    DeliveryFuture,
    EnvelopeProducer,
    KafkaSettings,
    Replication,
    cluster_size,
    ensure_registry_topics,
    topic_replication,
)
from services.runtime.options import ServeOptions

log = logging.getLogger(__name__)

SUBMITTER = "bench_pipeline"  # an external pipeline producing onto the intents topic
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
#: The cycle period the queue manager runs with when nothing changes (its default).
PERIOD_S = 5.0
#: set by ``muster bench --profile FILE``: each queue-manager process writes its own profile to FILE.<pid>
QM_PROFILE_ENV = "MUSTER_BENCH_QUEUE_MANAGER_PROFILE"


class Layout(Protocol):
    """Queues, cohorts, priority classes and tenants, as the gateway would publish them
    (``workload.QueueLayout``, or a peer's scenario translated)."""

    def messages(self) -> list[Message]: ...


@dataclass
class Broker:
    """A private broker (or cluster of brokers) for one benchmark run, with Muster's topics."""

    settings: KafkaSettings
    started_s: float
    brokers: int = 1
    replication: Replication | None = None  # the topics' (None when it could not be read)
    pids: tuple[int, ...] = ()  # the broker JVMs this run started (none for an external broker)

    def cpu_seconds(self) -> float | None:
        """CPU time the broker JVMs have used so far (None when unknown: an external broker)."""
        used = [process_cpu_seconds(pid) for pid in self.pids]
        return None if not used or None in used else sum(u for u in used if u is not None)


@contextlib.asynccontextmanager
async def private_broker(bootstrap: str | None = None, *, brokers: int = 1) -> AsyncIterator[Broker]:
    """Start Apache Kafka (``brokers`` of them) in a temporary directory, or use ``bootstrap``, and create
    the topics (replication from the cluster's size: factor 3 and min.insync.replicas 2 from 3 brokers)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="muster-bench-") as log_dir:
        broker = await asyncio.to_thread(resolve_broker, bootstrap, log_dir=log_dir, brokers=brokers)
        try:
            settings = KafkaSettings(bootstrap=broker.bootstrap, client_id="muster-bench", request_timeout_ms=30_000)
            await ensure_registry_topics(settings)
            size = await cluster_size(settings)
            replication = (await topic_replication(settings, [INTENTS_TOPIC])).get(INTENTS_TOPIC)
            yield Broker(settings, time.perf_counter() - started, size, replication, _pids(broker))
        finally:
            await asyncio.to_thread(broker.close)


def _pids(broker: ResolvedBroker) -> tuple[int, ...]:
    nodes = broker.nodes if isinstance(broker, KafkaCluster) else (broker,) if isinstance(broker, KafkaBroker) else ()
    return tuple(node.pid for node in nodes if node.pid is not None)


async def publish(producer: EnvelopeProducer, topic: str, messages: Sequence[Message], producer_name: str) -> None:
    """Produce ``messages`` onto ``topic`` and wait for every acknowledgement."""
    futures = [await producer.send(topic, make_envelope(m, producer_name)) for m in messages]
    if futures:
        await asyncio.gather(*futures)


@dataclass
class Stack:
    """The queue manager and the fake cluster around it, and a producer of submissions."""

    settings: KafkaSettings
    managers: list[QueueManagerProcess]
    cluster: FakeCluster
    submitter: EnvelopeProducer
    timeline: Timeline
    setup_s: dict[str, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.time

    @property
    def manager(self) -> QueueManagerProcess:
        return self.managers[0]

    def cpu_seconds(self) -> list[float | None]:
        """CPU time each queue-manager process has used so far (see ``machine.spent``)."""
        return [m.cpu_seconds() for m in self.managers]

    async def submit(self, job: SubmitJob) -> DeliveryFuture:
        """Stamp and buffer one submission (its moment is recorded as it is handed to the producer)."""
        self.timeline.submitted[job.job_id] = job.submitted_at.timestamp()
        return await self.submitter.send(INTENTS_TOPIC, make_envelope(job, SUBMITTER, occurred_at=job.submitted_at))


@contextlib.asynccontextmanager
async def running_stack(broker: Broker, fleet: Fleet, layout: Layout, runtime_of: RuntimeOf, *,
                        scheduler: SchedulerConfig | None = None, debounce_s: float | None = None,
                        shards: Sequence[tuple[str, ...]] = ((),)) -> AsyncIterator[Stack]:
    """Publish configuration and capacity, start the fake cluster and the queue manager (one process per
    entry of ``shards``: the pools it owns, none for every pool); stop them after."""
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
        await wait_started(cluster_task, cluster_ready.wait)

        started = time.perf_counter()
        managers = [QueueManagerProcess(settings, scheduler or SchedulerConfig(), debounce_s=debounce_s, pools=pools)
                    for pools in shards]
        for manager in managers:
            stack.push_async_callback(manager.stop)
        await asyncio.gather(*(m.start() for m in managers))
        setup["queue manager recovered"] = time.perf_counter() - started
        yield Stack(settings, managers, cluster, submitter, timeline, setup)


class ChildProcess:
    """A service run in a child process, as in a deployment: the load generator and the fake cluster of this
    process do not share its CPU. ``target(*args, ready)`` serves until SIGTERM (the service's own shutdown)
    and sets ``ready`` once the service can take work; ``start`` returns then."""

    def __init__(self, name: str, target: Callable[..., None], args: tuple[Any, ...]) -> None:
        context = multiprocessing.get_context("spawn")
        self.name = name
        self._ready = context.Event()
        self._process = context.Process(target=target, name=f"bench-{name.replace(' ', '-')}", daemon=True,
                                        args=(*args, self._ready))

    async def start(self) -> None:
        self._process.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._ready.is_set():
            if not self._process.is_alive():
                raise RuntimeError(f"the {self.name} exited while starting (exit code {self._process.exitcode})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {self.name} was not ready within {START_TIMEOUT_S:g} s")
            await asyncio.sleep(0.05)

    def cpu_seconds(self) -> float | None:
        """CPU time the process has used so far (None before it started, or off Linux)."""
        pid = self._process.pid
        return None if pid is None else process_cpu_seconds(pid)

    async def stop(self) -> None:
        if self._process.pid is None:
            return
        self._process.terminate()
        await asyncio.to_thread(self._process.join, STOP_TIMEOUT_S)
        if self._process.is_alive():
            log.warning("the %s did not stop within %g s; killing it", self.name, STOP_TIMEOUT_S)
            self._process.kill()
            await asyncio.to_thread(self._process.join)


class QueueManagerProcess(ChildProcess):
    """``QueueManagerMain`` in a child process, ready once it recovered."""

    def __init__(self, settings: KafkaSettings, scheduler: SchedulerConfig, *, debounce_s: float | None,
                 pools: tuple[str, ...] = ()) -> None:
        self.debounce_s = QueueManager.DEFAULT_DEBOUNCE_S if debounce_s is None else debounce_s
        super().__init__("queue manager", _queue_manager_main,
                         (settings.with_identity(client_id="muster-queue-manager"), scheduler, self.debounce_s, pools))


def child_logging(name: str) -> None:
    """A child process's logging, as ``muster bench`` sets its own: warnings, and none of aiokafka's retried
    errors (a fresh broker's coordinator elections)."""
    logging.basicConfig(level=logging.WARNING, format=f"{name} %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    configure_collector()  # as `muster serve` does


def _queue_manager_main(settings: KafkaSettings, scheduler: SchedulerConfig, debounce_s: float,
                        pools: tuple[str, ...], ready: Any) -> None:
    """The child process: serve the queue manager until SIGTERM, signalling ``ready`` once it recovered."""
    child_logging("queue-manager")

    profile_path = os.environ.get(QM_PROFILE_ENV)

    async def serve() -> None:
        main = QueueManagerMain(ServeOptions(kafka=settings, http_port=0, pools=pools), scheduler_config=scheduler,
                                period_s=PERIOD_S, freeze_recovered_heap=True)
        main.manager.debounce_s = debounce_s
        await serve_in_child(main.run(handle_signals=True), "queue manager", main.manager.ready.wait, ready)

    if not profile_path:
        asyncio.run(serve())
        return
    import cProfile

    with cProfile.Profile() as profiler:
        asyncio.run(serve())
    profiler.dump_stats(f"{profile_path}.{os.getpid()}")


async def serve_in_child(run: Coroutine[Any, Any, None], name: str, is_ready: Callable[[], Awaitable[object]],
                         ready: Any) -> None:
    """A ``ChildProcess`` target's service: ``run`` it, set ``ready`` once ``is_ready()`` returns (its error
    raised if it stops first), then serve until it stops."""
    task = asyncio.create_task(run, name=name)
    await wait_started(task, is_ready)
    ready.set()
    await task


async def wait_started(task: asyncio.Task[None], ready: Callable[[], Awaitable[object]]) -> None:
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
