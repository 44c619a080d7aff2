"""In-memory stand-ins for the Kafka side of the dispatcher: a recording producer and deliveries from it."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, cast

from aiokafka.structs import RecordMetadata

from schemas.envelope import Envelope
from schemas.topics import DECISIONS_TOPIC
from services.runtime.kafka import Delivery, EnvelopeProducer


class RecordingProducer:
    """Accepts every envelope at once and keeps ``(topic, envelope)`` in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Envelope]] = []

    async def send(self, topic: str, envelope: Envelope, *, key: str | None = None) -> asyncio.Future[Any]:
        self.sent.append((topic, envelope))
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(RecordMetadata(topic, 0, None, len(self.sent) - 1, 0, 0, None))
        return done

    async def send_and_wait(self, topic: str, envelope: Envelope, *, key: str | None = None) -> Any:
        return await (await self.send(topic, envelope, key=key))

    def payloads(self, kind: type[Any] | None = None) -> list[Any]:
        return [e.payload for _, e in self.sent if kind is None or isinstance(e.payload, kind)]

    def as_producer(self) -> EnvelopeProducer:
        return cast(EnvelopeProducer, self)


_offsets = itertools.count()


def delivery(producer: RecordingProducer, topic: str = DECISIONS_TOPIC, attempt: int = 1) -> Delivery:
    return Delivery(topic=topic, partition=0, offset=next(_offsets), key=None, timestamp_ms=0, attempt=attempt,
                    _producer=producer.as_producer())
