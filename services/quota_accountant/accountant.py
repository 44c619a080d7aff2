"""The accountant's I/O shell: a Faust app keeps the ledger in changelog-backed tables, follows the
inputs, publishes usage.

Recovery (why it works this way, and its limits):

- **State in tables.** The ledger (open attempts, settled keys, decayed usage per queue, window usage
  per tenant, bought nodes and their spend) and the allocation per queue and GPU type live in Faust
  tables, each backed by a compacted changelog topic (names in ``services.quota_accountant.stream``, rows in
  ``services.quota_accountant.ledger_rows``). Faust's store is in memory (``memory://``, no RocksDB): on
  start, and after every rebalance, the tables are read back from their changelogs and the ledger is
  rebuilt from them. An attempt that is still running is in the ``attempts`` table however long ago it
  was admitted and started, so it keeps accruing across restarts whatever the input topics retain.
- **Inputs from committed offsets.** ``muster.decisions``, ``muster.runs`` and ``muster.dispatches`` are
  followed by Faust agents in the consumer group ``muster-quota-accountant``, from its committed offsets
  (from the earliest retained record the first time). An input is acknowledged only after the usage
  messages it caused are acknowledged by the broker and its table rows are handed to the producer;
  Faust flushes the producer before it commits, so an offset is never committed ahead of the usage or
  the state it caused. What was processed after the last commit is processed again after a crash: the
  ledger ignores a fact it holds already and facts of settled attempts, and a chargeback published
  twice has the same key on the compacted usage topic.
- **Limits.** (1) One instance: per-queue aggregates need every input, so the service is not sharded
  (a second instance in the group would split the inputs). (2) A restored ledger keeps what it was
  given: a restored settled attempt is not charged again, and one that ended while the service was down
  settles when its input is processed. (3) The changelogs grow with the state, not with the history of
  inputs; until the broker compacts them, start-up reads every row version written since.

Reports are published after every input that changes a queue or tenant, and for every queue and
tenant each ``publish_interval_s`` so decayed values stay fresh. Times in reports come from the
injected clock; accrual boundaries come from the messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.capacity import NodeRemoved, NodeStateObserved
from schemas.codec import DecodeError, decode
from schemas.config import MusterConfig
from schemas.envelope import Envelope, Message, caused_by, make_envelope
from schemas.jobspec import MAIN_ROLE
from schemas.topics import CAPACITY_TOPIC, CONFIG_TOPIC, DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC, USAGE_TOPIC
from services.quota_accountant.attempts import Charge
from services.quota_accountant.config_view import ConfigView, build_view
from services.quota_accountant.handlers import apply, attempt_key_of
from services.quota_accountant.ledger import DEFAULT_HALF_LIFE_S, DEFAULT_HORIZON_S, Ledger
from services.quota_accountant.ledger_rows import Change, TableMirror, ledger_of
from services.quota_accountant.metrics import AccountantMetrics
from services.quota_accountant.reports import budget_report, burst_report, chargeback, queue_report_of
from services.quota_accountant.stream import AccountantStreams, Ack, Rows
from services.quota_accountant.windows import to_datetime
from services.runtime.kafka import EnvelopeProducer, KafkaSettings, topic_replication
from services.runtime.kafka.table import CompactedTable

log = logging.getLogger(__name__)

PRODUCER = "quota_accountant"
INPUT_TOPICS: tuple[str, ...] = (DECISIONS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)
Clock = Callable[[], float]
#: folded inputs waiting for their flush before the agents take more
MAX_PENDING = 5000


class AccountantSettings(BaseSettings):
    """Ledger parameters, from ``MUSTER_ACCOUNTANT_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="MUSTER_ACCOUNTANT_", extra="ignore", frozen=True)

    half_life_s: float = DEFAULT_HALF_LIFE_S
    publish_interval_s: float = 30.0
    horizon_s: float = DEFAULT_HORIZON_S
    catch_up_timeout_s: float = 300.0


