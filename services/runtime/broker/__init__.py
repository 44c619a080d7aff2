"""Launching a single-node Apache Kafka broker (KRaft) for tests and the embedded default."""

from services.runtime.broker.distribution import KAFKA_VERSION, DistributionError, KafkaDistribution
from services.runtime.broker.process import BrokerError, KafkaBroker
from services.runtime.broker.resolve import BOOTSTRAP_ENV, ExternalBroker, ResolvedBroker, resolve_broker

__all__ = [
    "BOOTSTRAP_ENV",
    "KAFKA_VERSION",
    "BrokerError",
    "DistributionError",
    "ExternalBroker",
    "KafkaBroker",
    "KafkaDistribution",
    "ResolvedBroker",
    "resolve_broker",
]
