"""A simulated cluster with the dispatcher and/or node-state watcher running in-process on the real broker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from schemas.envelope import Envelope, Message, make_envelope
from schemas.topics import CAPACITY_TOPIC, DECISIONS_TOPIC, DISPATCHES_TOPIC, RUNS_TOPIC
from services.dispatcher.dispatcher import Dispatcher
from services.dispatcher.main import DispatcherMain
from services.dispatcher.plans import DispatchSettings
from services.kubereal.controlplane import ControlPlane
from services.kubesim import KubeSim
from services.node_watcher.main import NodeWatcherMain
from services.node_watcher.watcher import NodeWatcher
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.runtime.kube import (
    JOBS,
    PODS,
    Backoff,
    KubeObject,
    KubeRest,
    RetryPolicy,
    build_api_client,
    ensure_namespace,
)
from services.runtime.options import ClusterAccess, ServeOptions
from services.runtime.service import ServiceMain, ServiceRunner
from services.spec.cluster_file import load_cluster_file
from tests.builders.realkube import RealKube, restart_api_server
from tests.dispatcher.builders import CLUSTER
from tests.e2e.log import TopicLog
from tests.node_watcher.builders import CLUSTER_FILE

TENANT_NAMESPACES = ("team-a", "team-b")  # where the tests' jobs run
FAST = DispatchSettings(restart_backoff_s=0.2, restart_backoff_max_s=1.0, handshake_poll_s=0.05)
TEST_RETRY = RetryPolicy(attempts=8, backoff=Backoff(initial=0.05, maximum=0.5))


#: what the dispatcher and the node-state watcher publish
OUTPUT_TOPICS = (RUNS_TOPIC, DISPATCHES_TOPIC, CAPACITY_TOPIC)


@dataclass
class Cluster:
    """The cluster ``east`` (kubesim, or a real control plane when ``sim`` is None) and the services on it."""

    sim: KubeSim | None
    access: ClusterAccess
    rest: KubeRest
    settings: KafkaSettings
    producer: EnvelopeProducer
    outputs: TopicLog
    plane: ControlPlane | None = None  # the real control plane, when it is one
    runners: dict[str, ServiceRunner] = field(default_factory=dict)
    dispatcher: Dispatcher | None = None
    watcher: NodeWatcher | None = None
    _tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _mains: dict[str, ServiceMain] = field(default_factory=dict)

    def require_sim(self) -> KubeSim:
        """kubesim's fault controls; the test is skipped on the real control plane."""
        if self.sim is None:
            pytest.skip("needs the simulated cluster's fault controls")
        return self.sim

    async def drop_watches(self) -> None:
        """End every watch the services hold: kubesim drops them; the real API server is killed and
        started again (its new watch cache then answers old resourceVersions with 410)."""
        if self.sim is not None:
            self.sim.drop_watches()
            return
        assert self.plane is not None
        await restart_api_server(self.plane, self.rest)

    async def decide(self, message: Message, envelope: Envelope | None = None) -> Envelope:
        """Publish a decision as the queue manager would; returns its envelope."""
        sent = envelope or make_envelope(message, "queue_manager")
        await self.producer.send_and_wait(DECISIONS_TOPIC, sent)
        return sent

    async def jobs(self, namespace: str, job_id: str) -> list[KubeObject]:
        items, _ = await self.rest.list(JOBS, namespace, label_selector=f"muster.dev/job-id={job_id}")
        return items

    async def pods(self, namespace: str, job_id: str) -> list[KubeObject]:
        items, _ = await self.rest.list(PODS, namespace, label_selector=f"muster.dev/job-id={job_id}")
        return items

    async def start_dispatcher(self, settings: DispatchSettings = FAST) -> None:
        main = DispatcherMain(self._options("dispatcher"), settings=settings)
        await self._start("dispatcher", main)
        self.dispatcher = main.dispatcher
        await self.runners["dispatcher"].loops[0].wait_assigned()

    async def start_watcher(self) -> None:
        main = NodeWatcherMain(self._options("node-watcher"))
        await self._start("watcher", main)
        self.watcher = main.watcher
        assert self.watcher is not None
        await self._until(self.watcher.ready.wait(), "watcher")

    async def stop(self, name: str) -> None:
        main = self._mains.pop(name, None)
        self.runners.pop(name, None)
        task = self._tasks.pop(name, None)
        if main is not None:
            main.stop()
        if task is not None:
            async with asyncio.timeout(30):
                await task

    def _options(self, service: str) -> ServeOptions:
        return ServeOptions(kafka=self.settings, cluster=CLUSTER, http_port=0, **self.access.fields(service))

    async def _start(self, name: str, main: ServiceMain) -> None:
        self._mains[name] = main
        self._tasks[name] = asyncio.create_task(main.run(handle_signals=False), name=f"test {name}")
        await self._until(main.composed.wait(), name)
        assert main.runner is not None
        self.runners[name] = main.runner

    async def _until(self, waiting: Coroutine[Any, Any, Any], name: str) -> None:
        """Wait for ``waiting`` unless the service task ends first (its error is raised)."""
        waiter = asyncio.ensure_future(waiting)
        task = self._tasks[name]
        async with asyncio.timeout(60):
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
            task.result()
            raise AssertionError(f"{name} stopped while starting")


