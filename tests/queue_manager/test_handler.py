"""The consumer handler of ``QueueManager`` with an in-memory producer (no broker)."""

from __future__ import annotations

from typing import cast

import pytest

from schemas.envelope import Envelope, make_envelope
from schemas.jobs import JobRecorded
from schemas.status import JobStatusChanged
from schemas.topics import INTENTS_TOPIC, JOBS_TOPIC, STATUS_TOPIC
from services.queue_manager.service import QueueManager
from services.runtime.kafka import Delivery, EnvelopeProducer
from tests.queue_manager.builders import queue_manager, submit
from tests.queue_manager.fakes import MemoryProducer


def _manager() -> QueueManager:
    manager: QueueManager = queue_manager()
    return manager


def _delivery(producer: MemoryProducer, attempt: int = 1) -> Delivery:
    return Delivery(topic=INTENTS_TOPIC, partition=0, offset=7, key=b"j1", timestamp_ms=0, attempt=attempt,
                    _producer=cast(EnvelopeProducer, producer))


async def test_handle_emits_record_and_status_chained_to_the_input() -> None:
    qm, producer = _manager(), MemoryProducer()
    cause = make_envelope(submit("j1"), "gateway")
    delivery = _delivery(producer)
    await qm.handle(cause, delivery)
    await delivery.settle()
    assert [t for t, _ in producer.sent] == [JOBS_TOPIC, STATUS_TOPIC]
    assert all(e.causation_id == cause.event_id and e.producer == "queue_manager" for _, e in producer.sent)
    assert isinstance(producer.sent[0][1].payload, JobRecorded)
    assert isinstance(producer.sent[1][1].payload, JobStatusChanged)


async def test_failed_acknowledgement_is_repaired_by_the_retry() -> None:
    qm, producer = _manager(), MemoryProducer()
    cause: Envelope = make_envelope(submit("j1"), "gateway")
    producer.fail = True
    delivery = _delivery(producer)
    await qm.handle(cause, delivery)
    with pytest.raises(ConnectionError):
        await delivery.settle()
    producer.fail = False
    retry = _delivery(producer, attempt=2)
    await qm.handle(cause, retry)
    await retry.settle()
    (record,) = [e.payload for t, e in producer.sent if t == JOBS_TOPIC]
    assert isinstance(record, JobRecorded) and record.record.state == "pending"
