"""Composition root of the node-state watcher: one cluster's Kubernetes API in, capacity and runs out."""

from __future__ import annotations

import logging
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from schemas.envelope import Message
from services.node_watcher.metrics import WatcherMetrics
from services.node_watcher.published import published_nodes
from services.node_watcher.publisher import Outbox
from services.node_watcher.watcher import NodeWatcher
from services.runtime.kafka import EnvelopeProducer
from services.runtime.kube import KubeRest, build_api_client
from services.runtime.options import ServeOptions
from services.runtime.service import ServiceRunner

log = logging.getLogger(__name__)

SERVICE = "node_watcher"


async def serve(
    options: ServeOptions,
    *,
    handle_signals: bool = True,
    on_ready: Callable[[ServiceRunner, NodeWatcher], None] | None = None,
) -> None:
    """Watch ``options.cluster`` through ``options.kube_server`` (or KUBECONFIG / in-cluster) until SIGTERM.

    ``on_ready`` receives the runner (whose ``stop()`` ends the service) and the watcher, for embedding.
    """
    registry = CollectorRegistry()
    metrics = WatcherMetrics(registry, options.cluster)
    api = await build_api_client(options.kube_server, kubeconfig=options.kubeconfig_path)
    async with api:
        rest = KubeRest(api)
        producer = EnvelopeProducer(options.kafka.with_identity(client_id=f"muster-{SERVICE}-{options.cluster}"))
        await producer.start()
        try:
            def sent(message: Message) -> None:
                metrics.sent(message)

            outbox = Outbox(producer, on_sent=sent)
            metrics.watch_backlog(lambda: outbox.backlog)
            watcher = NodeWatcher(rest, options.cluster, outbox, metrics,
                                  previously_published=lambda: published_nodes(options.kafka, options.cluster))
            runner = ServiceRunner(SERVICE, tasks=[outbox.run, watcher.run], registry=registry,
                                   http_host=options.http_host, http_port=options.http_port)
            if on_ready is not None:
                on_ready(runner, watcher)
            log.info("node watcher for cluster %s starting", options.cluster)
            await runner.run(handle_signals=handle_signals)
        finally:
            await producer.stop()
