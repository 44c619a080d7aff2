"""The accountant's Faust app on a real broker: its tables can be written as soon as it has started, and a
failed handler does not keep it from stopping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from schemas.topics import DECISIONS_TOPIC
from services.quota_accountant.ledger_rows import TABLES, Change
from services.quota_accountant.stream import CHANGELOG_TOPICS, AccountantStreams, Ack
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from tests.quota_accountant.builders import admitted

pytestmark = pytest.mark.integration

STOP_WITHIN_S = 60.0


async def _nothing(_: Any) -> None:
    return None


async def _acknowledge(topic: str, value: bytes | None, ack: Ack) -> None:
    await ack()


@pytest.fixture
async def streams(registry_settings: KafkaSettings) -> AsyncIterator[AccountantStreams]:
    """The accountant's app, started, with a handler that acknowledges every input."""
    app = AccountantStreams(registry_settings, [DECISIONS_TOPIC], on_event=_acknowledge, on_recovered=_nothing)
    await app.start()
    try:
        yield app
    finally:
        await asyncio.wait_for(app.stop(), STOP_WITHIN_S)


async def test_every_table_takes_a_row_as_soon_as_the_app_has_started(streams: AccountantStreams) -> None:
    """Faust picks a row's partition from its producer's cached metadata: a changelog topic created as the app
    started must be known to it before ``start`` returns (the first row of the burst table once failed with a
    TypeError in aiokafka's partitioner and stopped the accountant)."""
    kafka: Any = streams.app.producer._ensure_producer()  # type: ignore[attr-defined]
    for topic in CHANGELOG_TOPICS:
        assert kafka._metadata.partitions_for_topic(topic), f"{topic}: unknown to the app's producer"
    await streams.write([Change(table, "k", b"{}") for table in TABLES])
    await streams.app.producer.flush()
    assert all(streams.rows()[table] == {"k": b"{}"} for table in TABLES)


async def test_a_changelog_topic_the_producer_forgot_is_asked_for_again_before_a_row_is_written(
        streams: AccountantStreams) -> None:
    """A metadata update in which a partition has no leader for a moment drops its topic from aiokafka's
    cache, after the app started: the next row of that table must not stop the accountant."""
    kafka: Any = streams.app.producer._ensure_producer()  # type: ignore[attr-defined]
    for topic in CHANGELOG_TOPICS:  # as ClusterMetadata.update_metadata does for a leaderless topic
        kafka._metadata._partitions.pop(topic, None)
    assert not any(kafka._metadata.partitions_for_topic(t) for t in CHANGELOG_TOPICS)
    await streams.write([Change(table, "k2", b"{}") for table in TABLES])
    await streams.app.producer.flush()
    assert all(streams.rows()[table].get("k2") == b"{}" for table in TABLES)


async def test_an_app_whose_handler_failed_stops_without_waiting_for_the_input_it_never_acknowledged(
        registry_settings: KafkaSettings) -> None:
    """A failed handler leaves its input unacknowledged for good (it must not be committed): Faust would wait
    for that acknowledgement before it stops, forever, and the service could not end to be restarted."""
    failed = asyncio.Event()

    async def fail(topic: str, value: bytes | None, ack: Ack) -> None:
        failed.set()
        raise RuntimeError("handler failed")

    async def recovered(rows: Any) -> None:
        assert isinstance(rows(), dict)

    streams = AccountantStreams(registry_settings, [DECISIONS_TOPIC], on_event=fail, on_recovered=recovered)
    await streams.start()
    try:
        async with EnvelopeProducer(registry_settings) as producer:
            await producer.send_and_wait(DECISIONS_TOPIC, admitted("job-1"))
        await asyncio.wait_for(failed.wait(), STOP_WITHIN_S)
        assert streams.failure is not None
        with pytest.raises(RuntimeError, match="handler failed"):
            await asyncio.wait_for(asyncio.shield(streams.failure), STOP_WITHIN_S)
    finally:
        await asyncio.wait_for(streams.stop(), STOP_WITHIN_S)

