"""``StatusConsumer``: Muster's status topics read directly, as typed events, for dashboards, notebooks and other
services that would rather follow Kafka than the gateway's stream.

``muster.status.v1`` is compacted and keyed by job id: read from the beginning, it holds the latest status of
every job the queue manager still knows, then every change as it happens. Changes of one job arrive in order
(one key, one partition); changes of different jobs may interleave in any order. A job's latest event is its
state; an event with an older ``updated_at`` than one already seen for the job is a repeat (at-least-once).

::

    async with StatusConsumer(bootstrap="kafka:9092", group="my-dashboard") as statuses:
        async for event in statuses:
            if isinstance(event, JobStatus):
                show(event.status.job_id, event.status.state)

With ``group`` the consumer resumes after what it handed out before (offsets committed every
``commit_interval_s`` and on close, only for events already handed out: a restart may repeat a few, never skip
one); without a group, or for a group that never committed, ``start`` says where to begin: ``"beginning"``
(every job's latest status, then live) or ``"now"`` (only changes from now on).

Tolerant by design: fields it does not know (a newer queue manager's) are ignored, a tombstone (a job's
record deleted by an operator) is a ``JobForgotten``, and a record it cannot read (an unknown message type,
a newer schema version) is skipped and counted in ``skipped``, never fatal.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self

from muster.client.errors import TransportError
from schemas.codec import DecodeError, decode
from schemas.status import JobStatusChanged
from schemas.topics import STATUS_TOPIC, USAGE_TOPIC
from schemas.usage import BudgetStatusReported, BurstSpendReported, ChargebackRecorded, QueueUsageReported
from services.runtime.kafka import FollowedRecord, KafkaSettings, RecordFollower
from services.runtime.kafka.follow import KafkaError

#: the topics a status consumer may follow
STATUS_TOPICS = (STATUS_TOPIC, USAGE_TOPIC)


@dataclass(frozen=True)
class JobStatus:
    """A job's status changed; ``status`` is its whole latest view."""

    status: JobStatusChanged
    offset: int
    partition: int


@dataclass(frozen=True)
class JobForgotten:
    """A tombstone: the job's status record was deleted (its history is gone from the topic)."""

    job_id: str


@dataclass(frozen=True)
class UsageReport:
    """A report of the quota accountant (``muster.usage.v1``): a queue's usage, a tenant's budget, a charge, a queue's
    burst spend."""

    report: QueueUsageReported | BudgetStatusReported | ChargebackRecorded | BurstSpendReported


StatusEvent = JobStatus | JobForgotten | UsageReport


@dataclass
class Skipped:
    """Records a consumer could not read, by reason (``unknown_type``, ``unsupported_version``...)."""

    count: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)

    def add(self, reason: str) -> None:
        self.count += 1
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1


class StatusConsumer:
    """Typed events of ``topics`` (``muster.status.v1`` by default; ``muster.usage.v1`` too if asked)."""

    def __init__(self, *, bootstrap: str | None = None, settings: KafkaSettings | None = None,
                 group: str | None = None, start: Literal["beginning", "now"] = "beginning",
                 topics: Sequence[str] = (STATUS_TOPIC,), commit_interval_s: float = 1.0) -> None:
        if (bootstrap is None) == (settings is None):
            raise ValueError("give bootstrap (an open cluster) or settings (TLS, SASL), exactly one")
        unknown = sorted(set(topics) - set(STATUS_TOPICS))
        if unknown:
            raise ValueError(f"a status consumer follows {', '.join(STATUS_TOPICS)}, not {', '.join(unknown)}")
        self._settings = settings or KafkaSettings(bootstrap=bootstrap or "", client_id="muster-status-consumer")
        self._follower = RecordFollower(self._settings, topics, group=group, start=start)
        self._commit_interval_s = commit_interval_s
        self._last_commit = time.monotonic()
        self.skipped = Skipped()

    async def start(self) -> None:
        try:
            await self._follower.start()
        except KafkaError as exc:
            raise TransportError(f"cannot reach Kafka at {self._settings.bootstrap}: {exc}") from exc

    async def stop(self, *, commit: bool = True) -> None:
        """Commit what was handed out (with a group; not with ``commit=False``), then leave."""
        try:
            if commit:
                await self._follower.commit()
        finally:
            await self._follower.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        # a handler that raised may not have finished its event: leave it to be read again
        await self.stop(commit=exc is None)

    async def commit(self) -> None:
        """Commit now the offsets of every event handed out so far (with a group)."""
        await self._follower.commit()
        self._last_commit = time.monotonic()

    def __aiter__(self) -> AsyncIterator[StatusEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[StatusEvent]:
        try:
            async for record in self._follower.records():
                event = self._typed(record)
                if event is not None:
                    yield event
                if time.monotonic() - self._last_commit >= self._commit_interval_s:
                    await self.commit()  # the event above was handled: the caller asked for the next
        except KafkaError as exc:
            raise TransportError(f"reading {STATUS_TOPIC} broke: {exc}") from exc

    def _typed(self, record: FollowedRecord) -> StatusEvent | None:
        if record.value is None:
            if record.topic == STATUS_TOPIC and record.key is not None:
                return JobForgotten(record.key)
            return None  # a usage report's tombstone: nothing a reader needs
        try:
            payload = decode(record.value, topic=record.topic).payload
        except DecodeError as exc:
            self.skipped.add(exc.reason)
            return None
        if isinstance(payload, JobStatusChanged):
            return JobStatus(payload, record.offset, record.partition)
        if isinstance(payload, QueueUsageReported | BudgetStatusReported | ChargebackRecorded | BurstSpendReported):
            return UsageReport(payload)
        self.skipped.add("unexpected_type")
        return None
