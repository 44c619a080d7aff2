"""Fixtures for every tier: the real Apache Kafka broker, fresh brokers with Muster's topics, leak checks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.runtime import tracing
from services.runtime.broker import KafkaCluster, ResolvedBroker, resolve_broker
from services.runtime.kafka import KafkaSettings
from tests.builders.broker import client_settings, registry_broker_at, registry_cluster_at
from tests.builders.realkube import RealKube


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


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResolvedBroker]:
    """A broker of this test module alone, with every registry topic (and DLQ) created.

    Service tests use the real topic names, so each module gets its own broker (about 2 s to start).
    With ``MUSTER_KAFKA_BOOTSTRAP`` set, the external broker is shared instead.
    """
    with registry_broker_at(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture(scope="module")
def registry_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three Apache Kafka brokers of this test module alone (KRaft, each node also a controller), with
    every registry topic at replication factor 3 and min.insync.replicas 2. About 8 s to start; each
    node's JVM has a 384 MB heap. Tests may kill and restart its nodes; skipped when
    ``MUSTER_KAFKA_BOOTSTRAP`` names an external broker."""
    with registry_cluster_at(tmp_path_factory.mktemp("kafka-cluster")) as cluster:
        yield cluster


@pytest.fixture
def registry_settings(registry_broker: ResolvedBroker) -> KafkaSettings:
    return client_settings(registry_broker, "muster-test")


@pytest.fixture(scope="session")
def real_kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealKube]:
    """The run's real control planes (built from Go modules once, into ~/.cache/muster), started on first use."""
    kube = RealKube.create(tmp_path_factory.mktemp("realkube"))
    try:
        yield kube
    finally:
        kube.close()


@pytest.fixture(params=["kubesim", pytest.param("real", marks=pytest.mark.realkube)])
def kube_backend(request: pytest.FixtureRequest) -> RealKube | None:
    """Which Kubernetes a service test meets: None for kubesim, else the run's real control planes."""
    if request.param == "real":
        real: RealKube = request.getfixturevalue("real_kube")
        return real
    return None


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


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans the services finish during the test, kept in memory (tracing configured for the test only)."""
    exporter = InMemorySpanExporter()
    tracing.configure(exporter=exporter, batch=False)
    try:
        yield exporter
    finally:
        tracing.reset()
