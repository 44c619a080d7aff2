"""Composition root of the dispatcher: decisions (and run failures) in, Kubernetes objects and reports out."""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry

from schemas.topics import DECISIONS_TOPIC, RUNS_TOPIC
from services.dispatcher.binder import MAX_BINDINGS_IN_FLIGHT, Binder
from services.dispatcher.context import Context
from services.dispatcher.dispatcher import Dispatcher, passes_over
from services.dispatcher.kube_ops import KubeOps
from services.dispatcher.metrics import DispatcherMetrics
from services.dispatcher.plans import DispatchSettings
from services.dispatcher.releaser import Releaser
from services.dispatcher.reports import Reporter
from services.runtime.kafka import ConsumerLoop, EnvelopeProducer, LoopSettings, PerRecord, Topics
from services.runtime.kube import KubeRest, build_api_client
from services.runtime.options import ServeOptions
from services.runtime.service import ServiceMain, ServiceRunner

log = logging.getLogger(__name__)

SERVICE = "dispatcher"


def group_id(cluster: str) -> str:
    return f"muster-{SERVICE}-{cluster}"


class DispatcherMain(ServiceMain):
    """Dispatch ``options.cluster``'s decisions to ``options.kube_server`` (or KUBECONFIG / in-cluster)
    until SIGTERM or ``stop()``; ``dispatcher`` is set once composed."""

    def __init__(self, options: ServeOptions, *, settings: DispatchSettings | None = None) -> None:
        super().__init__()
        self.options = options
        self.settings = settings or DispatchSettings()
        self.dispatcher: Dispatcher | None = None

    async def run(self, *, handle_signals: bool = True) -> None:
        options = self.options
        registry = CollectorRegistry()
        metrics = DispatcherMetrics(registry, options.cluster)
        kafka = options.kafka.with_identity(client_id=f"muster-{SERVICE}-{options.cluster}-{options.instance}")
        # connections for the decisions handled at once, the bindings in flight, the watches and background work:
        # bindings queued behind Job creations for a connection would hold a burst's pods unbound
        connections = self.settings.concurrent_decisions + MAX_BINDINGS_IN_FLIGHT + 8
        api = await build_api_client(options.kube_server, kubeconfig=options.kubeconfig_path,
                                     connection_pool_size=connections)
        async with api:
            producer = EnvelopeProducer(kafka)
            await producer.start()
            dispatcher: Dispatcher | None = None
            try:
                rest = KubeRest(api)
                binder = Binder(rest, on_bound=metrics.pods_bound.labels(options.cluster).inc)
                ctx = Context(cluster=options.cluster, ops=KubeOps(rest), reporter=Reporter(producer),
                              settings=self.settings, metrics=metrics, binder=binder)
                dispatcher = self.dispatcher = Dispatcher(ctx)
                await dispatcher.recover()
                releaser = Releaser(rest, ctx.workloads, on_released=metrics.pods_bound.labels(options.cluster).inc)
                metrics.pods_waiting.labels(options.cluster).set_function(lambda: binder.pods_waiting)
                inputs = LoopSettings(Topics([DECISIONS_TOPIC, RUNS_TOPIC]), group_id=group_id(options.cluster),
                                      settle=PerRecord(concurrency=self.settings.concurrent_decisions))
                loop = ConsumerLoop(kafka, inputs, dispatcher.handle, producer, skip=passes_over)
                runner = ServiceRunner(SERVICE, loops=[loop], tasks=[binder.run, releaser.run], registry=registry,
                                       http_host=options.http_host, http_port=options.http_port)
                log.info("dispatcher for cluster %s starting (group %s)", options.cluster, loop.group_id)
                await self._serve(runner, handle_signals=handle_signals)
            finally:
                if dispatcher is not None:
                    await dispatcher.close()
                await producer.stop()


async def serve(options: ServeOptions) -> None:
    """``muster serve dispatcher``."""
    await DispatcherMain(options).run()
