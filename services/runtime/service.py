"""The shell every service runs in: its Kafka loops and background tasks, a /metrics and /healthz
endpoint, and one graceful shutdown on SIGTERM/SIGINT.

A service's composition root builds its handlers and calls ``ServiceRunner.run``; nothing here
knows what the service decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from services.runtime.kafka.lag import ConsumerLagMetrics
from services.runtime.kafka.loop import ConsumerLoop, collect_loops
from services.runtime.logs import set_service
from services.runtime.metrics_access import MetricsAccess

log = logging.getLogger(__name__)

BackgroundTask = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
"""A coroutine function that runs until the given stop event is set."""


async def unless_stopped(stop: asyncio.Event, awaitable: Awaitable[object]) -> bool:
    """Await ``awaitable`` unless ``stop`` is set first; True when it finished."""
    work = asyncio.ensure_future(awaitable)
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
    for task in (work, stopper):
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if work.cancelled():
        return False
    work.result()
    return True


@dataclass
class ServiceRunner:
    """Runs ``loops`` and ``tasks`` together until a signal or ``stop()``; any crash stops them all."""

    name: str
    loops: Sequence[ConsumerLoop] = ()
    tasks: Sequence[BackgroundTask] = ()
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    http_host: str = "127.0.0.1"
    http_port: int | None = 0  # None: no HTTP endpoint
    extra_routes: Sequence[web.RouteDef] = ()
    #: who may read /metrics; None: from the environment (``MUSTER_METRICS_EXPOSE``, ``MUSTER_METRICS_TOKEN``)
    metrics_access: MetricsAccess | None = None
    lag_interval_s: float = 15.0  # how often muster_kafka_consumer_lag is refreshed
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    url: str | None = None

    def stop(self) -> None:
        self._stop.set()

    async def _serve_http(self) -> web.AppRunner | None:
        if self.http_port is None:
            return None

        access = self.metrics_access or MetricsAccess.from_env()

        async def metrics(request: web.Request) -> web.Response:
            verdict = access.check(request.remote, request.headers.get("Authorization"))
            if not verdict.allowed:
                return web.Response(status=verdict.status, text=verdict.reason + "\n", headers=verdict.headers)
            return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def health(_: web.Request) -> web.Response:
            return web.json_response({"service": self.name, "status": "ok"})

        app = web.Application()
        app.add_routes([web.get("/metrics", metrics), web.get("/healthz", health), *self.extra_routes])
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.http_host, self.http_port)
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else self.http_port
        self.url = f"http://{self.http_host}:{port}"
        log.info("%s serving /metrics (%s) and /healthz at %s", self.name, access.describe(), self.url)
        return runner

    async def run(self, *, handle_signals: bool = True) -> None:
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
                installed.append(sig)
        set_service(self.name)  # for this task and those it starts: log lines and spans name the service
        up = Gauge("muster_service_up", "1 while the service runs", ["service"], registry=self.registry)
        up.labels(self.name).set(1)
        # the loops given here and those the service's tasks start count themselves into this set
        lag = ConsumerLagMetrics(self.registry, self.name, collect_loops(), interval_s=self.lag_interval_s)
        http = await self._serve_http()
        try:
            async with asyncio.TaskGroup() as group:
                for consumer in self.loops:
                    group.create_task(consumer.run(), name=f"{self.name}:loop")
                for task in self.tasks:
                    group.create_task(task(self._stop), name=f"{self.name}:task")
                group.create_task(lag.run(self._stop), name=f"{self.name}:consumer-lag")

                async def _stopper() -> None:
                    await self._stop.wait()
                    for consumer in self.loops:
                        consumer.stop()

                group.create_task(_stopper(), name=f"{self.name}:stopper")
        finally:
            self._stop.set()
            for sig in installed:
                loop.remove_signal_handler(sig)
            if http is not None:
                with contextlib.suppress(Exception):
                    await http.cleanup()


class ServiceMain:
    """The one shape of a service's composition root (``services/<service>/main.py``): construct it with
    the ``ServeOptions`` (and the service's own settings), then ``await run()``, which composes the
    service and serves it until a signal or ``stop()``. ``composed`` fires once the parts exist and the
    runner starts (the service's own objects are then set on the instance). ``muster serve`` calls the
    module's ``serve(options)``, which runs the default instance."""

    def __init__(self) -> None:
        self.composed = asyncio.Event()
        self.runner: ServiceRunner | None = None
        self._stop_requested = False

    def stop(self) -> None:
        """End the service (safe before it is composed: it then stops as soon as it starts)."""
        self._stop_requested = True
        if self.runner is not None:
            self.runner.stop()

    async def run(self, *, handle_signals: bool = True) -> None:
        raise NotImplementedError

    async def _serve(self, runner: ServiceRunner, *, handle_signals: bool) -> None:
        """Run ``runner`` as this service's (subclasses call this once composed)."""
        self.runner = runner
        if self._stop_requested:
            runner.stop()
        self.composed.set()
        await runner.run(handle_signals=handle_signals)
