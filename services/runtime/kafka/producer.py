"""``EnvelopeProducer``: an idempotent aiokafka producer that writes JSON envelopes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from types import TracebackType
from typing import Any, NamedTuple, Self

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import RecordMetadata

from schemas.codec import encode
from schemas.envelope import Envelope
from services.runtime import tracing
from services.runtime.kafka.headers import Headers, envelope_headers
from services.runtime.kafka.settings import KafkaSettings

DeliveryFuture = asyncio.Future[RecordMetadata]
#: the delivery of a whole record batch (``send_many``): done once the broker acknowledged every record in it
BatchFuture = asyncio.Future[Any]
#: a record batch may hold this many bytes (aiokafka's default is 16 KiB, a dozen envelopes): a producer
#: that writes many records together then waits less often for a full batch to be sent
MAX_BATCH_BYTES = 512 * 1024


class Outgoing(NamedTuple):
    """One envelope to produce with ``send_many``; ``key`` defaults to ``envelope.key()``."""

    topic: str
    envelope: Envelope
    key: str | None = None


class EnvelopeProducer:
    """Idempotent producer (``acks=all``): key = the message's partition key, value = encoded envelope.

    ``send`` returns once the record is buffered; its result is a future that completes when the broker
    has acknowledged it. Await those futures before committing the input that caused them.
    """

    def __init__(self, settings: KafkaSettings, *, linger_ms: int = 5, **producer_options: Any) -> None:
        self._settings = settings
        self._options = {"max_batch_size": MAX_BATCH_BYTES, **producer_options}
        self._linger_ms = linger_ms
        self._producer: AIOKafkaProducer | None = None
        self._partitioner = DefaultPartitioner()
        self._many_lock = asyncio.Lock()  # one send_many at a time: each keeps its records together

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
        record_key, value, headers = _record(envelope, key)
        tracing.sent(topic, envelope)
        return await self.send_raw(topic, value, key=record_key, headers=headers)

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

    async def send_many(self, items: Iterable[Outgoing]) -> list[BatchFuture]:
        """Buffer many envelopes as record batches, one per partition where they fit; returns one future
        per batch. Records keep their order within a partition, and land on the partition ``send`` would
        choose for their key (the same partitioner), so the two can be mixed for one key.

        Much cheaper per record than ``send`` (no per-record future or accumulator walk): meant for a
        service that produces the outputs of many inputs, or of a cycle, together and then waits.
        """
        async with self._many_lock:
            return await self._send_many(self._require(), items)

    async def _send_many(self, producer: AIOKafkaProducer, items: Iterable[Outgoing]) -> list[BatchFuture]:
        partitions: dict[str, list[int]] = {}
        open_batches: dict[tuple[str, int], Any] = {}
        futures: list[BatchFuture] = []
        for item in items:
            key, value, headers = _record(item.envelope, item.key)
            tracing.sent(item.topic, item.envelope)
            all_partitions = partitions.get(item.topic)
            if all_partitions is None:
                all_partitions = partitions[item.topic] = sorted(await producer.partitions_for(item.topic))
            partition = self._partitioner(key, all_partitions, all_partitions)
            slot = (item.topic, partition)
            batch = open_batches.get(slot)
            if batch is None:
                batch = open_batches[slot] = producer.create_batch()
            if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                # full: send it (order within the partition is kept) and start the next one
                futures.append(await producer.send_batch(batch, item.topic, partition=partition))
                batch = open_batches[slot] = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                    raise ValueError(f"a record of {len(value)} bytes does not fit in a batch for {item.topic}")
        for (topic, partition), batch in open_batches.items():
            futures.append(await producer.send_batch(batch, topic, partition=partition))
        return futures

    async def flush(self) -> None:
        """Wait until every buffered record is acknowledged or failed."""
        await self._require().flush()


def _record(envelope: Envelope, key: str | None) -> tuple[bytes, bytes, Headers]:
    """Key (``envelope.key()`` unless given), value and headers of the record that carries ``envelope``."""
    return (envelope.key() if key is None else key).encode(), encode(envelope), envelope_headers(envelope)
