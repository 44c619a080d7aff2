"""Integration fixtures: one real Apache Kafka broker per session, unique topics, no leaked tasks."""

from __future__ import annotations

import pytest

from services.runtime.kafka import KafkaSettings
from tests.integration.builders import TopicFactory


@pytest.fixture
def topics(kafka_settings: KafkaSettings, request: pytest.FixtureRequest) -> TopicFactory:
    """Creates topics with names unique to the test."""
    return TopicFactory(kafka_settings, request.node.name)
