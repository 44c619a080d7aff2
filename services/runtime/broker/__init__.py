"""Launching Apache Kafka (KRaft) for tests and the embedded system: one broker, or a cluster of several."""

from services.runtime.broker.cluster import KafkaCluster
from services.runtime.broker.container import ContainerBroker, ContainerError
from services.runtime.broker.distribution import KAFKA_VERSION, DistributionError, KafkaDistribution
from services.runtime.broker.process import BrokerError, KafkaBroker
from services.runtime.broker.resolve import (
    BOOTSTRAP_ENV,
    LAUNCHER_ENV,
    LAUNCHERS,
    ExternalBroker,
    ResolvedBroker,
    resolve_broker,
)

__all__ = [
    "BOOTSTRAP_ENV",
    "KAFKA_VERSION",
    "LAUNCHERS",
    "LAUNCHER_ENV",
    "BrokerError",
    "ContainerBroker",
    "ContainerError",
    "DistributionError",
    "ExternalBroker",
    "KafkaBroker",
    "KafkaCluster",
    "KafkaDistribution",
    "ResolvedBroker",
    "resolve_broker",
]
