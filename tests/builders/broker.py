"""A private Apache Kafka broker (or cluster of brokers) with every registry topic, for a test, a module
or a session."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from services.runtime.broker import BOOTSTRAP_ENV, KafkaCluster, ResolvedBroker, resolve_broker
from services.runtime.kafka import KafkaSettings
from services.runtime.kafka.topics import ensure_registry_topics


@contextmanager
def registry_broker_at(log_dir: Path, *, brokers: int = 1) -> Iterator[ResolvedBroker]:
    """A broker of its own (``MUSTER_KAFKA_BOOTSTRAP`` names a shared one instead), or a cluster of
    ``brokers``, with Muster's topics and dead-letter topics created; closed on exit."""
    broker = resolve_broker(os.environ.get(BOOTSTRAP_ENV), log_dir=log_dir, brokers=brokers)
    try:
        asyncio.run(ensure_registry_topics(KafkaSettings(bootstrap=broker.bootstrap)))
        yield broker
    finally:
        broker.close()


@contextmanager
def registry_cluster_at(log_dir: Path, brokers: int = 3) -> Iterator[KafkaCluster]:
    """A cluster of ``brokers`` launched here (never an external one: its nodes are killed and restarted),
    with Muster's topics at the cluster's replication; closed on exit."""
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"needs a cluster the launcher starts; {BOOTSTRAP_ENV} names an external broker")
    cluster = KafkaCluster(brokers, log_dir=log_dir).start()
    try:
        asyncio.run(ensure_registry_topics(KafkaSettings(bootstrap=cluster.bootstrap)))
        yield cluster
    finally:
        cluster.kill()  # its data goes with the test's directory: no controlled shutdown to wait for
        cluster.close()


def client_settings(broker: ResolvedBroker, client_id: str) -> KafkaSettings:
    return KafkaSettings(bootstrap=broker.bootstrap, client_id=client_id, request_timeout_ms=15_000)
