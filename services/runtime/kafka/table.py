"""``CompactedTable``: a compacted topic read from the beginning into memory, then followed.

Not a consumer-group member and never commits: every replica of a service builds the whole table
(status views, capacity, configuration, usage). ``wait_caught_up`` returns once everything that was
in the topic when the table started has been folded in. With ``keep_rows=False`` it keeps nothing itself
and only calls ``on_change`` for every record: a way to fold a whole delete-policy topic from its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import UnknownTopicOrPartitionError
from aiokafka.structs import TopicPartition

from schemas.codec import DecodeError, decode
from schemas.envelope import Envelope
from services.runtime.kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

ChangeCallback = Callable[[str, Envelope | None], Awaitable[None] | None]
"""Called with (key, envelope) for every change; envelope None for a tombstone (key deleted)."""


class CompactedTable(Mapping[str, Envelope]):
    """Latest envelope per key of one compacted topic. A mapping of key -> envelope."""

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        *,
        on_change: ChangeCallback | None = None,
        poll_timeout_ms: int = 200,
        keep_rows: bool = True,
    ) -> None:
        self._settings = settings
        self.topic = topic
        self._on_change = on_change
        self._poll_timeout_ms = poll_timeout_ms
        self._keep_rows = keep_rows
        self._rows: dict[str, Envelope] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._targets: dict[TopicPartition, int] = {}
        self._caught_up = asyncio.Event()
        self.skipped = 0  # records that could not be decoded (logged, not fatal)

    # Mapping
    def __getitem__(self, key: str) -> Envelope:
        return self._rows[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    async def start(self) -> None:
        # Without a group id, aiokafka assigns every partition of the subscribed topic to this consumer.
        consumer = AIOKafkaConsumer(
            self.topic, **self._settings.client_options(), group_id=None, enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self._consumer = consumer
        try:
            await consumer.start()
            for _ in range(50):
                if consumer.assignment():
                    break
                await asyncio.sleep(0.1)
            tps = sorted(consumer.assignment())
            if not tps:
                raise RuntimeError(f"topic {self.topic} does not exist")
            ends = await consumer.end_offsets(tps)
        except UnknownTopicOrPartitionError:
            await self.close()
            raise RuntimeError(f"topic {self.topic} does not exist") from None
        except BaseException:
            await self.close()
            raise
        self._targets = {tp: off for tp, off in ends.items() if off > 0}
        if not self._targets:
            self._caught_up.set()

    async def wait_caught_up(self) -> None:
        """Wait (wrap in ``asyncio.timeout`` to bound it) until the start-time contents are folded in."""
        await self._caught_up.wait()

    async def _apply(self, key: str, value: bytes | None) -> None:
        envelope: Envelope | None = None
        if value is None:
            self._rows.pop(key, None)
        else:
            try:
                envelope = decode(value, topic=self.topic)
            except DecodeError as exc:
                self.skipped += 1
                log.warning("%s: skipping undecodable record for key %r: %s", self.topic, key, exc)
                return
            if self._keep_rows:
                self._rows[key] = envelope
        if self._on_change is not None:
            result = self._on_change(key, envelope)
            if result is not None:
                await result

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the topic until ``stop`` is set (a ``ServiceRunner`` background task)."""
        if self._consumer is None:
            await self.start()
        consumer = self._consumer
        assert consumer is not None
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=self._poll_timeout_ms, max_records=1000)
                for records in batches.values():
                    for record in records:
                        key = record.key.decode() if record.key is not None else ""
                        await self._apply(key, record.value)
                if self._targets:
                    for tp, target in list(self._targets.items()):
                        if await consumer.position(tp) >= target:
                            del self._targets[tp]
                    if not self._targets:
                        self._caught_up.set()
        finally:
            await self.close()

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()
