"""Topics followed live by a reader outside Muster's services (a dashboard, a notebook): records in order per
partition, from a consumer group's committed offsets or from the beginning or the end, with commits the
reader decides (after it handled what it was given: at-least-once). No decoding, no dead letters: the
reader's own concern."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from services.runtime.kafka.settings import KafkaSettings

__all__ = ["FollowedRecord", "KafkaError", "RecordFollower"]

Start = Literal["beginning", "now"]


@dataclass(frozen=True)
class FollowedRecord:
    """One record as stored: where it was read, its key (a compacted topic's identity: a job id, a queue) and
    its undecoded value (None for a tombstone)."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: bytes | None


class RecordFollower:
    """Follows ``topics``: ``records()`` yields every record as it arrives, ``commit()`` stores the offsets of
    the records yielded so far as the group's (with ``group``; a no-op without). A group resumes where it
    committed; ``start`` says where a reader without a group, or a group that never committed, begins."""

    def __init__(self, settings: KafkaSettings, topics: Sequence[str], *, group: str | None = None,
                 start: Start = "beginning") -> None:
        if not topics:
            raise ValueError("follow at least one topic")
        self._settings = settings
        self._topics = tuple(topics)
        self._group = group
        self._consumer = AIOKafkaConsumer(
            *self._topics, **settings.client_options(), group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest" if start == "beginning" else "latest")
        self._yielded: dict[TopicPartition, int] = {}

    async def start(self) -> None:
        try:
            await self._consumer.start()
        except BaseException:
            await self._consumer.stop()
            raise

    async def stop(self) -> None:
        await self._consumer.stop()

    async def records(self, batch_timeout_ms: int = 500) -> AsyncIterator[FollowedRecord]:
        while True:
            batches = await self._consumer.getmany(timeout_ms=batch_timeout_ms)
            for tp, batch in batches.items():
                for record in batch:
                    key = record.key.decode(errors="replace") if record.key is not None else None
                    self._yielded[tp] = record.offset + 1
                    yield FollowedRecord(tp.topic, tp.partition, record.offset, key, record.value)

    async def commit(self) -> None:
        """The offsets after the records yielded so far, committed as the group's (nothing without a group)."""
        if self._group is None or not self._yielded:
            return
        offsets = dict(self._yielded)
        await self._consumer.commit(offsets)
