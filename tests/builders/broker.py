"""A private Apache Kafka broker with every registry topic, for a test, a module or a session."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from services.runtime.broker import BOOTSTRAP_ENV, ResolvedBroker, resolve_broker
from services.runtime.kafka import KafkaSettings
from services.runtime.kafka.topics import ensure_registry_topics


@contextmanager
def registry_broker_at(log_dir: Path) -> Iterator[ResolvedBroker]:
    """A broker of its own (``MUSTER_KAFKA_BOOTSTRAP`` names a shared one instead) with Muster's topics
    and dead-letter topics created; closed on exit."""
    broker = resolve_broker(os.environ.get(BOOTSTRAP_ENV), log_dir=log_dir)
    try:
        asyncio.run(ensure_registry_topics(KafkaSettings(bootstrap=broker.bootstrap)))
        yield broker
    finally:
        broker.close()


def client_settings(broker: ResolvedBroker, client_id: str) -> KafkaSettings:
    return KafkaSettings(bootstrap=broker.bootstrap, client_id=client_id, request_timeout_ms=15_000)
