"""The whole system in this event loop: kubesim clusters, the five services, an HTTP client and a topic log."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from schemas.config import MusterConfig
from services.core import SchedulerConfig
from services.dispatcher.main import DispatcherMain
from services.dispatcher.plans import DispatchSettings
from services.gateway.main import GatewayMain
from services.kubesim import KubeSim
from services.node_watcher.main import NodeWatcherMain
from services.queue_manager.main import QueueManagerMain
from services.quota_accountant.accountant import AccountantSettings
from services.quota_accountant.main import QuotaAccountantMain
from services.runtime.kafka import KafkaSettings
from services.runtime.kube import (
    JOBS,
    NODES,
    PODS,
    Backoff,
    KubeObject,
    KubeRest,
    RetryPolicy,
    build_api_client,
    ensure_namespace,
)
from services.runtime.options import ClusterAccess, ServeOptions
from tests.builders.realkube import RealKube
from tests.e2e.builders import ADMIN_TOKEN, member_token, tokens
from tests.e2e.log import TopicLog

# the test jobs run for seconds: a slowdown bound of 3x their estimate would promote jobs within the
# tests' own timing noise (slower on the real control plane), so promotion is left to starvation_age_s
SCHEDULER = SchedulerConfig(min_runtime_s=0.0, slowdown_limit=0.0)
DISPATCH = DispatchSettings(restart_backoff_s=0.2, restart_backoff_max_s=0.5, handshake_poll_s=0.05)
ACCOUNTANT = AccountantSettings(publish_interval_s=1.0)
CYCLE_PERIOD_S = 0.5
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
KUBE_RETRY = RetryPolicy(attempts=8, backoff=Backoff(initial=0.05, maximum=0.5))


@dataclass
class Service:
    """One service running as a task of this loop; ``stop`` asks its runner to end and waits for the task."""

    name: str
    task: asyncio.Task[None]
    stopper: Callable[[], None] | None = None

    async def started(self, ready: Callable[[], Awaitable[object]]) -> None:
        """Wait for ``ready()`` unless the task ends first (its error is raised)."""
        waiter = asyncio.ensure_future(ready())
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                await asyncio.wait({waiter, self.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not waiter.done():
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
        if self.task.done():
            self.task.result()
            raise AssertionError(f"{self.name} stopped while starting")

    async def stop(self) -> None:
        if self.stopper is not None:
            self.stopper()
        elif not self.task.done():
            self.task.cancel()
        async with asyncio.timeout(STOP_TIMEOUT_S):
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


class Api:
    """The gateway's HTTP API as one tenant member, or the administrator (``tenant=None``)."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    @staticmethod
    def _auth(tenant: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {member_token(tenant) if tenant else ADMIN_TOKEN}"}

    async def submit(self, spec: dict[str, Any], *, tenant: str = "team-a") -> str:
        r = await self.http.post("/v1/jobs", json=spec, headers=self._auth(tenant))
        assert r.status_code == 202, r.text
        job_id: str = r.json()["job_id"]
        return job_id

    async def job(self, job_id: str, *, tenant: str | None = None) -> dict[str, Any]:
        r = await self.http.get(f"/v1/jobs/{job_id}", headers=self._auth(tenant))
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    async def request(self, job_id: str, action: str, *, wait: float, tenant: str = "team-a") -> httpx.Response:
        """POST a request about a job (``cancel``, ``suspend``...) waiting up to ``wait`` s for its answer."""
        return await self.http.post(f"/v1/jobs/{job_id}/{action}", params={"wait": wait},
                                    headers=self._auth(tenant))

    async def cancel(self, job_id: str, *, tenant: str = "team-a") -> None:
        r = await self.http.post(f"/v1/jobs/{job_id}/cancel", json={"reason": "e2e"}, headers=self._auth(tenant))
        assert r.status_code == 202, r.text

    async def wait_state(self, job_id: str, *states: str, within: float = 60.0) -> dict[str, Any]:
        """Poll the job through the API until its state is one of ``states``."""
        return await self.wait_job(job_id, lambda job: job["state"] in states, within=within, what=f"in {states}")

    async def wait_job(self, job_id: str, condition: Callable[[dict[str, Any]], bool], *, within: float = 60.0,
                       what: str = "") -> dict[str, Any]:
        """Poll the job through the API until ``condition`` holds for it."""
        body: dict[str, Any] = {}
        try:
            async with asyncio.timeout(within):
                while True:
                    r = await self.http.get(f"/v1/jobs/{job_id}", headers=self._auth(None))
                    if r.status_code == 200:
                        body = r.json()
                        if condition(body):
                            return body
                    await asyncio.sleep(0.1)
        except TimeoutError:
            raise AssertionError(f"job {job_id} not {what} within {within}s; last seen {body}") from None


@dataclass
class Cluster:
    """One cluster (simulated, or a real control plane), an admin Kubernetes client of it, and how the
    services reach it."""

    name: str
    sim: KubeSim | None
    access: ClusterAccess
    rest: KubeRest

    async def jobs(self, job_id: str | None = None, namespace: str | None = None) -> list[KubeObject]:
        selector = f"muster.dev/job-id={job_id}" if job_id else None
        items, _ = await self.rest.list(JOBS, namespace, label_selector=selector)
        return items

    async def pods(self, job_id: str, namespace: str | None = None) -> list[KubeObject]:
        items, _ = await self.rest.list(PODS, namespace, label_selector=f"muster.dev/job-id={job_id}")
        return items

    async def wait_no_jobs(self, job_id: str, *, within: float = 20.0) -> None:
        """Wait until no Job object of ``job_id`` is left on the cluster."""
        left: list[KubeObject] = []
        try:
            async with asyncio.timeout(within):
                while True:
                    left = await self.jobs(job_id)
                    if not left:
                        return
                    await asyncio.sleep(0.1)
        except TimeoutError:
            names = [j["metadata"]["name"] for j in left]
            raise AssertionError(f"Jobs of {job_id} still on {self.name} after {within}s: {names}") from None

    async def wait_nodes_gone(self, names: set[str], *, within: float = 30.0) -> None:
        """Wait until none of the named nodes is left on the cluster."""
        left: set[str] = set(names)
        try:
            async with asyncio.timeout(within):
                while True:
                    nodes, _ = await self.rest.list(NODES)
                    left = names & {n["metadata"]["name"] for n in nodes}
                    if not left:
                        return
                    await asyncio.sleep(0.2)
        except TimeoutError:
            raise AssertionError(f"nodes still on {self.name} after {within}s: {sorted(left)}") from None


@dataclass
class System:
    """Everything that runs; ``services`` by name (``dispatcher/<cluster>``, ``node-watcher/<cluster>``...)."""

    settings: KafkaSettings
    config: MusterConfig
    config_file: Path
    tokens_file: Path
    clusters: dict[str, Cluster]
    log: TopicLog
    scheduler: SchedulerConfig = SCHEDULER
    services: dict[str, Service] = field(default_factory=dict)
    #: on an authenticated cluster, each service's own Kafka settings (``gateway``, ``queue-manager``...);
    #: ``settings`` is then the admin's, for the test's own reads and writes
    principals: Mapping[str, KafkaSettings] = field(default_factory=dict)
    gateway_url: str | None = None
    _api: Api | None = None

    @property
    def api(self) -> Api:
        assert self._api is not None, "the gateway has not started"
        return self._api

    def options(self, service: str | None = None, **changes: Any) -> ServeOptions:
        kafka = self.principals.get(service, self.settings) if service else self.settings
        base = ServeOptions(kafka=kafka, http_port=0, config_file=self.config_file,
                            tokens_file=self.tokens_file)
        return dataclasses.replace(base, **changes)

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> Service:
        service = Service(name, asyncio.create_task(coro, name=f"e2e {name}"))
        self.services[name] = service
        return service

    async def start_gateway(self) -> str:
        server = GatewayMain(self.options("gateway", **self.first_cluster().access.fields("gateway")))
        service = self._spawn("gateway", server.run(handle_signals=False))
        service.stopper = server.stop
        await service.started(server.ready.wait)
        assert server.url is not None
        self.gateway_url = server.url
        return server.url

    async def start_queue_manager(self) -> None:
        main = QueueManagerMain(self.options("queue-manager"), scheduler_config=self.scheduler,
                                period_s=CYCLE_PERIOD_S)
        service = self._spawn("queue-manager", main.run(handle_signals=False))
        service.stopper = main.stop
        await service.started(main.manager.ready.wait)

    async def start_accountant(self) -> None:
        main = QuotaAccountantMain(self.options("quota-accountant"), settings=ACCOUNTANT)
        service = self._spawn("quota-accountant", main.run(handle_signals=False))
        service.stopper = main.stop
        await service.started(main.accountant.ready.wait)

    async def start_dispatcher(self, cluster: str) -> None:
        options = self.options("dispatcher", cluster=cluster, instance=cluster,
                               **self.clusters[cluster].access.fields("dispatcher"))
        main = DispatcherMain(options, settings=DISPATCH)
        service = self._spawn(f"dispatcher/{cluster}", main.run(handle_signals=False))
        service.stopper = main.stop
        await service.started(main.composed.wait)
        assert main.runner is not None
        await service.started(main.runner.loops[0].wait_assigned)

    async def start_watcher(self, cluster: str) -> None:
        access = self.clusters[cluster].access.fields("node-watcher")
        main = NodeWatcherMain(self.options("node-watcher", cluster=cluster, instance=cluster, **access))
        service = self._spawn(f"node-watcher/{cluster}", main.run(handle_signals=False))
        service.stopper = main.stop
        await service.started(main.composed.wait)
        assert main.watcher is not None
        await service.started(main.watcher.ready.wait)

    async def stop(self, name: str) -> None:
        await self.services.pop(name).stop()

    async def stop_all(self) -> None:
        errors: list[BaseException] = []
        for name in reversed(list(self.services)):
            try:
                await self.stop(name)
            except Exception as exc:  # keep stopping the others; raised below
                errors.append(exc)
        if errors:
            raise errors[0]

    def first_cluster(self) -> Cluster:
        return next(iter(self.clusters.values()))


@contextlib.asynccontextmanager
async def running_system(settings: KafkaSettings, config: MusterConfig, tmp_path: Path, *,
                         scheduler: SchedulerConfig = SCHEDULER, real: RealKube | None = None,
                         principals: Mapping[str, KafkaSettings] | None = None) -> AsyncIterator[System]:
    """Start a cluster per cluster of ``config`` (kubesim, or with ``real`` one real control plane each),
    then gateway, node watchers, accountant, queue manager and dispatchers (each with its own Kafka
    settings from ``principals``, when given)."""
    config_file = tmp_path / "cluster.yaml"
    config_file.write_text(yaml.safe_dump(config.model_dump(mode="json")), encoding="utf-8")
    tokens_file = tmp_path / "tokens.yaml"
    tokens_file.write_text(yaml.safe_dump(tokens(tuple(t.name for t in config.tenants))), encoding="utf-8")
    async with contextlib.AsyncExitStack() as stack:
        clusters: dict[str, Cluster] = {}
        for index, cluster in enumerate(config.clusters):
            if real is not None:
                plane = await real.prepare(cluster, index)
                api = await stack.enter_async_context(
                    await build_api_client(kubeconfig=str(plane.admin_kubeconfig)))
                rest = KubeRest(api, retry=KUBE_RETRY, request_timeout=10.0)
                for tenant in config.tenants:  # as an administrator sets a tenant up (users create Jobs there)
                    await ensure_namespace(rest, tenant.namespace)
                clusters[cluster.name] = Cluster(cluster.name, None, ClusterAccess(plane.plane.url, plane.kubeconfigs),
                                                 rest)
                continue
            sim = KubeSim(config, cluster_name=cluster.name, profile="zero")
            url = await stack.enter_async_context(sim.serve(port=0))
            api = await stack.enter_async_context(await build_api_client(url))
            clusters[cluster.name] = Cluster(cluster.name, sim, ClusterAccess(url),
                                             KubeRest(api, retry=KUBE_RETRY, request_timeout=10.0))
        log = TopicLog(settings)
        await log.start()
        stack.push_async_callback(log.stop)
        system = System(settings, config, config_file, tokens_file, clusters, log, scheduler,
                        principals=dict(principals or {}))
        stack.push_async_callback(system.stop_all)
        url = await system.start_gateway()
        system._api = Api(await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=10)))
        for name in clusters:
            await system.start_watcher(name)
        await system.start_accountant()
        await system.start_queue_manager()
        for name in clusters:
            await system.start_dispatcher(name)
        yield system
