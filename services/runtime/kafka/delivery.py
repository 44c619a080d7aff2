"""What a handler receives with each envelope: where it came from, and a way to emit follow-up messages."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

from aiokafka.structs import TopicPartition

from schemas.envelope import Envelope
from services.runtime.kafka.producer import DeliveryFuture, EnvelopeProducer


@dataclass
class Delivery:
    """One consumed record's origin (topic, partition, offset) and the handler's outbox.

    ``emit`` buffers a message; the loop awaits every emitted message's acknowledgement before it
    commits the input offset, so an input is never committed ahead of its outputs.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    timestamp_ms: int
    attempt: int
    _producer: EnvelopeProducer
    _pending: list[DeliveryFuture] = field(default_factory=list)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    async def emit(self, topic: str, envelope: Envelope, *, key: str | None = None) -> None:
        """Produce ``envelope`` to ``topic`` as part of handling this record."""
        self._pending.append(await self._producer.send(topic, envelope, key=key))

    def take_pending(self) -> list[DeliveryFuture]:
        """Hand the emitted messages' futures to the caller, who then owns waiting for them."""
        pending, self._pending = self._pending, []
        return pending

    async def settle(self) -> None:
        """Wait for every emitted message to be acknowledged (raises the first failure)."""
        pending, self._pending = self._pending, []
        if pending:
            await asyncio.gather(*pending)


Handler = Callable[[Envelope, Delivery], Awaitable[None]]
TombstoneHandler = Callable[[bytes | None, Delivery], Awaitable[None]]
PartitionsCallback = Callable[[Collection[TopicPartition]], Awaitable[None]]
