"""A fake cluster in place of the dispatcher, kubesim and the node-state watcher.

kubesim's HTTP API is not built for thousands of nodes, so the benchmarks publish the nodes' capacity
straight onto ``muster.capacity`` and answer the queue manager's decisions here: a ``JobAdmitted`` is
taken as the Kubernetes Job created (the moment is recorded), answered with ``RunStarted`` at once and
``RunSucceeded`` after the job's runtime; a ``JobPreemptionRequested`` is answered with ``JobStopped``
(the victim stopped, grace period zero, its pending ``RunSucceeded`` called off: a requeued job runs its
whole runtime again when it is admitted again). The moments are taken with this process's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.system.measure import Timeline
from schemas.codec import DecodeError, decode
from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobRejected, PlacementPlan
from schemas.envelope import Message, make_envelope
from schemas.runs import JobStopped, RunStarted, RunSucceeded
from schemas.topics import DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC, TOPICS
from services.runtime.kafka import EnvelopeProducer, KafkaSettings, Outgoing

log = logging.getLogger(__name__)

PRODUCER = "bench_fake_cluster"
#: how often ``wait_until`` re-evaluates its condition while decisions stream in
CHECK_S = 0.05

RuntimeOf = Callable[[str], float | None]  # job id -> seconds until RunSucceeded (None: runs until stopped)


class FakeCluster:
    """Consumes ``muster.decisions`` from its end and plays the cluster's part; records a ``Timeline``."""

    def __init__(self, settings: KafkaSettings, timeline: Timeline, runtime_of: RuntimeOf, *,
                 clock: Callable[[], float]) -> None:
        self._settings = settings
        self.timeline = timeline
        self._runtime_of = runtime_of
        self._clock = clock
        self.producer = EnvelopeProducer(settings.with_identity(client_id="bench-fake-cluster"))
        self.admitted = 0
        self.rejected: dict[str, str] = {}
        self.placements: dict[str, PlacementPlan] = {}
        self.running: set[str] = set()
        self._changed = asyncio.Event()
        self._outbox: list[tuple[str, Message]] = []  # answers not produced yet
        self._due = asyncio.Event()  # the outbox has something
        self._timers: dict[str, asyncio.TimerHandle] = {}  # job id -> its RunSucceeded to come

    async def run(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        """Follow the decisions topic from its current end until ``stop``."""
        consumer = AIOKafkaConsumer(**self._settings.client_options(), enable_auto_commit=False,
                                    isolation_level="read_committed")
        await consumer.start()
        try:
            partitions = [TopicPartition(DECISIONS_TOPIC, p) for p in range(TOPICS[DECISIONS_TOPIC].partitions)]
            consumer.assign(partitions)
            await consumer.seek_to_end(*partitions)
            for tp in partitions:
                await consumer.position(tp)
            ready.set()
            sender = asyncio.create_task(self._send_loop(stop), name="bench fake cluster: answers")
            try:
                while not stop.is_set():
                    batch = await consumer.getmany(timeout_ms=50, max_records=2000)
                    for records in batch.values():
                        for record in records:
                            self._on_record(record.value)
            finally:
                self._due.set()
                await sender
        finally:
            for timer in self._timers.values():
                timer.cancel()
            await consumer.stop()

    async def _send_loop(self, stop: asyncio.Event) -> None:
        """Produce the answers gathered in the outbox, all at once each time (as record batches)."""
        while True:
            await self._due.wait()
            self._due.clear()
            items, self._outbox = self._outbox, []
            if not items:
                if stop.is_set():
                    return
                continue
            futures = await self.producer.send_many(Outgoing(topic, make_envelope(message, PRODUCER))
                                                    for topic, message in items)
            now = self._clock()
            for _, message in items:
                if isinstance(message, RunSucceeded):
                    self.running.discard(message.job_id)
                    self.timeline.finished.setdefault(message.job_id, now)
                    self.timeline.release(message.job_id, now)
            self._changed.set()
            for future in futures:
                future.add_done_callback(_log_failure)

    def _on_record(self, raw: bytes | None) -> None:
        now = self._clock()
        try:
            envelope = decode(raw, topic=DECISIONS_TOPIC)
        except DecodeError as exc:
            log.warning("undecodable decision: %s", exc)
            return
        message = envelope.payload
        if isinstance(message, JobAdmitted):
            self.admitted += 1
            self.timeline.decided.setdefault(message.job_id, envelope.occurred_at.timestamp())
            self.timeline.hold(message.job_id, envelope.occurred_at.timestamp())
            self.timeline.created.setdefault(message.job_id, now)
            self.running.add(message.job_id)
            self.placements[message.job_id] = message.placement
            self._send(RUNS_TOPIC, RunStarted(job_id=message.job_id, attempt=message.attempt, cluster=_cluster(
                message), observed_at=_utc(now), pods_running=message.replicas, pods_total=message.replicas))
            runtime = self._runtime_of(message.job_id)
            if runtime is not None:
                self._later(message.job_id, runtime, RUNS_TOPIC, RunSucceeded(
                    job_id=message.job_id, attempt=message.attempt, cluster=_cluster(message), observed_at=_utc(now)))
        elif isinstance(message, JobPreemptionRequested):
            self.timeline.preempt_requested.setdefault(message.job_id, now)
            self._send(DISPATCHES_TOPIC, JobStopped(job_id=message.job_id, attempt=message.attempt,
                                                    cluster=message.cluster, observed_at=_utc(now),
                                                    reason=message.reason, requeue=message.requeue))
            self.timeline.stopped.setdefault(message.job_id, self._clock())
            self.timeline.release(message.job_id, self._clock(), evicted=True)
            self.running.discard(message.job_id)
            timer = self._timers.pop(message.job_id, None)
            if timer is not None:
                timer.cancel()
        elif isinstance(message, JobRejected):
            self.rejected[message.job_id] = message.reason
        self._changed.set()

    def _send(self, topic: str, message: Message) -> None:
        """Answer with ``message`` (produced by the send loop with the other answers of the moment)."""
        self._outbox.append((topic, message))
        self._due.set()

    def _later(self, job_id: str, delay_s: float, topic: str, message: Message) -> None:
        def fire() -> None:
            self._timers.pop(job_id, None)
            self._send(topic, message)

        self._timers[job_id] = asyncio.get_running_loop().call_later(delay_s, fire)

    async def wait_until(self, condition: Callable[[], bool], *, within: float) -> bool:
        """Wait until ``condition()`` holds after some decision (False after ``within`` seconds).

        Only the moment the wait ends is delayed by up to ``CHECK_S``; the timeline's stamps are not.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while not condition():
                    self._changed.clear()
                    await self._changed.wait()
                    # a condition over tens of thousands of jobs is costly: look at most every CHECK_S
                    await asyncio.sleep(CHECK_S)
                return True
        return condition()

    def notify(self) -> None:
        """Wake ``wait_until`` (a run ended, or a caller's own condition changed)."""
        self._changed.set()


def _cluster(message: JobAdmitted) -> str:
    return message.placement.cluster


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("fake cluster could not produce: %r", future.exception())