@contextlib.asynccontextmanager
async def kube(real: RealKube | None) -> AsyncIterator[tuple[KubeSim | None, ControlPlane | None, ClusterAccess,
                                                              KubeRest]]:
    """The cluster file's ``east``: kubesim, or (with ``real``) the real control plane with exactly its
    nodes, the tenant namespace in place, and the services reaching it through their ServiceAccounts."""
    if real is None:
        sim = KubeSim.from_cluster_file(CLUSTER_FILE, cluster_name=CLUSTER, profile="zero")
        async with sim.serve(port=0) as url:
            api = await build_api_client(url)
            async with api:
                yield sim, None, ClusterAccess(url), KubeRest(api, retry=TEST_RETRY, request_timeout=10.0)
        return
    east = next(c for c in load_cluster_file(CLUSTER_FILE).clusters if c.name == CLUSTER)
    plane = await real.prepare(east)
    api = await build_api_client(kubeconfig=str(plane.admin_kubeconfig))
    async with api:
        rest = KubeRest(api, retry=TEST_RETRY, request_timeout=10.0)
        for namespace in TENANT_NAMESPACES:
            await ensure_namespace(rest, namespace)
        yield None, plane.plane, ClusterAccess(plane.plane.url, plane.kubeconfigs), rest


@contextlib.asynccontextmanager
async def running(settings: KafkaSettings, real: RealKube | None = None, *, dispatcher: bool = True,
                  watcher: bool = True, dispatch_settings: DispatchSettings = FAST) -> AsyncIterator[Cluster]:
    """A fresh cluster ``east`` (kubesim, or the real control plane) with the chosen services attached
    to it and to the broker."""
    async with kube(real) as (sim, plane, access, rest):
        outputs = TopicLog(settings, OUTPUT_TOPICS)
        await outputs.start()
        producer = EnvelopeProducer(settings)
        await producer.start()
        cluster = Cluster(sim, access, rest, settings, producer, outputs, plane=plane)
        try:
            if watcher:
                await cluster.start_watcher()
            if dispatcher:
                await cluster.start_dispatcher(dispatch_settings)
            yield cluster
        finally:
            for name in list(cluster.runners):
                await cluster.stop(name)
            await producer.stop()
            await outputs.stop()


async def eventually_true(check: Callable[[], Coroutine[Any, Any, bool]], *, within: float = 20.0) -> None:
    """Poll an async ``check`` until it holds."""
    async with asyncio.timeout(within):
        while True:
            if await check():
                return
            await asyncio.sleep(0.05)
