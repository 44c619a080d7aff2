"""Composition root of the dispatcher: decisions (and run failures) in, Kubernetes objects and reports out."""

from __future__ import annotations

import logging
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from schemas.topics import DECISIONS_TOPIC, RUNS_TOPIC
from services.dispatcher.binder import Binder
from services.dispatcher.context import Context
from services.dispatcher.dispatcher import Dispatcher
from services.dispatcher.kube_ops import KubeOps
from services.dispatcher.metrics import DispatcherMetrics
from services.dispatcher.plans import DispatchSettings
from services.dispatcher.reports import Reporter
from services.runtime.kafka import ConsumerLoop, EnvelopeProducer
from services.runtime.kube import KubeRest, build_api_client
from services.runtime.options import ServeOptions
from services.runtime.service import ServiceRunner

log = logging.getLogger(__name__)

SERVICE = "dispatcher"


def group_id(cluster: str) -> str:
    return f"muster-{SERVICE}-{cluster}"


async def serve(
    options: ServeOptions,
    *,
    settings: DispatchSettings | None = None,
    handle_signals: bool = True,
    on_ready: Callable[[ServiceRunner, Dispatcher], None] | None = None,
) -> None:
    """Dispatch ``options.cluster``'s decisions to ``options.kube_server`` (or KUBECONFIG / in-cluster) until SIGTERM.

    ``on_ready`` receives the runner (whose ``stop()`` ends the service) and the dispatcher, for embedding.
    """
    registry = CollectorRegistry()
    metrics = DispatcherMetrics(registry, options.cluster)
    kafka = options.kafka.with_identity(client_id=f"muster-{SERVICE}-{options.cluster}-{options.instance}")
    api = await build_api_client(options.kube_server, kubeconfig=options.kubeconfig_path)
    async with api:
        producer = EnvelopeProducer(kafka)
        await producer.start()
        dispatcher: Dispatcher | None = None
        try:
            rest = KubeRest(api)
            ctx = Context(cluster=options.cluster, ops=KubeOps(rest), reporter=Reporter(producer),
                          settings=settings or DispatchSettings(), metrics=metrics)
            dispatcher = Dispatcher(ctx)
            await dispatcher.recover()
            binder = Binder(rest, on_bound=metrics.pods_bound.labels(options.cluster).inc)
            metrics.pods_waiting.labels(options.cluster).set_function(lambda: binder.pods_waiting)
            loop = ConsumerLoop(kafka, [DECISIONS_TOPIC, RUNS_TOPIC], dispatcher.handle, producer,
                                group_id=group_id(options.cluster))
            runner = ServiceRunner(SERVICE, loops=[loop], tasks=[binder.run], registry=registry,
                                   http_host=options.http_host, http_port=options.http_port)
            if on_ready is not None:
                on_ready(runner, dispatcher)
            log.info("dispatcher for cluster %s starting (group %s)", options.cluster, loop.group_id)
            await runner.run(handle_signals=handle_signals)
        finally:
            if dispatcher is not None:
                await dispatcher.close()
            await producer.stop()
