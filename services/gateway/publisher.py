"""Where the gateway's messages go: a port with a Kafka implementation (tests use an in-memory one)."""

from __future__ import annotations

from typing import Protocol

from schemas.envelope import Envelope
from services.runtime.kafka import EnvelopeProducer


class Publisher(Protocol):
    async def publish(self, topic: str, envelope: Envelope) -> None:
        """Return once the message is durably accepted."""


class KafkaPublisher:
    """Publishes through the idempotent producer and waits for the broker's acknowledgement."""

    def __init__(self, producer: EnvelopeProducer) -> None:
        self._producer = producer

    async def publish(self, topic: str, envelope: Envelope) -> None:
        await self._producer.send_and_wait(topic, envelope)
