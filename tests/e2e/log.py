"""Every envelope on the system's output topics, read in the background from the beginning."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer

from schemas.codec import DecodeError, decode
from schemas.envelope import Envelope, Message
from schemas.status import JobStatusChanged
from schemas.topics import DECISIONS_TOPIC, DISPATCHES_TOPIC, DLQ_SUFFIX, RUNS_TOPIC, STATUS_TOPIC, TOPICS, dlq_topic
from services.runtime.kafka import KafkaSettings
from tests.integration.builders import consumer

OUTPUT_TOPICS = (DECISIONS_TOPIC, STATUS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)


class TopicLog:
    """Decisions, status, run and dispatch messages in arrival order (per partition: per job), and every
    record of any dead-letter topic (``dead_letters``: topic and raw value)."""

    def __init__(self, settings: KafkaSettings, topics: tuple[str, ...] = OUTPUT_TOPICS) -> None:
        self._consumer: AIOKafkaConsumer = consumer(settings, *topics, *(dlq_topic(t) for t in TOPICS))
        self.envelopes: list[Envelope] = []
        self.dead_letters: list[tuple[str, bytes | None]] = []
        self.undecodable = 0
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()

    async def start(self) -> None:
        await self._consumer.start()
        self._task = asyncio.create_task(self._read(), name="e2e topic log")

    async def _read(self) -> None:
        while True:
            batch = await self._consumer.getmany(timeout_ms=100)
            for records in batch.values():
                for r in records:
                    if r.topic.endswith(DLQ_SUFFIX):
                        self.dead_letters.append((r.topic, r.value))
                    elif r.value is not None:
                        try:
                            self.envelopes.append(decode(r.value, topic=r.topic))
                        except DecodeError:
                            self.undecodable += 1  # hostile-input tests write such records on purpose
            if batch:
                async with self._changed:
                    self._changed.notify_all()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()

    def messages(self, kind: type[Message], **fields: Any) -> list[Any]:
        """Payloads of type ``kind`` whose attributes equal ``fields``, in arrival order."""
        return [e.payload for e in self.envelopes if isinstance(e.payload, kind)
                and all(getattr(e.payload, k, None) == v for k, v in fields.items())]

    def of_job(self, job_id: str) -> list[Any]:
        """Every payload about ``job_id``, in arrival order."""
        return [e.payload for e in self.envelopes if getattr(e.payload, "job_id", None) == job_id]

    def states(self, job_id: str) -> list[str]:
        """The job's published states, consecutive repeats folded."""
        seen: list[str] = []
        for status in self.messages(JobStatusChanged, job_id=job_id):
            if not seen or seen[-1] != status.state:
                seen.append(status.state)
        return seen

    def index(self, kind: type[Message], **fields: Any) -> int:
        """Position in the log of the first ``kind`` message matching ``fields`` (-1: none)."""
        for i, e in enumerate(self.envelopes):
            if isinstance(e.payload, kind) and all(getattr(e.payload, k, None) == v for k, v in fields.items()):
                return i
        return -1

    async def wait_until(self, condition: Callable[[], bool], *, within: float = 60.0, what: str = "") -> None:
        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(condition)
        except TimeoutError:
            raise AssertionError(f"not within {within}s: {what or condition}") from None

    async def wait_for(self, kind: type[Message], *, count: int = 1, within: float = 60.0,
                       **fields: Any) -> list[Any]:
        await self.wait_until(lambda: len(self.messages(kind, **fields)) >= count, within=within,
                              what=f"{count} x {kind.__name__} {fields}")
        return self.messages(kind, **fields)
