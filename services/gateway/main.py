"""The gateway's composition root: views of the compacted topics, the producer, config seeding, the HTTP
API, the firing loop of recurring jobs and (with a Kubernetes API at hand) the watches of labelled
``batch/v1`` Jobs and of labelled objects of the other workload kinds (JobSet, RayJob, LeaderWorkerSet...)."""

from __future__ import annotations

import asyncio
import logging
import os

from prometheus_client import CollectorRegistry

from schemas.config import ClusterDefined
from schemas.envelope import Envelope
from schemas.topics import (
    CAPACITY_TOPIC,
    CONFIG_TOPIC,
    DISPATCHES_TOPIC,
    JOBS_TOPIC,
    RUNS_TOPIC,
    STATUS_TOPIC,
    USAGE_TOPIC,
)
from services.gateway.app import create_app
from services.gateway.auth import TokenTable
from services.gateway.configs import file_items, growing_clusters
from services.gateway.context import GatewayContext
from services.gateway.firing_loop import FiringLoop
from services.gateway.http import bind, serve_app, socket_url
from services.gateway.metrics import GatewayMetrics
from services.gateway.publisher import KafkaPublisher
from services.gateway.views import ConfigView, StatusView, UsageView
from services.runtime.clock import Clock, utc_now
from services.runtime.kafka import EnvelopeProducer
from services.runtime.kafka.table import CompactedTable
from services.runtime.options import ServeOptions
from services.runtime.service import BackgroundTask, ServiceMain, ServiceRunner, unless_stopped
from services.spec.cluster_file import load_cluster_file
from services.spec.config_items import CLUSTER

log = logging.getLogger(__name__)


def load_tokens(options: ServeOptions) -> TokenTable:
    if options.tokens_file is None:
        log.warning("no tokens file given: every API request will be refused with 401")
        return TokenTable([])
    tokens = TokenTable.load(options.tokens_file)
    log.info("loaded %d API tokens from %s", len(tokens), options.tokens_file)
    return tokens


async def seed_config(ctx: GatewayContext, options: ServeOptions) -> int:
    """Publish every item of the config file whose current value differs; the number published."""
    if options.config_file is None:
        return 0
    cfg = await asyncio.to_thread(load_cluster_file, options.config_file)
    published = 0
    for kind, item in file_items(cfg):
        if await ctx.define(kind, item, origin="seed") is not None:
            published += 1
    for cluster in growing_clusters(cfg):
        if ctx.config.cluster(cluster.name) != cluster:
            await ctx.publish_config(ClusterDefined(item=cluster), CLUSTER, "seed")
            published += 1
    log.info("seeded %d configuration items from %s", published, options.config_file)
    return published


class GatewayMain(ServiceMain):
    """The whole gateway process, served until SIGTERM or ``stop()``; ``context`` is set once composed,
    ``url`` is set and ``ready`` fires once the API listens."""

    def __init__(self, options: ServeOptions, *, clock: Clock = utc_now) -> None:
        super().__init__()
        self.options = options
        self.clock = clock
        self.registry = CollectorRegistry()
        self.ready = asyncio.Event()
        self.url: str | None = None
        self.context: GatewayContext | None = None
        self.firing: FiringLoop | None = None

    async def run(self, *, handle_signals: bool = True) -> None:
        options = self.options
        status, config, usage = StatusView(), ConfigView(), UsageView()
        producer = EnvelopeProducer(options.kafka)
        tokens = await asyncio.to_thread(load_tokens, options)
        metrics = GatewayMetrics(self.registry, lambda: len(status), lambda: len(config.recurring_jobs()))
        ctx = GatewayContext(tokens=tokens, publisher=KafkaPublisher(producer), metrics=metrics,
                             status=status, config=config, usage=usage, now=self.clock)
        self.context = ctx
        firing = self.firing = FiringLoop(ctx)

        def config_changed(key: str, envelope: Envelope | None) -> None:
            config.apply(key, envelope)
            firing.wake()

        feeds = ctx.dashboard_feeds()  # the views, and the dashboard's live streams

        def status_changed(key: str, envelope: Envelope | None) -> None:
            feeds.status(key, envelope)
            ctx.status_changed(key, envelope)

        tables = [CompactedTable(options.kafka, STATUS_TOPIC, on_change=status_changed),
                  CompactedTable(options.kafka, CONFIG_TOPIC, on_change=config_changed),
                  CompactedTable(options.kafka, USAGE_TOPIC, on_change=feeds.usage),
                  CompactedTable(options.kafka, CAPACITY_TOPIC, on_change=feeds.capacity),
                  CompactedTable(options.kafka, JOBS_TOPIC, on_change=feeds.jobs),
                  # the run and dispatch reports (delete-policy topics) folded from their start: the job page's
                  # Kubernetes objects and events
                  CompactedTable(options.kafka, DISPATCHES_TOPIC, on_change=feeds.runs, keep_rows=False),
                  CompactedTable(options.kafka, RUNS_TOPIC, on_change=feeds.runs, keep_rows=False)]
        sock = bind(options.http_host, options.http_port)
        app = create_app(ctx, self.registry)

        async def http(stop: asyncio.Event) -> None:
            if not await unless_stopped(stop, asyncio.gather(*(t.wait_caught_up() for t in tables[:2]))):
                return
            status.caught_up = config.caught_up = True
            await seed_config(ctx, options)
            self.url = socket_url(sock)
            self.ready.set()
            log.info("gateway API at %s (docs at %s/docs)", self.url, self.url)
            await serve_app(app, sock, stop)
            if not stop.is_set():
                raise RuntimeError("the gateway's HTTP server stopped on its own")

        async def usage_caught_up(stop: asyncio.Event) -> None:
            usage.caught_up = await unless_stopped(stop, tables[2].wait_caught_up())

        async def fire_recurring(stop: asyncio.Event) -> None:
            if await unless_stopped(stop, self.ready.wait()):
                await firing.run(stop)

        tasks: list[BackgroundTask] = [t.run for t in tables]
        async def close_streams(stop: asyncio.Event) -> None:
            await stop.wait()
            ctx.dashboard.hub.close()  # open streams end, so the HTTP server can finish

        tasks += [http, usage_caught_up, fire_recurring, close_streams]
        kube = self._kube_task(ctx)
        if kube is not None:
            tasks.append(kube)
        runner = ServiceRunner("gateway", tasks=tasks, registry=self.registry, http_port=None)
        try:
            await producer.start()
            await self._serve(runner, handle_signals=handle_signals)
        finally:
            sock.close()
            await producer.stop()

    def _kube_task(self, ctx: GatewayContext) -> BackgroundTask | None:
        if not (self.options.kube_server or self.options.kubeconfig or os.environ.get("KUBECONFIG")):
            return None
        from services.gateway.kube_jobs import watch_kube_jobs
        from services.gateway.kube_workloads import watch_kube_workloads

        server = self.options.kube_server

        async def kube(stop: asyncio.Event) -> None:
            if await unless_stopped(stop, self.ready.wait()):
                async with asyncio.TaskGroup() as watches:
                    watches.create_task(watch_kube_jobs(ctx, server, stop, kubeconfig=self.options.kubeconfig_path))
                    watches.create_task(watch_kube_workloads(ctx, server, stop,
                                                             kubeconfig=self.options.kubeconfig_path))

        return kube


async def serve(options: ServeOptions) -> None:
    """``muster serve gateway``."""
    await GatewayMain(options).run()
