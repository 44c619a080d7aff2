"""``ConsumerLoop``: consume -> decode -> handle -> produce -> commit, with a dead-letter topic."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition

from schemas.codec import DecodeError, decode
from schemas.topics import dlq_topic
from services.runtime.kafka.delivery import Delivery, Handler, PartitionsCallback, TombstoneHandler
from services.runtime.kafka.headers import dead_letter_headers, dead_letter_key, dead_letter_value
from services.runtime.kafka.producer import BatchFuture, DeliveryFuture, EnvelopeProducer, Outgoing
from services.runtime.kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

Record: TypeAlias = "ConsumerRecord[bytes, bytes]"
#: batch mode: how many handled batches may be settling (outputs in flight, commit pending) at once
MAX_SETTLING_BATCHES = 4
#: batch mode: outputs that may wait for the service's output lock before the loop waits for it too
MAX_DEFERRED_OUTPUTS = 20_000
#: records handled between two turns of the event loop
YIELD_EVERY = 32


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of a failing handler: ``attempts`` tries in all, exponential backoff between."""

    attempts: int = 3
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 5.0

    def backoff(self, failed_attempt: int) -> float:
        return float(min(self.max_backoff_s, self.initial_backoff_s * 2 ** (failed_attempt - 1)))


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
    """Runs one consumer-group member: each record is decoded, handled, its outputs acknowledged,
    and only then its offset committed (at-least-once; handlers must be idempotent).

    A record that cannot be decoded or validated goes to ``<topic>.dlq`` at once (values over
    ``MAX_DEAD_VALUE_BYTES``, possible when a compressed record expands, keep only their prefix); a handler that keeps
    failing goes there after ``retry.attempts`` tries with reason ``handler_error``. Either way the
    consumer moves on. If a dead letter itself cannot be written the loop stops with the error, leaving
    the record uncommitted. On revocation the processed offsets of the revoked partitions are committed.

    ``settle="record"`` (the default) waits for each record's outputs to be acknowledged before the
    next record, and retries the handler when they are not. ``settle="batch"`` collects the outputs of
    a whole fetched batch, produces them together as record batches and waits for all of them before
    the commit: much higher throughput (one broker round trip per batch, not per record, and far less
    work per record in the client), still never a commit ahead of its outputs; a failed output then
    stops the loop with the error (the batch stays uncommitted and is delivered again), so a handler
    retried in this mode must be idempotent across restarts. The batch's outputs are produced while
    the next batches are handled, and its offsets committed once they are acknowledged, in order (at
    most ``MAX_SETTLING_BATCHES`` settle at a time; a failure stops the loop before anything later is
    committed). A service whose handler shares state with other producing tasks passes its lock as
    ``output_lock``: the loop holds it while it hands deferred outputs to the producer, so they keep
    the order of the changes that caused them. Dead letters are produced at once in either mode.
    Tombstones (null values, deletes on compacted topics) go to ``on_tombstone`` with their key when it
    is given, otherwise to the dead-letter topic as ``malformed``. ``skip``, given the topic, key and
    value, may pass a record over before it is decoded (it is committed like a handled one): for a
    service that can tell from a cheap look that it would ignore the record.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        topics: Sequence[str],
        handler: Handler,
        producer: EnvelopeProducer,
        *,
        group_id: str | None = None,
        retry: RetryPolicy | None = None,
        on_assigned: PartitionsCallback | None = None,
        on_revoked: PartitionsCallback | None = None,
        on_tombstone: TombstoneHandler | None = None,
        isolation_level: str = "read_committed",
        auto_offset_reset: str = "earliest",
        max_records: int = 100,
        poll_timeout_ms: int = 200,
        settle: Literal["record", "batch"] = "record",
        output_lock: asyncio.Lock | None = None,
        skip: Callable[[str, bytes | None, bytes | None], bool] | None = None,
    ) -> None:
        group = group_id or settings.group_id
        if not group:
            raise ValueError("ConsumerLoop needs a consumer group (group_id or MUSTER_KAFKA_GROUP_ID)")
        self.group_id = group
        self._settings = settings
        self._topics = tuple(topics)
        self._handler = handler
        self._producer = producer
        self._retry = retry or RetryPolicy()
        self._on_assigned_cb = on_assigned
        self._on_revoked_cb = on_revoked
        self._on_tombstone = on_tombstone
        self._isolation_level = isolation_level
        self._auto_offset_reset = auto_offset_reset
        self._max_records = max_records
        self._settle_batch = settle == "batch"
        self._outgoing: list[Outgoing] = []  # batch mode: outputs of the batch in hand, not produced yet
        self._in_flight: list[DeliveryFuture | BatchFuture] = []  # batch mode: outputs produced, not settled
        #: batch mode: batches handed over, oldest first, each settling and then committing after the one before
        self._settling: deque[asyncio.Task[None]] = deque()
        self._output_lock = output_lock or asyncio.Lock()
        self._skip = skip
        self._poll_timeout_ms = poll_timeout_ms
        self._consumer: AIOKafkaConsumer | None = None
        self._owned: set[TopicPartition] = set()
        self._processed: dict[TopicPartition, int] = {}
        self._work_lock = asyncio.Lock()
        self._stopping = asyncio.Event()
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
            auto_offset_reset=self._auto_offset_reset,
            isolation_level=self._isolation_level,
        )
        self._consumer = consumer
        try:
            await consumer.start()
            consumer.subscribe(self._topics, listener=_Rebalance(self))
            while not self._stopping.is_set():
                batch = await consumer.getmany(timeout_ms=self._poll_timeout_ms, max_records=self._max_records)
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
                await self._finish_batch(wait=True)
                async with self._work_lock:
                    await self._wait_settled()
            await consumer.stop()
            self._consumer = None
            for sig in installed:
                running.remove_signal_handler(sig)

    async def _process(self, record: Record) -> None:
        tp = TopicPartition(record.topic, record.partition)
        async with self._work_lock:
            if tp not in self._owned:
                return  # revoked while the batch was in hand: the new owner re-reads it
            if self._skip is not None and self._skip(record.topic, record.key, record.value):
                self.stats.passed_over += 1
            else:
                await self._handle_record(record)
            self._processed[tp] = record.offset + 1

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
        await self._with_retries(record, lambda delivery: self._handler(envelope, delivery))

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
                deferred=self._settle_batch,
            )
            try:
                await call(delivery)
                if self._settle_batch:
                    self._outgoing.extend(delivery.take_outgoing())
                    self._in_flight.extend(delivery.take_pending())
                else:
                    await delivery.settle()
            except DecodeError as exc:
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

    async def produce_deferred(self) -> None:
        """Batch mode: produce the outputs the batch in hand has caused so far; they are still settled
        before its commit. A service that also produces outside the loop (a scheduling cycle) calls this
        first, holding its ``output_lock``, so that its messages follow, on every partition, those its
        inputs caused before them."""
        self._in_flight = await self._hand_over()

    async def _hand_over(self) -> list[DeliveryFuture | BatchFuture]:
        """Produce the deferred outputs and take them, with the outputs already in flight, from the loop
        (the caller holds the output lock). If producing fails, nothing handled so far is committed."""
        outgoing, self._outgoing = self._outgoing, []
        pending, self._in_flight = self._in_flight, []
        try:
            if outgoing:
                pending += await self._producer.send_many(outgoing)
        except BaseException:
            self._clear_batch()
            raise
        return pending

    async def _finish_batch(self, *, wait: bool = False) -> None:
        """After a fetched batch: commit it (record mode), or hand it over to be settled and committed
        while the next ones are handled (batch mode). While the service holds the output lock (a cycle
        producing), the loop does not wait for it: the batch is handed over with a later one (unless
        ``wait``, or too much is waiting already)."""
        async with self._work_lock:
            if not self._settle_batch:
                await self._commit_processed()
                return
            while self._settling and (self._settling[0].done() or len(self._settling) >= MAX_SETTLING_BATCHES):
                await self._wait_oldest()  # a failure surfaces here, at the latest one poll later
            if self._output_lock.locked() and not wait and len(self._outgoing) < MAX_DEFERRED_OUTPUTS:
                return
            async with self._output_lock:
                pending = await self._hand_over()
                offsets, self._processed = self._processed, {}
            if pending or offsets:
                previous = self._settling[-1] if self._settling else None
                self._settling.append(asyncio.create_task(self._settle_and_commit(previous, pending, offsets),
                                                          name=f"{self.group_id}: settle"))

    async def _settle_and_commit(self, previous: asyncio.Task[None] | None,
                                 pending: list[DeliveryFuture | BatchFuture],
                                 offsets: dict[TopicPartition, int]) -> None:
        await asyncio.gather(*pending)
        if previous is not None:
            await asyncio.wait({previous})  # commits in order
            previous.result()  # an earlier batch failed: neither it nor this one is committed
        try:
            await self._commit(offsets)
        except Exception as exc:  # e.g. a rebalance began: the records are delivered again, nothing is lost
            log.warning("commit of a settled batch failed (its records will be delivered again): %r", exc)

    async def _wait_oldest(self) -> None:
        """Wait for the oldest batch being settled; if its outputs (or an earlier batch's) failed, nothing
        handled since is committed either (the error is raised and the loop stops; those records are
        delivered again)."""
        task = self._settling.popleft()
        try:
            await task
        except BaseException:
            self._clear_batch()
            for later in self._settling:
                later.cancel()
            self._settling.clear()
            raise

    async def _wait_settled(self) -> None:
        """Wait until every batch handed over is settled and committed (raises the first failure)."""
        while self._settling:
            await self._wait_oldest()

    def _clear_batch(self) -> None:
        """Forget the batch in hand: it must not be committed (its outputs, or an earlier batch's, failed)."""
        self._processed.clear()
        self._outgoing.clear()
        self._in_flight.clear()

    async def _settle_in_flight(self) -> None:
        """Produce the outputs of the batch in hand and wait for them (batch mode); raises the first failure."""
        async with self._output_lock:
            pending = await self._hand_over()
        if pending:
            try:
                await asyncio.gather(*pending)
            except BaseException:
                self._processed.clear()  # never commit a batch whose outputs may be missing
                raise

    async def _commit_processed(self, only: Collection[TopicPartition] | None = None) -> None:
        selected = {tp: offset for tp, offset in self._processed.items() if only is None or tp in only}
        await self._commit(selected)
        for tp in selected:
            self._processed.pop(tp, None)

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        consumer = self._consumer
        if consumer is None or not offsets:
            return
        await consumer.commit({tp: OffsetAndMetadata(offset, "") for tp, offset in offsets.items()})
        self.stats.commits += 1

    async def _on_revoked(self, revoked: Collection[TopicPartition]) -> None:
        async with self._work_lock:
            try:
                await self._wait_settled()
                await self._settle_in_flight()
                await self._commit_processed(only=revoked)
            except Exception:
                log.exception("commit on revocation failed; the next owner re-delivers those records")
            self._owned.difference_update(revoked)
            for tp in revoked:
                self._processed.pop(tp, None)
        if self._on_revoked_cb is not None:
            await self._on_revoked_cb(revoked)

    async def _on_assigned(self, assigned: Collection[TopicPartition]) -> None:
        self._owned.update(assigned)
        if self._on_assigned_cb is not None:
            await self._on_assigned_cb(assigned)
        self._ready.set()


def _where(record: Record) -> str:
    return f"{record.topic}[{record.partition}]@{record.offset}"
