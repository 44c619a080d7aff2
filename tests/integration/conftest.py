"""Integration fixtures: one real Apache Kafka broker per session, unique topics, no leaked tasks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from services.runtime.broker import ResolvedBroker, resolve_broker
from services.runtime.kafka import KafkaSettings
from tests.integration.builders import TopicFactory


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[ResolvedBroker]:
    """The session's broker: ``MUSTER_KAFKA_BOOTSTRAP`` if set, else a local one started by the launcher."""
    broker = resolve_broker()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def bootstrap(kafka_broker: ResolvedBroker) -> str:
    return kafka_broker.bootstrap


@pytest.fixture
def kafka_settings(bootstrap: str) -> KafkaSettings:
    return KafkaSettings(bootstrap=bootstrap, client_id="muster-it", request_timeout_ms=15_000)


@pytest.fixture
def topics(kafka_settings: KafkaSettings, request: pytest.FixtureRequest) -> TopicFactory:
    """Creates topics with names unique to the test."""
    return TopicFactory(kafka_settings, request.node.name)


@pytest.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail the test if it leaves asyncio tasks running behind it."""
    before = asyncio.all_tasks()
    yield
    current = asyncio.current_task()
    leaked: set[asyncio.Task[object]] = set()
    for _ in range(20):
        leaked = {t for t in asyncio.all_tasks() - before if t is not current and not t.done()}
        if not leaked:
            return
        await asyncio.sleep(0.05)
    names = sorted(repr(t.get_coro()) for t in leaked)
    for task in leaked:
        task.cancel()
    pytest.fail(f"test leaked {len(leaked)} asyncio task(s): {names}")