class Accountant:
    """Runs as a ``ServiceRunner`` background task: ``run(stop)``."""

    def __init__(
        self,
        kafka: KafkaSettings,
        registry: CollectorRegistry,
        *,
        settings: AccountantSettings | None = None,
        base_config: MusterConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._kafka = kafka
        self.settings = settings or AccountantSettings()
        self.ledger = Ledger(self.settings.half_life_s, self.settings.horizon_s)
        self.mirror = TableMirror()
        self.metrics = AccountantMetrics(registry)
        self._base_config = base_config
        self._clock: Clock = clock or time.time
        self.view: ConfigView = build_view(base_config, [])
        self._node_types: dict[tuple[str, str], str] = {}
        self._charges: list[tuple[Charge, Envelope | None]] = []
        self._dirty_queues: set[str] = set()
        self._dirty_tenants: set[str] = set()
        self._dirty_burst: set[str] = set()
        self._removed: dict[tuple[str, str], float] = {}  # (cluster, node) -> when it was observed removed
        self._producer: EnvelopeProducer | None = None
        self._streams: AccountantStreams | None = None
        self._live = False
        self._lock = asyncio.Lock()  # one flush at a time: outputs, then table rows, then acks, in order
        self._pending: list[tuple[Ack, list[Change]]] = []  # folded inputs whose outputs are not yet acked
        self._causes: dict[str, Envelope] = {}  # queue or tenant -> the latest input that changed it
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._folding = asyncio.Event()  # clear while the ledger is rebuilt after a rebalance
        self._folding.set()
        self.ready = asyncio.Event()  # set once the tables are recovered and the ledger rebuilt from them
        self.recoveries = 0  # times the ledger was rebuilt from the tables (start, rebalances)

    # ------------------------------------------------------------------ lifecycle

    async def run(self, stop: asyncio.Event) -> None:
        producer = EnvelopeProducer(self._kafka)
        await producer.start()
        self._producer = producer
        tables_stop = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as group:

                async def config_changed(key: str, envelope: Envelope | None) -> None:
                    await self._on_config(config)

                config = CompactedTable(self._kafka, CONFIG_TOPIC, on_change=config_changed)
                capacity = CompactedTable(self._kafka, CAPACITY_TOPIC, on_change=self._on_capacity)
                for table in (config, capacity):
                    group.create_task(table.run(tables_stop), name=f"{PRODUCER}:{table.topic}")
                try:
                    if await self._wait(asyncio.gather(config.wait_caught_up(), capacity.wait_caught_up()), stop):
                        await self._stream(stop)
                finally:
                    tables_stop.set()
        finally:
            self._producer = None
            await producer.stop()

    async def _stream(self, stop: asyncio.Event) -> None:
        """Run the Faust app until ``stop``; raises when a handler failed."""
        replication = (await topic_replication(self._kafka, [USAGE_TOPIC])).get(USAGE_TOPIC)
        streams = AccountantStreams(
            self._kafka, INPUT_TOPICS, on_event=self._on_record, on_recovered=self._on_recovered,
            replication=replication.factor if replication is not None else 1,
            min_insync_replicas=replication.min_insync if replication is not None else None,
        )
        self._streams = streams
        await streams.start()
        assert streams.failure is not None
        failure = streams.failure
        publisher = asyncio.create_task(self._publisher(streams), name=f"{PRODUCER}:publisher")
        try:
            if not await self._wait(self.ready.wait(), stop, failure):
                return
            log.info("quota accountant live: %d open attempts, %d settled keys",
                     len(self.ledger.attempts), len(self.ledger.settled))
            await self._periodic(stop, failure)
        finally:
            self._live = False
            await streams.stop()
            publisher.cancel()
            await asyncio.gather(publisher, return_exceptions=True)
            self._streams = None
        if failure.done() and not failure.cancelled():
            failure.result()

    async def _wait(self, awaitable: Any, stop: asyncio.Event, failure: asyncio.Future[None] | None = None) -> bool:
        """Await ``awaitable`` unless ``stop`` is set or ``failure`` ends first (bounded by the catch-up
        timeout); True when it finished."""
        work: asyncio.Future[Any] = asyncio.ensure_future(awaitable)
        stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        contenders: set[asyncio.Future[Any]] = {work, stopped}
        if failure is not None:
            contenders.add(failure)
        try:
            async with asyncio.timeout(self.settings.catch_up_timeout_s):
                done, _ = await asyncio.wait(contenders, return_when=asyncio.FIRST_COMPLETED)
            if failure is not None and failure in done:
                failure.result()
            if work in done:
                work.result()
                return True
            return False
        finally:
            for waiter in (work, stopped):
                waiter.cancel()
            await asyncio.gather(work, stopped, return_exceptions=True)

    async def _periodic(self, stop: asyncio.Event, failure: asyncio.Future[None]) -> None:
        while True:
            stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({stopped, failure}, timeout=self.settings.publish_interval_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
                await asyncio.gather(stopped, return_exceptions=True)
            if stop.is_set() or failure.done():
                return
            try:
                await self._flush(periodic=True)
            except Exception:
                log.exception("periodic usage publication failed; retrying next interval")

    async def _on_recovered(self, rows: Callable[[], Rows]) -> None:
        """The tables are recovered: rebuild the ledger from them and publish every report.

        Inputs folded before (a rebalance of a running service) are flushed into the tables first; none is
        folded while the ledger is replaced."""
        self._folding.clear()
        try:
            async with self._lock:
                await self._flush_locked()
                self.ledger = ledger_of(self.settings.half_life_s, self.settings.horizon_s, rows())
                self.mirror = TableMirror.of(rows())
                self.recoveries += 1
                self.metrics.restored_charges.inc(len(self.ledger.settled))
                log.info("ledger rebuilt from the tables: %d open attempts, %d settled keys, %d queues",
                         len(self.ledger.attempts), len(self.ledger.settled), len(self.ledger.booked_queues()))
                await self._publish_locked(everything=True)
                self._live = True
        finally:
            self._folding.set()
        self.ready.set()

    # ------------------------------------------------------------------ inputs

    async def _on_record(self, topic: str, value: bytes | None, ack: Ack) -> None:
        """One input record: fold it now; its outputs, table rows and ack follow in the next flush."""
        while len(self._pending) >= MAX_PENDING:
            self._room.clear()
            await self._room.wait()
        await self.ready.wait()  # nothing is folded into a ledger that is not yet rebuilt from the tables
        await self._folding.wait()
        # from here to the append, nothing awaits: the fold and its pending entry are one step
        changes: list[Change] = []
        envelope: Envelope | None = None
        if value is not None:
            try:
                envelope = decode(value, topic=topic)
            except DecodeError as exc:
                log.warning("skipping an undecodable record on %s: %s", topic, exc)
        if envelope is not None:
            effect = apply(self.ledger, envelope, self._node_types)
            key = attempt_key_of(envelope)
            changes = self.mirror.after_fact(self.ledger, [key] if key is not None else [], effect.queues,
                                             effect.tenants, effect.burst)
            self.metrics.inputs.labels(envelope.type).inc()
            self._dirty_queues.update(effect.queues)
            self._dirty_tenants.update(effect.tenants)
            self._dirty_burst.update(effect.burst)
            for name in (*effect.queues, *(f"tenant/{t}" for t in effect.tenants),
                         *(f"burst/{q}" for q in effect.burst)):
                self._causes[name] = envelope
            if effect.charge is not None:
                self._charges.append((effect.charge, envelope))
        self._pending.append((ack, changes))
        self._wake.set()

    async def _publisher(self, streams: AccountantStreams) -> None:
        """Flush whatever inputs were folded, as they come; a failed flush ends the service."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._flush()
            except Exception as exc:
                log.exception("publishing usage failed")
                streams.fail(exc)
                return

    async def _flush(self, *, periodic: bool = False) -> None:
        """Publish what the folded inputs changed (every report when ``periodic``, after pruning the
        ledger), wait for the broker's acks, write their table rows, then acknowledge the inputs."""
        async with self._lock:
            await self._flush_locked(periodic=periodic)

    async def _flush_locked(self, *, periodic: bool = False) -> None:
        batch, self._pending = self._pending, []
        pruned: list[Change] = []
        try:
            if periodic:
                now = self._clock()
                self._close_removed()
                self.ledger.prune(now)
                pruned = self.mirror.after_prune(self.ledger)
            await self._publish_locked(everything=periodic)
        except BaseException:
            self._pending[:0] = batch
            if pruned:
                self._pending.append((_no_ack, pruned))
            raise
        # the batch's rows, each key once with its last row: the mirror already holds that state
        latest: dict[tuple[str, str], Change] = {}
        for _, changes in batch:
            for change in changes:
                latest.pop((change.table, change.key), None)
                latest[(change.table, change.key)] = change
        await self._write(list(latest.values()))
        await self._write(pruned)
        for ack, _ in batch:
            await ack()
        self._room.set()

    async def _write(self, changes: Sequence[Any]) -> None:
        streams = self._streams
        if streams is None:
            raise RuntimeError("the accountant's tables are not running")
        await streams.write(changes)

    async def _on_config(self, table: CompactedTable) -> None:
        self.view = build_view(self._base_config, table.values())
        if self._live:
            await self._publish(everything=True)

    def _on_capacity(self, key: str, envelope: Envelope | None) -> None:
        payload = envelope.payload if envelope is not None else None
        if isinstance(payload, NodeStateObserved):
            self._node_types[(payload.state.cluster, payload.state.node)] = payload.state.gpu_type
            self._removed.pop((payload.state.cluster, payload.state.node), None)
        elif isinstance(payload, NodeRemoved):
            self._node_types.pop((payload.cluster, payload.node), None)
            self._removed[(payload.cluster, payload.node)] = payload.observed_at.timestamp()

    def _close_removed(self) -> None:
        """Bought nodes observed removed without being given back stop accruing at their removal (written with
        the periodic rows)."""
        for (cluster, node), at in self._removed.items():
            self._dirty_burst.update(self.ledger.burst.removed(cluster, node, at))

    # ------------------------------------------------------------------ outputs

    async def _publish(self, *, cause: Envelope | None = None, everything: bool = False) -> None:
        async with self._lock:
            await self._publish_locked(cause=cause, everything=everything)

    async def _publish_locked(self, *, cause: Envelope | None = None, everything: bool = False) -> None:
        """Publish pending chargebacks and the stale (or, with ``everything``, all) reports; wait for acks."""
        producer = self._producer
        if producer is None:
            return
        now = self._clock()
        if everything:
            self._dirty_queues.update(self.ledger.queue_names() | set(self.view.queues))
            self._dirty_tenants.update(self.ledger.tenant_names() | set(self.view.tenants))
            self._dirty_burst.update(self.ledger.burst.queues()
                                     | {q for q in self.view.queues if self.view.burst_window(q) is not None})
        charges, self._charges = self._charges, []
        queues, self._dirty_queues = sorted(self._dirty_queues), set()
        tenants, self._dirty_tenants = sorted(self._dirty_tenants), set()
        bursts, self._dirty_burst = sorted(self._dirty_burst), set()
        outgoing: list[Envelope] = []
        for charge, origin in charges:
            outgoing.append(_envelope(chargeback(charge), origin))
        causes, self._causes = self._causes, {}
        for queue in queues:
            usage = self.ledger.queue_usage(queue, now)
            report = queue_report_of(usage, self.view, queue, self.ledger.half_life_s)
            self.metrics.observe_queue(report, usage.gpu_seconds)
            outgoing.append(_envelope(report, causes.get(queue, cause)))
        for tenant in tenants:
            budget = budget_report(self.ledger, self.view, tenant, now)
            self.metrics.observe_budget(budget)
            outgoing.append(_envelope(budget, causes.get(f"tenant/{tenant}", cause), occurred_at=to_datetime(now)))
        for queue in bursts:
            burst = burst_report(self.ledger, self.view, queue, now)
            self.metrics.observe_burst(burst)
            outgoing.append(_envelope(burst, causes.get(f"burst/{queue}", cause)))
        self.metrics.active_accruals.set(self.ledger.active_accruals)
        try:
            futures = [await producer.send(USAGE_TOPIC, envelope) for envelope in outgoing]
            await asyncio.gather(*futures)
        except BaseException:
            self._charges[:0] = charges  # keep them for the next publication
            self._causes = {**causes, **self._causes}
            self._dirty_queues.update(queues)
            self._dirty_tenants.update(tenants)
            self._dirty_burst.update(bursts)
            raise
        for charge, _ in charges:
            self.metrics.chargebacks.labels(charge.outcome).inc()
            for role, gpu_seconds in (charge.roles or {MAIN_ROLE: charge.gpu_seconds}).items():
                self.metrics.role_gpu_seconds.labels(charge.queue, role).inc(gpu_seconds)


async def _no_ack() -> None:
    return None


def _envelope(message: Message, cause: Envelope | None, *, occurred_at: datetime | None = None) -> Envelope:
    if cause is None:
        return make_envelope(message, PRODUCER, occurred_at=occurred_at)
    chain = caused_by(cause)
    return make_envelope(message, PRODUCER, correlation_id=chain["correlation_id"],
                         causation_id=chain["causation_id"], occurred_at=occurred_at)
