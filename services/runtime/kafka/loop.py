"""``ConsumerLoop``: consume -> decode -> handle -> produce -> commit, with a dead-letter topic."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import signal
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TypeAlias

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

from schemas.codec import DecodeError, decode
from schemas.topics import dlq_topic
from services.runtime import tracing
from services.runtime.kafka.delivery import Delivery, Handler, PartitionsCallback, Refused, TombstoneHandler
from services.runtime.kafka.headers import dead_letter_headers, dead_letter_key, dead_letter_value
from services.runtime.kafka.lanes import KeyedLanes
from services.runtime.kafka.loop_settings import Batched, LoopSettings, Pattern, PerRecord, RetryPolicy, Topics
from services.runtime.kafka.producer import EnvelopeProducer
from services.runtime.kafka.settings import KafkaSettings
from services.runtime.kafka.settle import BatchSettler
from services.runtime.logs import enter_message, leave_message

log = logging.getLogger(__name__)

Record: TypeAlias = "ConsumerRecord[bytes, bytes]"
#: records handled between two turns of the event loop
YIELD_EVERY = 32


#: the loops of the service whose runner is current (``collect_loops``): a loop started inside one of the
#: service's tasks counts itself there while it runs, for the consumer-lag gauge (``lag.py``)
_LOOPS: contextvars.ContextVar[set[ConsumerLoop] | None] = contextvars.ContextVar("muster_loops", default=None)


def collect_loops() -> set[ConsumerLoop]:
    """A fresh set that the loops run from this context (and the tasks it starts) add themselves to."""
    loops: set[ConsumerLoop] = set()
    _LOOPS.set(loops)
    return loops


@dataclass
class LoopStats:
    """Counters for metrics and tests."""

    handled: int = 0
    passed_over: int = 0  # records ``skip`` said the service ignores anyway: not decoded
    dead_lettered: int = 0
    retries: int = 0
    commits: int = 0


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, loop: ConsumerLoop) -> None:
        self._loop = loop

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        await self._loop._on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        await self._loop._on_assigned(assigned)


class ConsumerLoop:
    """Runs one consumer-group member: each record is decoded, handled, its outputs acknowledged, and
    only then its offset committed (at-least-once; handlers must be idempotent).

    A record that cannot be decoded, or that the handler refuses (``Refused``), goes to ``<topic>.dlq`` at
    once; a handler that keeps failing goes
    there after ``retry.attempts`` tries (reason ``handler_error``); the loop moves on. If a dead letter
    cannot be written the loop stops with the error, the record uncommitted. On revocation the handled
    offsets of the revoked partitions are committed.

    ``config`` (``LoopSettings``, ``loop_settings.py``) says what the loop reads (``Topics`` or a
    ``Pattern``), how it settles (``PerRecord(concurrency=N)``: each record's outputs before the next
    record, the handler retried when they fail; ``Batched(order=...)``: a whole fetched batch's outputs
    handed to a ``BatchSettler``, ``settle.py``), its group, batch size and retries. With ``concurrency`` > 1
    the loop keeps fetching while records are handled (``KeyedLanes``, ``lanes.py``: one lane per key, at most
    ``max_records`` in hand) and commits each partition's offsets up to its first record not yet handled (the
    dispatcher's API calls).
    ``on_tombstone`` receives null values (deletes on compacted topics) with their key; without it
    they are dead-lettered as ``malformed``. ``skip(topic, key, value)`` may pass a record over before
    it is decoded (committed like a handled one).
    """

    #: how often a pattern subscription looks for new matching topics (aiokafka's default is 5 minutes)
    PATTERN_REFRESH_MS = 30_000

    ISOLATION_LEVEL = "read_committed"
    AUTO_OFFSET_RESET = "earliest"
    POLL_TIMEOUT_MS = 200

    def __init__(
        self,
        settings: KafkaSettings,
        config: LoopSettings,
        handler: Handler,
        producer: EnvelopeProducer,
        *,
        on_assigned: PartitionsCallback | None = None,
        on_revoked: PartitionsCallback | None = None,
        on_tombstone: TombstoneHandler | None = None,
        skip: Callable[[str, bytes | None, bytes | None], bool] | None = None,
    ) -> None:
        if not isinstance(config, LoopSettings):
            raise TypeError(f"ConsumerLoop takes a LoopSettings, not {type(config).__name__}")
        group = config.group_id or settings.group_id
        if not group:
            raise ValueError("ConsumerLoop needs a consumer group (LoopSettings.group_id or MUSTER_KAFKA_GROUP_ID)")
        self.config = config
        self.group_id = group
        self._settings = settings
        subscription, settle = config.subscription, config.settle
        self._topics = tuple(subscription.names) if isinstance(subscription, Topics) else ()
        self._pattern = subscription.regex if isinstance(subscription, Pattern) else None
        self._concurrency = settle.concurrency if isinstance(settle, PerRecord) else 1
        batched = settle if isinstance(settle, Batched) else None
        self._handler = handler
        self._producer = producer
        self._retry: RetryPolicy = config.retry
        self._on_assigned_cb = on_assigned
        self._on_revoked_cb = on_revoked
        self._on_tombstone = on_tombstone
        self._max_records = config.max_records
        self._skip = skip
        self._consumer: AIOKafkaConsumer | None = None
        self._owned: set[TopicPartition] = set()
        self._processed: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}  # what this member last committed (for the lag)
        self._batch = (BatchSettler(producer, self._processed, self._commit, batched.order, name=group)
                       if batched is not None else None)
        self._work_lock = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._lanes = (KeyedLanes(self._handle_record, concurrency=self._concurrency, limit=self._max_records,
                                  stopping=self._stopping, on_advance=self._advance)
                       if self._concurrency > 1 else None)
        self._ready = asyncio.Event()
        self.stats = LoopStats()

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """Partitions this member currently owns."""
        return frozenset(self._owned)

    async def wait_assigned(self) -> None:
        """Return once the first partition assignment has been received."""
        await self._ready.wait()

    def stop(self) -> None:
        """Ask the loop to finish the record in hand, commit and close (safe from a signal handler)."""
        self._stopping.set()

    async def run(self, *, handle_signals: bool = False) -> None:
        """Consume until ``stop()`` (or SIGTERM/SIGINT when ``handle_signals``); then commit and close."""
        running = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                running.add_signal_handler(sig, self.stop)
                installed.append(sig)
        consumer = AIOKafkaConsumer(
            **self._settings.client_options(),
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset=self.AUTO_OFFSET_RESET,
            isolation_level=self.ISOLATION_LEVEL,
            **({"metadata_max_age_ms": self.PATTERN_REFRESH_MS} if self._pattern else {}),
        )
        self._consumer = consumer
        registry = _LOOPS.get()
        if registry is not None:
            registry.add(self)
        try:
            await consumer.start()
            if self._pattern is not None:
                consumer.subscribe(pattern=self._pattern, listener=_Rebalance(self))
            else:
                consumer.subscribe(self._topics, listener=_Rebalance(self))
            lanes = self._lanes
            while not self._stopping.is_set():
                if lanes is not None:
                    await self._fetch_into(lanes, consumer)
                    continue
                batch = await consumer.getmany(timeout_ms=self.POLL_TIMEOUT_MS, max_records=self._max_records)
                handled = 0
                for records in batch.values():
                    for record in records:
                        if self._stopping.is_set():
                            break
                        await self._process(record)
                        handled += 1
                        if handled % YIELD_EVERY == 0:
                            # a handler that never waits would hold the event loop for the whole batch:
                            # let acknowledgements, timers and the service's other tasks run
                            await asyncio.sleep(0)
                await self._finish_batch()
        finally:
            with contextlib.suppress(Exception):
                if self._lanes is not None:
                    await self._lanes.close()
                await self._finish_batch(wait=True)
                if self._batch is not None:
                    async with self._work_lock:
                        await self._batch.wait_settled()
            if registry is not None:
                registry.discard(self)
            await consumer.stop()
            self._consumer = None
            for sig in installed:
                running.remove_signal_handler(sig)

    async def _process(self, record: Record) -> None:
        tp = TopicPartition(record.topic, record.partition)
        async with self._work_lock:
            if tp not in self._owned:
                return  # revoked while the batch was in hand: the new owner re-reads it
            await self._handle_or_skip(record)
            self._processed[tp] = record.offset + 1

    async def _handle_or_skip(self, record: Record) -> None:
        if not self._passes_over(record):
            await self._handle_record(record)

    def _passes_over(self, record: Record) -> bool:
        """Whether ``skip`` says the service ignores the record anyway (counted)."""
        if self._skip is None or not self._skip(record.topic, record.key, record.value):
            return False
        self.stats.passed_over += 1
        return True

    async def _fetch_into(self, lanes: KeyedLanes, consumer: AIOKafkaConsumer) -> None:
        """One turn of the concurrent mode: fetch when the lanes have room, queue what came, commit what is
        handled; a handler's failure stops the loop with it."""
        if await lanes.room(timeout_s=self.POLL_TIMEOUT_MS / 1000):
            batch = await consumer.getmany(timeout_ms=self.POLL_TIMEOUT_MS, max_records=self._max_records)
            lanes.add((r for tp, records in batch.items() if tp in self._owned for r in records),
                      passed_over=self._passes_over)
        if lanes.failure is not None:
            raise lanes.failure
        await self._finish_batch()

    def _advance(self, tp: TopicPartition, offset: int) -> None:
        """The lanes handled ``tp`` up to ``offset``: committed with the next commit."""
        if tp in self._owned:
            self._processed[tp] = offset

    async def _handle_record(self, record: Record) -> None:
        if record.value is None and self._on_tombstone is not None:
            on_tombstone = self._on_tombstone
            await self._with_retries(record, lambda delivery: on_tombstone(record.key, delivery))
            return
        try:
            envelope = decode(record.value, topic=record.topic)
        except DecodeError as exc:
            await self._dead_letter(record, exc.reason, exc.detail, attempts=0)
            return
        token = enter_message(envelope)  # log lines name the message's job, attempt and chain
        try:
            if tracing.enabled():
                with tracing.handling(envelope, record.topic):
                    await self._with_retries(record, lambda delivery: self._handler(envelope, delivery))
            else:
                await self._with_retries(record, lambda delivery: self._handler(envelope, delivery))
        finally:
            leave_message(token)

    async def _with_retries(self, record: Record, call: Callable[[Delivery], Awaitable[None]]) -> None:
        for attempt in range(1, self._retry.attempts + 1):
            delivery = Delivery(
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
                key=record.key,
                timestamp_ms=record.timestamp,
                attempt=attempt,
                _producer=self._producer,
                deferred=self._batch is not None,
            )
            try:
                await call(delivery)
                if self._batch is not None:
                    self._batch.collect(delivery)
                else:
                    await delivery.settle()
            except (DecodeError, Refused) as exc:
                await self._dead_letter(record, exc.reason, exc.detail, attempts=attempt)
                return
            except Exception as exc:
                detail = f"{type(exc).__name__}: {exc}"
                if attempt >= self._retry.attempts:
                    log.exception("handler failed %d times on %s; dead-lettering", attempt, _where(record))
                    await self._dead_letter(record, "handler_error", detail, attempts=attempt)
                    return
                self.stats.retries += 1
                log.warning("handler failed on %s (attempt %d): %s", _where(record), attempt, detail)
                await asyncio.sleep(self._retry.backoff(attempt))
            else:
                self.stats.handled += 1
                return

    async def _dead_letter(self, record: Record, reason: str, detail: str, *, attempts: int) -> None:
        headers = dead_letter_headers(
            record.headers,
            reason=reason,
            detail=detail,
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            group=self.group_id,
            attempts=attempts,
        )
        value, cut = dead_letter_value(record.value)
        future = await self._producer.send_raw(
            dlq_topic(record.topic), value, key=dead_letter_key(record.key), headers=[*headers, *cut]
        )
        await future
        self.stats.dead_lettered += 1
        log.warning("dead-lettered %s: %s (%s)", _where(record), reason, detail[:200])

    async def _finish_batch(self, *, wait: bool = False) -> None:
        """After a fetched batch: commit it (record mode), or hand it to the settler (batch mode)."""
        async with self._work_lock:
            if self._batch is None:
                await self._commit_processed()
            else:
                await self._batch.finish(wait=wait)

    async def _commit_processed(self, only: Collection[TopicPartition] | None = None) -> None:
        selected = {tp: offset for tp, offset in self._processed.items() if only is None or tp in only}
        await self._commit(selected)
        for tp, offset in selected.items():
            if self._processed.get(tp) == offset:  # else handled further while the commit was on its way
                del self._processed[tp]

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        consumer = self._consumer
        if consumer is None or not offsets:
            return
        await consumer.commit({tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()})
        self._committed.update(offsets)
        self.stats.commits += 1

    async def lag(self) -> dict[TopicPartition, int]:
        """Per owned partition, the records not yet handled: the partition's end offset (asked of the broker
        now) minus the offset after the last record handled, or the group's committed offset before any."""
        consumer = self._consumer
        owned = sorted(self._owned)
        if consumer is None or not owned:
            return {}
        ends = await consumer.end_offsets(owned)
        lags: dict[TopicPartition, int] = {}
        for tp in owned:
            done = max(self._processed.get(tp, -1), self._committed.get(tp, -1))
            if done < 0:
                committed = await consumer.committed(tp)
                if committed is None:
                    committed = (await consumer.beginning_offsets([tp]))[tp]
                done = self._committed[tp] = committed
            if tp in ends:
                lags[tp] = max(0, ends[tp] - done)
        return lags

    async def _on_revoked(self, revoked: Collection[TopicPartition]) -> None:
        async with self._work_lock:
            try:
                if self._lanes is not None:
                    await self._lanes.release(revoked)
                if self._batch is not None:
                    await self._batch.wait_settled()
                    await self._batch.settle_in_hand()
                await self._commit_processed(only=revoked)
            except Exception:
                log.exception("commit on revocation failed; the next owner re-delivers those records")
            self._owned.difference_update(revoked)
            for tp in revoked:
                self._processed.pop(tp, None)
                self._committed.pop(tp, None)
        if self._on_revoked_cb is not None:
            await self._on_revoked_cb(revoked)

    async def _on_assigned(self, assigned: Collection[TopicPartition]) -> None:
        self._owned.update(assigned)
        if self._on_assigned_cb is not None:
            await self._on_assigned_cb(assigned)
        self._ready.set()


def _where(record: Record) -> str:
    return f"{record.topic}[{record.partition}]@{record.offset}"
