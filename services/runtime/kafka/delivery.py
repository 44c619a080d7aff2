"""What a handler receives with each envelope: where it came from, and a way to emit follow-up messages."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

from aiokafka.structs import TopicPartition

from schemas.envelope import Envelope
from services.runtime.kafka.producer import BatchFuture, DeliveryFuture, EnvelopeProducer, Outgoing


class Refused(Exception):
    """Raised by a handler for a record it will not accept (a forged intent, say): the loop sends the record to
    the dead-letter topic with ``reason`` and ``detail`` at once, without retrying, and moves on."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class Delivery:
    """One consumed record's origin (topic, partition, offset) and the handler's outbox.

    ``emit`` buffers a message; the loop awaits every emitted message's acknowledgement before it
    commits the input offset, so an input is never committed ahead of its outputs. With ``deferred``
    (the loop's batch mode) ``emit`` only collects the messages: the loop produces those of a whole
    fetched batch together (``take_outgoing``), and a handler attempt that fails has produced nothing.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    timestamp_ms: int
    attempt: int
    _producer: EnvelopeProducer
    deferred: bool = False
    _pending: list[DeliveryFuture | BatchFuture] = field(default_factory=list)
    _outgoing: list[Outgoing] = field(default_factory=list)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    async def emit(self, topic: str, envelope: Envelope, *, key: str | None = None) -> None:
        """Produce ``envelope`` to ``topic`` as part of handling this record."""
        if self.deferred:
            self._outgoing.append(Outgoing(topic, envelope, key))
        else:
            self._pending.append(await self._producer.send(topic, envelope, key=key))

    def take_pending(self) -> list[DeliveryFuture | BatchFuture]:
        """Hand the futures of what was already produced to the caller, who then owns waiting for them."""
        pending, self._pending = self._pending, []
        return pending

    def take_outgoing(self) -> list[Outgoing]:
        """Hand the deferred messages to the caller, who then owns producing them."""
        outgoing, self._outgoing = self._outgoing, []
        return outgoing

    async def settle(self) -> None:
        """Produce what is deferred, then wait for every emitted message to be acknowledged (raises the
        first failure)."""
        pending, self._pending = self._pending, []
        if self._outgoing:
            pending += await self._producer.send_many(self.take_outgoing())
        if pending:
            await asyncio.gather(*pending)


Handler = Callable[[Envelope, Delivery], Awaitable[None]]
TombstoneHandler = Callable[[bytes | None, Delivery], Awaitable[None]]
PartitionsCallback = Callable[[Collection[TopicPartition]], Awaitable[None]]
