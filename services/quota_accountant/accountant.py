"""The accountant's I/O shell: restores the ledger, follows its inputs, publishes usage.

Recovery (why it works this way, and its limits):

- **Durable facts.** Every settled attempt is one ``ChargebackRecorded`` on the compacted
  ``muster.usage`` topic, keyed ``charge/<job>/<attempt>``. On start the topic is read whole and every
  chargeback is folded back into the ledger (decayed history, window usage, the settled-key set).
  ``QueueUsageReported`` / ``BudgetStatusReported`` are derived views, not restored from: an aggregate
  cannot say which running attempts it already includes, so adding replayed inputs to it would count
  them twice; per-attempt facts can be folded idempotently.
- **Open accruals.** Attempts still running are rebuilt from the input topics (``muster.decisions``,
  ``muster.runs``, ``muster.dispatches``), which are re-read from their earliest retained record on
  every start, then followed. The ledger ignores facts of settled attempts, so the replay is
  idempotent; an attempt that ended while the service was down settles during the replay and its
  chargeback is published then. No consumer-group offsets are involved, so nothing is ever committed
  ahead of the usage it caused.
- **Limits.** (1) One instance: per-queue aggregates need every input, so the service is not sharded.
  (2) An attempt that has run longer than the input topics' retention (7 days) when the service
  restarts has lost its admission and start records: it is not accrued until it ends and cannot be
  charged. (3) A restored chargeback of a scaled attempt is folded at its average rate, so its decayed
  value (not its GPU-seconds) can differ slightly from the live computation. (4) Start-up reads every
  chargeback ever recorded and a week of inputs; both grow with the cluster's history.

Reports are published after every input that changes a queue or tenant, and for every queue and
tenant each ``publish_interval_s`` so decayed values stay fresh. Times in reports come from the
injected clock; accrual boundaries come from the messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.capacity import NodeRemoved, NodeStateObserved
from schemas.config import MusterConfig
from schemas.envelope import Envelope, Message, caused_by, make_envelope
from schemas.topics import CAPACITY_TOPIC, CONFIG_TOPIC, DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC, USAGE_TOPIC
from schemas.usage import ChargebackRecorded
from services.quota_accountant.attempts import Charge
from services.quota_accountant.config_view import ConfigView, build_view
from services.quota_accountant.handlers import apply
from services.quota_accountant.ledger import DEFAULT_HALF_LIFE_S, DEFAULT_HORIZON_S, Ledger
from services.quota_accountant.metrics import AccountantMetrics
from services.quota_accountant.reports import budget_report, charge_of, chargeback, queue_report_of
from services.quota_accountant.windows import to_datetime
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.runtime.kafka.table import CompactedTable

log = logging.getLogger(__name__)

PRODUCER = "quota_accountant"
INPUT_TOPICS: tuple[str, ...] = (DECISIONS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)
Clock = Callable[[], float]


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
        self.metrics = AccountantMetrics(registry)
        self._base_config = base_config
        self._clock: Clock = clock or time.time
        self.view: ConfigView = build_view(base_config, [])
        self._node_types: dict[tuple[str, str], str] = {}
        self._charges: list[tuple[Charge, Envelope | None]] = []
        self._dirty_queues: set[str] = set()
        self._dirty_tenants: set[str] = set()
        self._producer: EnvelopeProducer | None = None
        self._live = False
        self._lock = asyncio.Lock()
        self.ready = asyncio.Event()  # set once restored and caught up with every input

    # ------------------------------------------------------------------ lifecycle

    async def run(self, stop: asyncio.Event) -> None:
        producer = EnvelopeProducer(self._kafka)
        await producer.start()
        self._producer = producer
        tables_stop = asyncio.Event()
        try:
            if not await self._restore(stop):
                return
            async with asyncio.TaskGroup() as group:

                async def config_changed(key: str, envelope: Envelope | None) -> None:
                    await self._on_config(config)

                config = CompactedTable(self._kafka, CONFIG_TOPIC, on_change=config_changed)
                capacity = CompactedTable(self._kafka, CAPACITY_TOPIC, on_change=self._on_capacity)
                inputs = [CompactedTable(self._kafka, t, on_change=self._on_input) for t in INPUT_TOPICS]
                for table in (config, capacity, *inputs):
                    group.create_task(table.run(tables_stop), name=f"{PRODUCER}:{table.topic}")
                try:
                    if await self._caught_up([config, capacity, *inputs], stop):
                        self._live = True
                        await self._publish(everything=True)
                        self.ready.set()
                        log.info("quota accountant live: %d open attempts, %d settled keys",
                                 len(self.ledger.attempts), len(self.ledger.settled))
                        await self._periodic(stop)
                finally:
                    tables_stop.set()
        finally:
            self._producer = None
            await producer.stop()

    async def _restore(self, stop: asyncio.Event) -> bool:
        """Fold every chargeback on the usage topic back into the ledger; False if stopped first."""
        table_stop = asyncio.Event()
        table = CompactedTable(self._kafka, USAGE_TOPIC)
        task = asyncio.create_task(table.run(table_stop), name=f"{PRODUCER}:restore")
        try:
            if not await self._caught_up([table], stop, watch=[task]):
                return False
        finally:
            table_stop.set()
            await task
        restored = 0
        for envelope in table.values():
            payload = envelope.payload
            if isinstance(payload, ChargebackRecorded) and self.ledger.restore(charge_of(payload)).changed:
                restored += 1
        self.metrics.restored_charges.inc(restored)
        log.info("restored %d chargeback records from %s", restored, USAGE_TOPIC)
        return True

    async def _caught_up(
        self, tables: Sequence[CompactedTable], stop: asyncio.Event, *, watch: Sequence[asyncio.Task[None]] = ()
    ) -> bool:
        """Wait until every table holds its start-time contents; False if ``stop`` is set first.

        ``watch``: reader tasks outside a task group, whose failure must end the wait.
        """
        caught_up: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*(t.wait_caught_up() for t in tables)))
        stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        contenders: set[asyncio.Future[Any]] = {caught_up, stopped, *watch}
        try:
            async with asyncio.timeout(self.settings.catch_up_timeout_s):
                done, _ = await asyncio.wait(contenders, return_when=asyncio.FIRST_COMPLETED)
            for reader in done.intersection(watch):
                reader.result()
                raise RuntimeError("a topic reader stopped before it caught up")
            return caught_up in done
        finally:
            for waiter in (caught_up, stopped):
                waiter.cancel()
            await asyncio.gather(caught_up, stopped, return_exceptions=True)

    async def _periodic(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.settings.publish_interval_s)
            if stop.is_set():
                return
            self.ledger.prune(self._clock())
            try:
                await self._publish(everything=True)
            except Exception:
                log.exception("periodic usage publication failed; retrying next interval")

    # ------------------------------------------------------------------ inputs

    async def _on_input(self, key: str, envelope: Envelope | None) -> None:
        if envelope is None:
            return
        effect = apply(self.ledger, envelope, self._node_types)
        self.metrics.inputs.labels(envelope.type).inc()
        if not effect.changed:
            return
        self._dirty_queues.update(effect.queues)
        self._dirty_tenants.update(effect.tenants)
        if effect.charge is not None:
            self._charges.append((effect.charge, envelope))
        if self._live:
            await self._publish(cause=envelope)

    async def _on_config(self, table: CompactedTable) -> None:
        self.view = build_view(self._base_config, table.values())
        if self._live:
            await self._publish(everything=True)

    def _on_capacity(self, key: str, envelope: Envelope | None) -> None:
        payload = envelope.payload if envelope is not None else None
        if isinstance(payload, NodeStateObserved):
            self._node_types[(payload.state.cluster, payload.state.node)] = payload.state.gpu_type
        elif isinstance(payload, NodeRemoved):
            self._node_types.pop((payload.cluster, payload.node), None)

    # ------------------------------------------------------------------ outputs

    async def _publish(self, *, cause: Envelope | None = None, everything: bool = False) -> None:
        """Publish pending chargebacks and the stale (or, with ``everything``, all) reports; wait for acks."""
        producer = self._producer
        if producer is None:
            return
        async with self._lock:
            now = self._clock()
            if everything:
                self._dirty_queues.update(self.ledger.queue_names() | set(self.view.queues))
                self._dirty_tenants.update(self.ledger.tenant_names() | set(self.view.tenants))
            charges, self._charges = self._charges, []
            queues, self._dirty_queues = sorted(self._dirty_queues), set()
            tenants, self._dirty_tenants = sorted(self._dirty_tenants), set()
            outgoing: list[Envelope] = []
            for charge, origin in charges:
                outgoing.append(_envelope(chargeback(charge), origin))
            for queue in queues:
                usage = self.ledger.queue_usage(queue, now)
                report = queue_report_of(usage, self.view, queue, self.ledger.half_life_s)
                self.metrics.observe_queue(report, usage.gpu_seconds)
                outgoing.append(_envelope(report, cause))
            for tenant in tenants:
                budget = budget_report(self.ledger, self.view, tenant, now)
                self.metrics.observe_budget(budget)
                outgoing.append(_envelope(budget, cause, occurred_at=to_datetime(now)))
            self.metrics.active_accruals.set(self.ledger.active_accruals)
            try:
                futures = [await producer.send(USAGE_TOPIC, envelope) for envelope in outgoing]
                await asyncio.gather(*futures)
            except BaseException:
                self._charges[:0] = charges  # keep them for the next publication
                self._dirty_queues.update(queues)
                self._dirty_tenants.update(tenants)
                raise
            for charge, _ in charges:
                self.metrics.chargebacks.labels(charge.outcome).inc()


def _envelope(message: Message, cause: Envelope | None, *, occurred_at: datetime | None = None) -> Envelope:
    if cause is None:
        return make_envelope(message, PRODUCER, occurred_at=occurred_at)
    chain = caused_by(cause)
    return make_envelope(message, PRODUCER, correlation_id=chain["correlation_id"],
                         causation_id=chain["causation_id"], occurred_at=occurred_at)
