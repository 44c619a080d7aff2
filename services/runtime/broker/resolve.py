"""Choosing a broker: external address, ``KAFKA_HOME``, fetched jars, or a Docker container; one broker
or a cluster of several."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from services.runtime.broker import distribution as dist
from services.runtime.broker.cluster import KafkaCluster
from services.runtime.broker.container import ContainerBroker, docker_answers, testcontainers_available
from services.runtime.broker.process import BrokerError, KafkaBroker

BOOTSTRAP_ENV = "MUSTER_KAFKA_BOOTSTRAP"


@dataclass(frozen=True)
class ExternalBroker:
    """A broker run by someone else: only its address is known; stopping it is not ours to do."""

    bootstrap: str
    can_restart = False

    def close(self) -> None:
        """Nothing to release: the broker is not owned."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


ResolvedBroker = KafkaBroker | KafkaCluster | ExternalBroker | ContainerBroker


def resolve_broker(
    bootstrap: str | None = None, *, log_dir: str | Path | None = None, brokers: int = 1
) -> ResolvedBroker:
    """A reachable broker (``brokers`` > 1: a cluster of that many), in this order of preference.

    1. ``bootstrap`` or the ``MUSTER_KAFKA_BOOTSTRAP`` environment variable: an external broker or cluster
       (its size is its own; ``brokers`` is not checked).
    2. ``KAFKA_HOME``: an Apache Kafka installation, run from its ``libs`` jars.
    3. Apache Kafka ``KAFKA_VERSION`` jars fetched once with ``mvn`` into the cache, run on local Java.
    4. A testcontainers Kafka, when the jars cannot be had and a Docker engine answers (one broker only).

    Brokers of cases 2-4 are returned started; the caller closes them.
    """
    if brokers < 1:
        raise BrokerError(f"{brokers} brokers: at least one is needed")
    address = bootstrap or os.environ.get(BOOTSTRAP_ENV)
    if address:
        return ExternalBroker(address)
    kafka_home = os.environ.get("KAFKA_HOME")
    if kafka_home:
        return _local(dist.from_kafka_home(kafka_home), log_dir, brokers)
    local_problem = _local_jvm_problem()
    if local_problem is None:
        return _local(None, log_dir, brokers)
    if brokers == 1 and docker_answers() and testcontainers_available():
        return ContainerBroker().start()
    raise BrokerError(
        f"no Kafka broker available: {local_problem}; set {BOOTSTRAP_ENV} or KAFKA_HOME, "
        "or install Java 17+ and Maven"
    )


def _local(distribution: dist.KafkaDistribution | None, log_dir: str | Path | None,
           brokers: int) -> KafkaBroker | KafkaCluster:
    if brokers == 1:
        return KafkaBroker(log_dir=log_dir, distribution=distribution).start()
    return KafkaCluster(brokers, log_dir=log_dir, distribution=distribution).start()


def _local_jvm_problem() -> str | None:
    try:
        dist.find_java()
    except dist.DistributionError as exc:
        return str(exc)
    if not dist.is_fetched() and shutil.which("mvn") is None:
        return "the Kafka jars are not cached and mvn is not on PATH"
    return None
