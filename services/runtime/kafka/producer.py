"""``EnvelopeProducer``: an idempotent aiokafka producer that writes JSON envelopes."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Self

from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from schemas.codec import encode
from schemas.envelope import Envelope
from services.runtime.kafka.headers import Headers, envelope_headers
from services.runtime.kafka.settings import KafkaSettings

DeliveryFuture = asyncio.Future[RecordMetadata]


class EnvelopeProducer:
    """Idempotent producer (``acks=all``): key = the message's partition key, value = encoded envelope.

    ``send`` returns once the record is buffered; its result is a future that completes when the broker
    has acknowledged it. Await those futures before committing the input that caused them.
    """

    def __init__(self, settings: KafkaSettings, *, linger_ms: int = 5, **producer_options: Any) -> None:
        self._settings = settings
        self._options = producer_options
        self._linger_ms = linger_ms
        self._producer: AIOKafkaProducer | None = None

    @property
    def started(self) -> bool:
        return self._producer is not None

    async def start(self) -> None:
        if self._producer is not None:
            return
        producer = AIOKafkaProducer(
            **self._settings.client_options(),
            acks="all",
            enable_idempotence=True,
            linger_ms=self._linger_ms,
            **self._options,
        )
        await producer.start()
        self._producer = producer

    async def stop(self) -> None:
        """Flush what is buffered and close."""
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _require(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("EnvelopeProducer is not started")
        return self._producer

    async def send(self, topic: str, envelope: Envelope, *, key: str | None = None) -> DeliveryFuture:
        """Buffer one envelope (key defaults to ``envelope.key()``); returns its delivery future."""
        record_key = envelope.key() if key is None else key
        return await self.send_raw(
            topic, encode(envelope), key=record_key.encode(), headers=envelope_headers(envelope)
        )

    async def send_and_wait(self, topic: str, envelope: Envelope, *, key: str | None = None) -> RecordMetadata:
        """Send one envelope and wait for the broker's acknowledgement."""
        return await (await self.send(topic, envelope, key=key))

    async def send_raw(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> DeliveryFuture:
        """Buffer a record as given (dead letters, tombstones); returns its delivery future."""
        future: DeliveryFuture = await self._require().send(
            topic, value=value, key=key, headers=headers or [], partition=partition
        )
        return future

    async def flush(self) -> None:
        """Wait until every buffered record is acknowledged or failed."""
        await self._require().flush()
