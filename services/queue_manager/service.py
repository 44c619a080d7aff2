"""The queue manager's I/O shell: recovery from compacted topics, the input handler, the cycle task.

Start-up order: follow ``muster.config``, ``muster.capacity`` and ``muster.usage`` until caught up;
read ``muster.jobs`` (and ``muster.status``) whole and rebuild the state; publish the decisions the
records cannot prove were delivered; only then consume intents and run events from the group's
committed offsets and start scheduling. Any produce failure stops the service, which then recovers
from the records on its next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry

from schemas.envelope import Envelope, Message, caused_by, make_envelope
from schemas.jobs import JobRecorded
from schemas.status import JobStatusChanged
from schemas.topics import (
    CAPACITY_TOPIC,
    CONFIG_TOPIC,
    DISPATCHES_TOPIC,
    INTENTS_TOPIC,
    INTENTS_TOPIC_PATTERN,
    JOBS_TOPIC,
    RUNS_TOPIC,
    STATUS_TOPIC,
    USAGE_TOPIC,
)
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.metrics import QueueMetrics
from services.queue_manager.pools import Shard
from services.queue_manager.provenance import (
    PLAIN_SECRET_ENV,
    TENANT_NOT_PROVEN,
    TagWatch,
    ignored,
    plain_secret_refusal,
    unproven,
)
from services.queue_manager.queue_state import Out, QueueState
from services.queue_manager.recovery import rebuild, seed_statuses
from services.queue_manager.reporting import ReportPacer
from services.queue_manager.routing import passes_over
from services.runtime.kafka import (
    Batched,
    BatchFuture,
    ConsumerLoop,
    Delivery,
    EnvelopeProducer,
    KafkaSettings,
    LoopSettings,
    Outgoing,
    OutputOrder,
    Pattern,
    Refused,
)
from services.runtime.kafka.table import CompactedTable
from services.runtime.service import BackgroundTask

log = logging.getLogger(__name__)

PRODUCER = "queue_manager"
GROUP_ID = "muster-queue-manager"
INPUT_TOPICS = (INTENTS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)
#: the inputs as one subscription: the shared intents topic, every tenant's (``muster.intents.<t>.v1``, as
#: tenants are added), runs and dispatches
INPUT_PATTERN = "^(" + "|".join([INTENTS_TOPIC_PATTERN.strip("^$"),
                                 *(t.replace(".", r"\.") for t in INPUT_TOPICS[1:])]) + ")$"


def group_id(shard: Shard) -> str:
    """The consumer group of an instance: every shard reads every input (and ignores other pools' jobs)."""
    return GROUP_ID if shard.pools is None else f"{GROUP_ID}.{'.'.join(sorted(shard.pools))}"


async def read_whole(settings: KafkaSettings, topic: str, *, timeout_s: float = 120.0) -> CompactedTable:
    """A compacted topic read to its end as of now, then closed."""
    table = CompactedTable(settings, topic)
    await table.start()
    stop = asyncio.Event()
    follower = asyncio.create_task(table.run(stop), name=f"read:{topic}")
    waiter = asyncio.create_task(table.wait_caught_up(), name=f"caught-up:{topic}")
    try:
        done, _ = await asyncio.wait({follower, waiter}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if follower in done:
            follower.result()
            raise RuntimeError(f"{topic}: reader stopped before catching up")
        if waiter not in done:
            raise TimeoutError(f"{topic}: not caught up within {timeout_s:g}s")
    finally:
        stop.set()
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        await follower
    return table


class QueueManager:
    """Owns the queue state: every change to it is serialised by the state lock, and every message it
    produces by the output lock (a cycle holds both while it decides, then the output lock alone while
    its records are acknowledged)."""

    #: short: a burst of submissions is still seen whole, and under steady input cycles follow each other
    DEFAULT_DEBOUNCE_S = 0.05
    #: Waiting jobs' positions and estimated starts are recomputed at most this often (and, when that
    #: takes long, at most a tenth of the time: see ``reporting``). With a large backlog they are most
    #: of a cycle's cost (the status book publishes a waiting job's new position at most every 5 s
    #: anyway); cycles in between only decide. The decisions are the same.
    DEFAULT_REPORT_INTERVAL_S = 1.0

    def __init__(
        self,
        settings: KafkaSettings,
        *,
        registry: CollectorRegistry | None = None,
        scheduler_config: SchedulerConfig | None = None,
        debounce_s: float = DEFAULT_DEBOUNCE_S,
        period_s: float = 5.0,
        report_interval_s: float = DEFAULT_REPORT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
        shard: Shard | None = None,
    ) -> None:
        self.settings = settings
        self.shard = shard or Shard()
        self.state = QueueState.for_shard(self.shard, scheduler_config or SchedulerConfig())
        self.metrics = QueueMetrics(registry or CollectorRegistry(), lambda: self.state)
        self.scheduler_config = scheduler_config or SchedulerConfig()
        self.debounce_s = debounce_s
        self.period_s = period_s
        self.reports = ReportPacer(report_interval_s)
        self.clock = clock
        # No linger: each consumed input waits for its outputs' acknowledgements before the next one is
        # handled, so a 5 ms linger would cap the intake at ~150 inputs/s (measured by `muster bench`).
        self.producer = EnvelopeProducer(settings, linger_ms=0)
        self.ready = asyncio.Event()
        self.cycles = 0
        self._lock = asyncio.Lock()  # the state: folding inputs, deciding
        # job id -> (correlation id, event id of its JobRecorded): what a cycle's decision about the job is
        # chained to, so the job's messages (and its trace) stay one chain from submission to its runs
        self._chains: dict[str, tuple[str, str]] = {}
        #: producing: a cycle's turn lasts until its decisions are handed to the producer; the input loop
        #: takes turns to hand over its batches' outputs, so messages keep the order of the changes
        self._order = OutputOrder()
        self._changed = asyncio.Event()
        self._changed_at = 0.0  # time.monotonic() of the first change since the last cycle began
        self._acks: asyncio.Future[list[object]] | None = None  # the last cycle's decisions, until acknowledged
        self._tags = TagWatch()  # tenants whose job id tags are the same (see ``provenance``)
        self._followers = [
            CompactedTable(settings, CONFIG_TOPIC, on_change=self._on_config),
            CompactedTable(settings, CAPACITY_TOPIC, on_change=self._on_capacity),
            CompactedTable(settings, USAGE_TOPIC, on_change=self._on_usage),
        ]

    # ------------------------------------------------------------ compacted inputs (followed)

    def _on_config(self, key: str, envelope: Envelope | None) -> None:
        if self.state.fold_config(key, envelope.payload if envelope else None, self.clock()):
            self._mark_changed()
        for problem in self._tags.note(self.state.config, envelope.payload if envelope else None):
            log.error("%s", problem)

    def _on_capacity(self, key: str, envelope: Envelope | None) -> None:
        if self.state.fold_capacity(key, envelope.payload if envelope else None, self.clock()):
            self._mark_changed()

    def _on_usage(self, key: str, envelope: Envelope | None) -> None:
        if self.state.fold_usage(envelope.payload if envelope else None):
            self._mark_changed()

    def _mark_changed(self) -> None:
        """The state changed: a cycle is due ``debounce_s`` after the first change since the last one."""
        if not self._changed.is_set():
            self._changed_at = time.monotonic()
            self._changed.set()

    def follower_tasks(self) -> list[BackgroundTask]:
        return [table.run for table in self._followers]

    # ------------------------------------------------------------ start-up

    async def recover(self) -> None:
        """Wait for configuration, capacity and usage; rebuild from the records; republish what is unproven."""
        for table in self._followers:
            await table.wait_caught_up()
        jobs = await read_whole(self.settings, JOBS_TOPIC)
        statuses = await read_whole(self.settings, STATUS_TOPIC)
        records = [
            (env.payload.record, env.causation_id) for env in jobs.values() if isinstance(env.payload, JobRecorded)
        ]
        for env in jobs.values():
            if isinstance(env.payload, JobRecorded):
                self._chains[env.payload.job_id] = (env.correlation_id or env.event_id, env.event_id)
        seed_statuses(self.state, (e.payload for e in statuses.values() if isinstance(e.payload, JobStatusChanged)))
        async with self._lock:
            republish = rebuild(self.state, records)
            await self._produce_now(republish)
        log.info("recovered %d of %d recorded jobs for %s (%d decisions republished)", len(self.state.jobs),
                 len(records), self.shard.describe(), len(republish))
        self.ready.set()
        self._mark_changed()

    # ------------------------------------------------------------ consumed inputs

    async def handle(self, envelope: Envelope, delivery: Delivery) -> None:
        """ConsumerLoop handler: fold one input and emit what it changed (committed after the acks)."""
        self.metrics.inputs[envelope.type].inc()
        async with self._lock:
            refusal = unproven(self.state, delivery.topic, envelope.payload)
            if refusal is not None:
                raise Refused(TENANT_NOT_PROVEN, refusal)
            dropped = ignored(self.state, delivery.topic, envelope.payload)
            if dropped is not None:
                log.info("ignoring %s", dropped)  # as a request about an unknown job is: no answer, no dead letter
                return
            secret = plain_secret_refusal(delivery.topic, envelope.payload)
            if secret is not None:
                raise Refused(PLAIN_SECRET_ENV, secret)
            outs = on_input(self.state, envelope.payload, envelope.event_id, self.clock(),
                            retry=delivery.attempt > 1)
            for out in outs:
                wrapped = self._wrap(out.message, envelope)
                if isinstance(out.message, JobRecorded):
                    self._chains[out.message.job_id] = (wrapped.correlation_id or wrapped.event_id, wrapped.event_id)
                await delivery.emit(out.topic, wrapped)
        if outs:
            self.metrics.decisions(outs)
            self._mark_changed()

    def _passes_over(self, topic: str, key: bytes | None, value: bytes | None) -> bool:
        """A shard need not decode another shard's submissions and run events (see ``routing``)."""
        return passes_over(self.state, topic, key, value)

    # ------------------------------------------------------------ cycles

    async def cycle(self) -> int:
        """One cycle: records acknowledged first, then decisions and statuses. Returns messages produced.

        The decisions' acknowledgements are awaited by the next cycle (or ``acknowledged``): a failure
        stops the service then, which recovers from the records and republishes what they cannot prove
        delivered. In between, the service handles inputs and pauses for the next cycle."""
        await self.acknowledged()
        async with self._order.turn():
            async with self._lock:
                # what the inputs handled so far caused goes out first (their records and statuses)
                await self._order.catch_up()
                started = time.perf_counter()
                now = self.clock()
                report = self.reports.due(now)
                outcome = run_cycle(self.state, now, self.scheduler_config, report=report)
                decided = time.perf_counter()
                if report:
                    self.reports.reported(now, decided - started)
                self.metrics.cycle_seconds.observe(decided - started)
            # the state is free again: inputs are folded while the records are acknowledged; what they
            # cause waits for the input loop's turn, so it follows this cycle's decisions
            await self._produce_now(outcome.records)
            # handed to the producer during the turn, so anything produced later follows them; their
            # acknowledgements are awaited after it, while the inputs go on
            sent = await self._send([*outcome.decisions, *outcome.statuses])
            self.cycles += 1
            log.debug("cycle %d%s: %d decisions, %d statuses; decided in %.0f ms, records produced in %.0f ms",
                      self.cycles, " (reported)" if report else "", len(outcome.decisions), len(outcome.statuses),
                      (decided - started) * 1000, (time.perf_counter() - decided) * 1000)
        if sent:
            self._acks = asyncio.gather(*sent)
        self.metrics.decisions(outcome.decisions)
        self.metrics.waits(outcome.waits)
        return len(outcome)

    async def acknowledged(self) -> None:
        """Wait until the broker acknowledged the last cycle's decisions and statuses (raises its failure)."""
        acks, self._acks = self._acks, None
        if acks is not None:
            await acks

    async def run_cycles(self, stop: asyncio.Event) -> None:
        """Cycle ``debounce_s`` after the first change since the last cycle, and every ``period_s`` for
        time-based rules.

        The pause after a change gathers inputs that arrive together: submissions made in one burst land
        on different partitions and may be consumed out of order, and a cycle run on the first of them
        alone would admit it ahead of earlier submissions still in flight. A change that came while the
        previous cycle ran has waited already, so under steady input cycles follow each other directly.
        """
        try:
            while not stop.is_set():
                changed = False
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.period_s):
                        await self._changed.wait()
                        changed = True
                if changed and not stop.is_set():
                    pause = self.debounce_s - (time.monotonic() - self._changed_at)
                    if pause > 0:
                        await asyncio.sleep(pause)
                if stop.is_set():
                    return
                self._changed.clear()
                await self.cycle()
        finally:
            try:
                await self.acknowledged()
            except Exception:
                log.exception("the last cycle's decisions were not acknowledged; they are republished on restart")

    # ------------------------------------------------------------ the whole service

    async def run(self, stop: asyncio.Event) -> None:
        """Recover, then consume inputs and run cycles until ``stop`` (a ``ServiceRunner`` task)."""
        await self.recover()
        # batch settle: a fetched batch's records and statuses are acknowledged together before the
        # commit (one broker round trip per batch); a failed output stops the service, which then
        # recovers from muster.jobs and re-reads the uncommitted batch
        inputs = LoopSettings(Pattern(INPUT_PATTERN), settle=Batched(order=self._order),
                              group_id=group_id(self.shard), max_records=500)
        loop = ConsumerLoop(self.settings, inputs, self.handle, self.producer, skip=self._passes_over)

        async def stopper() -> None:
            await stop.wait()
            loop.stop()
            self._changed.set()

        async with asyncio.TaskGroup() as group:
            group.create_task(loop.run(), name="queue_manager:inputs")
            group.create_task(self.run_cycles(stop), name="queue_manager:cycles")
            group.create_task(stopper(), name="queue_manager:stopper")

    # ------------------------------------------------------------ producing

    def _wrap(self, message: Message, cause: Envelope | None = None) -> Envelope:
        if cause is None:
            job_id = getattr(message, "job_id", None)
            known = self._chains.get(job_id) if isinstance(job_id, str) else None
            if known is None:
                return make_envelope(message, PRODUCER)
            return make_envelope(message, PRODUCER, correlation_id=known[0], causation_id=known[1])
        chain = caused_by(cause)
        return make_envelope(message, PRODUCER, correlation_id=chain["correlation_id"],
                             causation_id=chain["causation_id"])

    async def _produce_now(self, outs: Sequence[Out]) -> None:
        """Produce ``outs`` (as record batches) and wait until the broker acknowledged every one."""
        sent = await self._send(outs)
        if sent:
            await asyncio.gather(*sent)

    async def _send(self, outs: Sequence[Out]) -> list[BatchFuture]:
        """Hand ``outs`` to the producer, in order, as record batches; returns their deliveries."""
        if not outs:
            return []
        if len(self._chains) > 2 * len(self.state.jobs) + 1024:  # forget the chains of jobs long gone
            self._chains = {job: chain for job, chain in self._chains.items() if job in self.state.jobs}
        return await self.producer.send_many(Outgoing(o.topic, self._wrap(o.message)) for o in outs)
