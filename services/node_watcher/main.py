"""Composition root of the node-state watcher: one cluster's Kubernetes API in, capacity and runs out."""

from __future__ import annotations

import logging
import os

from prometheus_client import CollectorRegistry

from services.node_watcher.metrics import WatcherMetrics
from services.node_watcher.published import published_nodes
from services.node_watcher.publisher import Outbox
from services.node_watcher.watcher import GpuMetrics, NodeWatcher
from services.runtime.kafka import EnvelopeProducer
from services.runtime.kube import KubeRest, build_api_client
from services.runtime.options import ServeOptions
from services.runtime.service import ServiceMain, ServiceRunner

log = logging.getLogger(__name__)

SERVICE = "node_watcher"


class NodeWatcherMain(ServiceMain):
    """Watch ``options.cluster`` through ``options.kube_server`` (or KUBECONFIG / in-cluster) until SIGTERM
    or ``stop()``; ``watcher`` is set once composed."""

    def __init__(self, options: ServeOptions) -> None:
        super().__init__()
        self.options = options
        self.watcher: NodeWatcher | None = None

    async def run(self, *, handle_signals: bool = True) -> None:
        options = self.options
        registry = CollectorRegistry()
        metrics = WatcherMetrics(registry, options.cluster)
        api = await build_api_client(options.kube_server, kubeconfig=options.kubeconfig_path)
        async with api:
            rest = KubeRest(api)
            producer = EnvelopeProducer(options.kafka.with_identity(client_id=f"muster-{SERVICE}-{options.cluster}"))
            await producer.start()
            try:
                outbox = Outbox(producer, on_sent=metrics.sent)
                metrics.watch_backlog(lambda: outbox.backlog)
                watcher = self.watcher = NodeWatcher(
                    rest, options.cluster, outbox, metrics,
                    previously_published=lambda: published_nodes(options.kafka, options.cluster),
                    gpu_metrics=GpuMetrics.from_env(os.environ))
                runner = ServiceRunner(SERVICE, tasks=[outbox.run, watcher.run], registry=registry,
                                       http_host=options.http_host, http_port=options.http_port)
                log.info("node watcher for cluster %s starting", options.cluster)
                await self._serve(runner, handle_signals=handle_signals)
            finally:
                await producer.stop()


async def serve(options: ServeOptions) -> None:
    """``muster serve node-watcher``."""
    await NodeWatcherMain(options).run()
