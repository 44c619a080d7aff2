"""Choosing a broker: external address, ``KAFKA_HOME``, fetched jars, or a Docker container; one broker
or a cluster of several. ``MUSTER_KAFKA_LAUNCHER`` (``auto``, ``local``, ``container``) picks the launcher."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from services.runtime.broker import distribution as dist
from services.runtime.broker.cluster import KafkaCluster
from services.runtime.broker.container import ContainerBroker, container_problem
from services.runtime.broker.process import BrokerError, KafkaBroker
from services.runtime.broker.security import BrokerSecurity

BOOTSTRAP_ENV = "MUSTER_KAFKA_BOOTSTRAP"
#: which launcher starts the broker: ``auto`` (the default: the order of ``resolve_broker``), ``local``
#: (Java and the Kafka jars, never Docker) or ``container`` (testcontainers and Docker, nothing else)
LAUNCHER_ENV = "MUSTER_KAFKA_LAUNCHER"
LAUNCHERS = ("auto", "local", "container")


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


def chosen_launcher(launcher: str | None = None) -> str:
    """``launcher``, else ``MUSTER_KAFKA_LAUNCHER``, else ``auto``; one of ``LAUNCHERS``."""
    name = (launcher or os.environ.get(LAUNCHER_ENV) or "auto").strip().lower()
    if name not in LAUNCHERS:
        raise BrokerError(f"unknown Kafka launcher {name!r} ({LAUNCHER_ENV} or --launcher): "
                          f"one of {', '.join(LAUNCHERS)}")
    return name


def resolve_broker(
    bootstrap: str | None = None, *, log_dir: str | Path | None = None, brokers: int = 1,
    launcher: str | None = None, security: BrokerSecurity | None = None,
) -> ResolvedBroker:
    """A reachable broker (``brokers`` > 1: a cluster of that many), in this order of preference.

    1. ``bootstrap`` or the ``MUSTER_KAFKA_BOOTSTRAP`` environment variable: an external broker or cluster
       (its size is its own; ``brokers`` is not checked). Nothing is launched, whatever the launcher.
    2. ``KAFKA_HOME``: an Apache Kafka installation, run from its ``libs`` jars.
    3. Apache Kafka ``KAFKA_VERSION`` jars fetched once with ``mvn`` into the cache, run on local Java.
    4. A testcontainers Kafka, when the jars cannot be had and a Docker engine answers (one broker only).

    ``launcher`` (else ``MUSTER_KAFKA_LAUNCHER``) narrows 2-4: ``local`` is 2-3 only, ``container`` is 4
    only (and says clearly why it cannot run: no testcontainers, no Docker engine, more than one broker),
    ``auto`` (the default) is all of them. Brokers of cases 2-4 are returned started; the caller closes them.
    ``security``: the launched brokers authenticate and authorise (``security.BrokerSecurity``); the local
    launcher only, and never for an external broker (whose clients bring their own ``MUSTER_KAFKA_*``).
    """
    if brokers < 1:
        raise BrokerError(f"{brokers} brokers: at least one is needed")
    name = chosen_launcher(launcher)
    address = bootstrap or os.environ.get(BOOTSTRAP_ENV)
    if address:
        if security is not None:
            raise BrokerError(f"an external broker ({address}) runs its own authentication; it cannot be given one")
        return ExternalBroker(address)
    if name == "container":
        if security is not None:
            raise BrokerError("the container launcher runs an open broker; authentication needs the local launcher")
        return _container(brokers)
    kafka_home = os.environ.get("KAFKA_HOME")
    if kafka_home:
        return _local(dist.from_kafka_home(kafka_home), log_dir, brokers, security)
    local_problem = _local_jvm_problem()
    if local_problem is None:
        return _local(None, log_dir, brokers, security)
    if name == "auto" and brokers == 1 and security is None and container_problem() is None:
        return ContainerBroker().start()
    raise BrokerError(
        f"no Kafka broker available: {local_problem}; set {BOOTSTRAP_ENV} or KAFKA_HOME, "
        "or install Java 17+ and Maven"
    )


def _container(brokers: int) -> ContainerBroker:
    if brokers != 1:
        raise BrokerError(f"the container launcher starts one broker, not {brokers}; use the local launcher "
                          "(Java and the Kafka jars) for a cluster")
    problem = container_problem()
    if problem is not None:
        raise BrokerError(f"the container launcher cannot run: {problem}")
    return ContainerBroker().start()


def _local(distribution: dist.KafkaDistribution | None, log_dir: str | Path | None,
           brokers: int, security: BrokerSecurity | None = None) -> KafkaBroker | KafkaCluster:
    if brokers == 1:
        return KafkaBroker(log_dir=log_dir, distribution=distribution, security=security).start()
    return KafkaCluster(brokers, log_dir=log_dir, distribution=distribution, security=security).start()


def _local_jvm_problem() -> str | None:
    try:
        dist.find_java()
    except dist.DistributionError as exc:
        return str(exc)
    if not dist.is_fetched() and shutil.which("mvn") is None:
        return "the Kafka jars are not cached and mvn is not on PATH"
    return None
