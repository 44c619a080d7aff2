"""What every service is started with (``muster serve <service>``), shared by the composition roots."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class ClusterAccess:
    """How a service reaches one cluster: kubesim's URL (no credentials), or a real control plane
    through one kubeconfig per service (its ServiceAccount), keyed ``gateway``, ``dispatcher``,
    ``node-watcher``."""

    url: str
    kubeconfigs: Mapping[str, Path] = field(default_factory=dict)
    #: where the cluster's GPU utilisation is read (a DCGM exporter's ``/metrics``), for the node watcher
    gpu_metrics: str | None = None

    def fields(self, service: str) -> dict[str, Any]:
        """The ``ServeOptions`` fields by which ``service`` reaches the cluster."""
        if self.kubeconfigs:
            return {"kube_server": None, "kubeconfig": self.kubeconfigs[service]}
        return {"kube_server": self.url, "kubeconfig": None}

    def args(self, service: str) -> list[str]:
        """The same as ``muster serve`` options."""
        if self.kubeconfigs:
            return ["--kubeconfig", str(self.kubeconfigs[service])]
        return ["--kube-server", self.url]
