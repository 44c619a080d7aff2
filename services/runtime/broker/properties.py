"""Configuration files for KRaft nodes that are each a broker and a controller (combined mode): one
alone, or one of a cluster whose nodes are all voters of the controller quorum."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from services.runtime.kafka import replication as rep

DEFAULT_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)
#: each node of a cluster gets a smaller heap, so three fit beside the services on a small machine
CLUSTER_JVM_OPTIONS: tuple[str, ...] = tuple(
    "-Xmx384m" if option.startswith("-Xmx") else "-Xms64m" if option.startswith("-Xms") else option
    for option in DEFAULT_JVM_OPTIONS
)

# Single node: every replication factor is 1, and the cleaner runs often so compaction is observable quickly.
# A cluster's nodes replace the replication entries with ``replication_settings``.
SINGLE_NODE_SETTINGS: Mapping[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.dedupe.buffer.size": "16777216",
    "log.segment.delete.delay.ms": "1000",
    "log.retention.check.interval.ms": "5000",
    "log.initial.task.delay.ms": "1000",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "4",
}


@dataclass(frozen=True)
class BrokerLayout:
    """Where a broker keeps its files under one root directory."""

    root: Path

    @property
    def data_dir(self) -> Path:
        """Kafka's ``log.dirs`` (partition data and KRaft metadata)."""
        return self.root / "data"

    @property
    def server_properties(self) -> Path:
        return self.root / "server.properties"

    @property
    def log4j_properties(self) -> Path:
        return self.root / "log4j.properties"

    @property
    def app_log_dir(self) -> Path:
        """The broker's own log files (``server.log``)."""
        return self.root / "logs"

    @property
    def console_log(self) -> Path:
        """Captured stdout and stderr of the JVM."""
        return self.root / "console.log"

    @property
    def state_file(self) -> Path:
        """Ports chosen at first start, so a restart on the same directory keeps its address."""
        return self.root / "broker.json"

    def is_formatted(self) -> bool:
        return (self.data_dir / "meta.properties").is_file()


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def replication_settings(brokers: int) -> dict[str, str]:
    """The broker defaults for a cluster of ``brokers``: topics created without a setting (the consumer
    offsets and transaction state among them) get ``replication.for_cluster(brokers)``."""
    replication = rep.for_cluster(brokers)
    factor, minimum = str(replication.factor), str(replication.min_insync)
    return {
        "default.replication.factor": factor,
        "min.insync.replicas": minimum,
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": minimum,
    }


def quorum_voters(host: str, controller_ports: Mapping[int, int]) -> str:
    """``controller.quorum.voters``: every node id at its controller port on ``host``."""
    return ",".join(f"{node}@{host}:{port}" for node, port in sorted(controller_ports.items()))


def server_properties(
    *,
    host: str,
    port: int,
    controller_port: int,
    data_dir: Path,
    node_id: int = 1,
    voters: Mapping[int, int] | None = None,
    overrides: Mapping[str, str] | None = None,
    listeners: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The ``server.properties`` entries of a combined broker + controller listening on ``host``.

    ``voters`` maps every node id of a cluster to its controller port (this node's included); without it
    the node is a cluster of one. Replication defaults follow the number of voters. ``listeners``
    replaces the PLAINTEXT listener entries (``security.BrokerSecurity.listeners``: SASL and ACLs).
    """
    quorum = dict(voters) if voters else {node_id: controller_port}
    if quorum.get(node_id) != controller_port:
        raise ValueError(f"node {node_id} with controller port {controller_port} is not among the voters {quorum}")
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": quorum_voters(host, quorum),
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        **(listeners or {}),
        "log.dirs": str(data_dir),
        **SINGLE_NODE_SETTINGS,
        **replication_settings(len(quorum)),
    }
    if len(quorum) > 1:
        # a killed node is fenced, and its partitions get new leaders, after 6 s instead of 9 s; a
        # replica that stopped fetching leaves the ISR after 10 s instead of 30 s
        settings.update({"broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "1000",
                         "replica.lag.time.max.ms": "10000"})
    settings.update(overrides or {})
    return settings


def render_properties(settings: Mapping[str, str]) -> str:
    """Java properties text (values escaped for backslashes)."""
    lines = [f"{key}={value.replace(chr(92), chr(92) * 2)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def log4j_properties(app_log_dir: Path) -> str:
    """A reload4j configuration sending the broker's logs to ``server.log`` (rolled, small)."""
    log_file = app_log_dir / "server.log"
    return "\n".join(
        [
            "log4j.rootLogger=INFO, file",
            "log4j.appender.file=org.apache.log4j.RollingFileAppender",
            f"log4j.appender.file.File={log_file}",
            "log4j.appender.file.MaxFileSize=10MB",
            "log4j.appender.file.MaxBackupIndex=2",
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
            "log4j.logger.org.apache.kafka.clients=WARN",
            "log4j.logger.kafka.request.logger=WARN",
            "log4j.logger.state.change.logger=WARN",
            "",
        ]
    )
