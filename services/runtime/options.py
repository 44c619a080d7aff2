"""What every service is started with (``muster serve <service>``), shared by the composition roots."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from services.runtime.kafka.settings import KafkaSettings

SERVICES: tuple[str, ...] = ("gateway", "queue_manager", "quota_accountant", "dispatcher", "node_watcher")


@dataclass(frozen=True)
class ServeOptions:
    """Options of one service process.

    ``config_file``: the cluster file (queues, cohorts, priority classes, tenants); the gateway seeds
    ``muster.config`` from it. ``cluster`` and ``kube_server``: the one cluster a dispatcher or
    node-state watcher serves (``kube_server`` None means ``kubeconfig``, then KUBECONFIG / in-cluster
    configuration).
    ``http_port`` serves /metrics and /healthz (the gateway's API too); 0 picks a free port.
    """

    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    http_host: str = "127.0.0.1"
    http_port: int = 0
    config_file: Path | None = None
    cluster: str = "default"
    kube_server: str | None = None
    kubeconfig: Path | None = None  # the service's own kubeconfig (its ServiceAccount), over KUBECONFIG
    tokens_file: Path | None = None
    instance: str = "0"
    pools: tuple[str, ...] = ()  # queue-manager shard: the pools it owns; empty = every pool

    @property
    def kubeconfig_path(self) -> str | None:
        return str(self.kubeconfig) if self.kubeconfig is not None else None
