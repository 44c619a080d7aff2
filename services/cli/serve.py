"""``muster serve <service>``: run one service in this process until SIGTERM."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path

import click

from services.runtime.options import SERVICES, ServeOptions


@click.command()
@click.argument("service", type=click.Choice([s.replace("_", "-") for s in SERVICES]))
@click.option("--bootstrap", envvar="MUSTER_KAFKA_BOOTSTRAP", default=None, help="Kafka host:port")
@click.option("--http-host", envvar="MUSTER_HTTP_HOST", default="127.0.0.1", show_default=True)
@click.option("--http-port", envvar="MUSTER_HTTP_PORT", type=int, default=0, show_default=True,
              help="/metrics, /healthz (and the API)")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              envvar="MUSTER_CONFIG_FILE", default=None, help="cluster file with queues, cohorts, tenants")
@click.option("--cluster", envvar="MUSTER_CLUSTER", default="default", show_default=True,
              help="the cluster a dispatcher / node watcher serves")
@click.option("--kube-server", envvar="MUSTER_KUBE_SERVER", default=None,
              help="Kubernetes API URL (default: KUBECONFIG or in-cluster)")
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              envvar="MUSTER_KUBECONFIG", default=None,
              help="the service's own kubeconfig (default: KUBECONFIG or in-cluster)")
@click.option("--tokens", "tokens_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              envvar="MUSTER_TOKENS_FILE", default=None, help="gateway: bearer tokens file")
@click.option("--instance", default="0", show_default=True, help="instance id (client id suffix)")
@click.option("--pool", "pools", multiple=True,
              help="queue manager shard: a pool it owns (repeatable; default: every pool)")
@click.option("--log-level", default="INFO", show_default=True)
def serve(service: str, bootstrap: str | None, http_host: str, http_port: int, config_file: Path | None,
          cluster: str, kube_server: str | None, kubeconfig: Path | None, tokens_file: Path | None, instance: str,
          pools: tuple[str, ...], log_level: str) -> None:
    """Run one Muster service (gateway, queue-manager, quota-accountant, dispatcher, node-watcher)."""
    name = service.replace("-", "_")
    from services.runtime import tracing
    from services.runtime.logs import configure_logging

    configure_logging(log_level, service=name)  # MUSTER_LOG_FORMAT: text (default) or json
    tracing.configure_from_environment()  # OTEL_EXPORTER_OTLP_ENDPOINT: traces; none by default
    from services.runtime.kafka.settings import KafkaSettings

    kafka = KafkaSettings() if bootstrap is None else KafkaSettings(bootstrap=bootstrap)
    kafka = kafka.with_identity(client_id=f"muster-{service}-{instance}")
    options = ServeOptions(kafka=kafka, http_host=http_host, http_port=http_port, config_file=config_file,
                           cluster=cluster, kube_server=kube_server, kubeconfig=kubeconfig,
                           tokens_file=tokens_file, instance=instance,
                           pools=pools)
    module = importlib.import_module(f"services.{name}.main")
    from services.runtime.collector import configure_collector

    configure_collector()
    asyncio.run(module.serve(options))
