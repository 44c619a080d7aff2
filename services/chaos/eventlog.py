"""The system's output topics read whole, from the beginning to their current end."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.codec import DecodeError, decode
from schemas.envelope import Envelope
from schemas.topics import DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC, STATUS_TOPIC, TOPICS
from services.runtime.kafka import KafkaSettings
from services.runtime.kafka.headers import DLQ_DETAIL, DLQ_REASON, DLQ_TOPIC
from services.runtime.kafka.reader import read_to_end

LOG_TOPICS = (STATUS_TOPIC, DECISIONS_TOPIC, RUNS_TOPIC, DISPATCHES_TOPIC)


@dataclass(frozen=True)
class LoggedEvent:
    """One decoded envelope, the topic it was read from, and its position there."""

    topic: str
    partition: int
    offset: int
    envelope: Envelope


@dataclass(frozen=True)
class DeadLetter:
    """One record of a dead-letter topic: where it sits, the topic it was taken from, and why (its headers)."""

    topic: str
    partition: int
    offset: int
    source: str
    reason: str
    detail: str


@dataclass
class EventLog:
    """Every event of the read topics, ordered by when it occurred; ``undecodable`` counts bad records,
    ``dead`` holds the records of their dead-letter topics, and ``offsets`` every offset read per
    (topic, partition), tombstones included, so a record removed by compaction shows as a gap."""

    events: list[LoggedEvent]
    undecodable: int = 0
    dead: list[DeadLetter] = field(default_factory=list)
    offsets: dict[tuple[str, int], list[int]] = field(default_factory=dict)

    @property
    def dead_letters(self) -> int:
        return len(self.dead)


def _header(headers: tuple[tuple[str, bytes], ...], name: str) -> str:
    return next((value.decode(errors="replace") for key, value in headers if key == name), "")


async def read_log(settings: KafkaSettings, topics: tuple[str, ...] = LOG_TOPICS, *,
                   within_s: float = 120.0) -> EventLog:
    """Read ``topics`` (and count their dead-letter topics) from offset 0 up to the end seen on entry."""
    dlqs = {TOPICS[t].dlq: TOPICS[t].partitions for t in topics}
    records = await read_to_end(settings, {**{t: TOPICS[t].partitions for t in topics}, **dlqs}, within_s=within_s)
    events: list[LoggedEvent] = []
    log = EventLog(events)
    for record in records:
        log.offsets.setdefault((record.topic, record.partition), []).append(record.offset)
        if record.topic in dlqs:
            log.dead.append(DeadLetter(record.topic, record.partition, record.offset,
                                       _header(record.headers, DLQ_TOPIC), _header(record.headers, DLQ_REASON),
                                       _header(record.headers, DLQ_DETAIL)))
        elif record.value is not None:
            try:
                envelope = decode(record.value, topic=record.topic)
            except DecodeError:
                log.undecodable += 1
                continue
            events.append(LoggedEvent(record.topic, record.partition, record.offset, envelope))
    events.sort(key=lambda e: (e.envelope.occurred_at, e.topic, e.partition, e.offset))
    return log
