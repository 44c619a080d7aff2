"""An in-memory stand-in for the envelope producer behind ``Delivery.emit``."""

from __future__ import annotations

import asyncio

from aiokafka.structs import RecordMetadata, TopicPartition

from schemas.envelope import Envelope


class MemoryProducer:
    """Records what was sent; every send is acknowledged at once (or fails when ``fail`` is set)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Envelope]] = []
        self.fail = False

    async def send(self, topic: str, envelope: Envelope, *, key: str | None = None) -> asyncio.Future[RecordMetadata]:
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        if self.fail:
            future.set_exception(ConnectionError("broker unavailable"))
        else:
            self.sent.append((topic, envelope))
            future.set_result(RecordMetadata(topic, 0, TopicPartition(topic, 0), len(self.sent), 0, 0, 0))
        return future
