"""The watcher's Kubernetes shell: Node, Pod and Job informers feeding the trackers and the outbox."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from schemas.capacity import NodeRemoved
from schemas.kube import JOB_ID
from services.node_watcher.gpu_metrics import Samples, exporter_urls, merged, parse_selector, pod_utilisation
from services.node_watcher.metrics import WatcherMetrics
from services.node_watcher.provisioning import ProvisioningTracker
from services.node_watcher.publisher import Outbox
from services.node_watcher.runs import chain_of
from services.node_watcher.tracker import NodeTracker, RunTracker
from services.node_watcher.workloads import WorkloadTracker
from services.runtime.clock import Clock, utc_now
from services.runtime.kube import (
    ApiEventSource,
    Backoff,
    Informer,
    KubeObject,
    KubeRest,
    Resource,
    job_cache,
    node_cache,
    pod_cache,
)
from services.runtime.kube.errors import is_not_found, status_of
from services.runtime.kube.resources import PROVISIONING_REQUESTS
from services.spec.kinds import KINDS, WorkloadKind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuMetrics:
    """Where the watcher reads GPU utilisation per pod: NVIDIA DCGM exporters, one per GPU node, read every
    ``interval_s``; a GPU at most ``idle_at_most`` percent busy is idle. The exporters are ``urls`` (their
    ``/metrics``), and the running pods ``selector`` picks (a DaemonSet's labels), read at their pod IP and
    ``port``. From the environment: ``MUSTER_GPU_METRICS_URLS`` (comma-separated),
    ``MUSTER_GPU_METRICS_SELECTOR`` (``key=value,...``), ``MUSTER_GPU_METRICS_PORT`` (default 9400),
    ``MUSTER_GPU_METRICS_INTERVAL_S`` (default 30). Neither URLs nor a selector: nothing is read and nothing
    is released for idleness."""

    urls: tuple[str, ...] = ()
    selector: Mapping[str, str] = field(default_factory=dict)
    port: int = 9400
    interval_s: float = 30.0
    idle_at_most: float = 0.0
    timeout_s: float = 5.0

    @property
    def enabled(self) -> bool:
        return bool(self.urls or self.selector)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GpuMetrics:
        urls = tuple(u.strip() for u in env.get("MUSTER_GPU_METRICS_URLS", "").split(",") if u.strip())
        return cls(urls=urls, selector=parse_selector(env.get("MUSTER_GPU_METRICS_SELECTOR", "")),
                   port=int(env.get("MUSTER_GPU_METRICS_PORT", "9400")),
                   interval_s=float(env.get("MUSTER_GPU_METRICS_INTERVAL_S", "30")))



class NodeWatcher:
    """Watches one cluster. Pods are listed first so the first node states already count GPUs in use."""

    def __init__(self, rest: KubeRest, cluster: str, outbox: Outbox, metrics: WatcherMetrics,
                 *, backoff: Backoff | None = None,
                 previously_published: Callable[[], Awaitable[set[str]]] | None = None,
                 clock: Clock = utc_now, gpu_metrics: GpuMetrics | None = None) -> None:
        self.rest = rest
        self.previously_published = previously_published
        self.cluster = cluster
        self.outbox = outbox
        self.metrics = metrics
        self.clock = clock
        self.backoff = backoff
        self.nodes = NodeTracker(cluster)
        self.runs = RunTracker(cluster, node_down=self.nodes.down)
        self.workloads = WorkloadTracker(cluster)
        self.provisioning = ProvisioningTracker(cluster)
        self.gpu_metrics = gpu_metrics or GpuMetrics()
        self.ready = asyncio.Event()

    def _on_node(self, event_type: str, obj: KubeObject) -> None:
        messages = self.nodes.on_node(event_type, obj, self.clock())
        self.outbox.put(messages)
        self.outbox.put(self.provisioning.on_node(event_type, obj, self.clock()))
        if messages:
            self.metrics.capacity(self.nodes.published.values())

    def _on_pod(self, event_type: str, obj: KubeObject) -> None:
        now = self.clock()
        self.outbox.put(self.runs.on_pod(event_type, obj, now), chain=self.runs.chain_of_pod(obj))
        self.outbox.put(self.workloads.on_pod(event_type, obj, now))
        capacity = self.nodes.on_pod(event_type, obj, now)
        self.outbox.put(capacity)
        if capacity:
            self.metrics.capacity(self.nodes.published.values())

    def _on_job(self, event_type: str, obj: KubeObject) -> None:
        self.outbox.put(self.runs.on_job(event_type, obj, self.clock()), chain=chain_of(obj))

    def _on_workload(self, kind: WorkloadKind) -> Callable[[str, KubeObject], None]:
        def handle(event_type: str, obj: KubeObject) -> None:
            self.outbox.put(self.workloads.on_object(kind, event_type, obj, self.clock()), chain=chain_of(obj))

        return handle

    async def _workload_informers(self) -> list[Informer]:
        """An informer of the objects carrying a Muster job id, for every workload kind this cluster serves
        (a kind whose resource is not installed is skipped: no CRD, no such jobs)."""
        informers = []
        for kind in KINDS:
            ident = kind.identity
            if ident.kind in ("Job", "Pod"):
                continue  # batch Jobs are watched as Muster's own Jobs; a group of Pods through its pods
            resource = Resource(ident.api_version, ident.kind, ident.plural, ident.namespaced)
            try:
                await self.rest.list(resource, label_selector=JOB_ID, page_size=1)
            except Exception as exc:
                if is_not_found(exc):
                    continue
                if status_of(exc) == 403:
                    log.warning("cluster %s: not allowed to watch %s (RBAC): runs of such jobs are not observed",
                                self.cluster, resource.plural)
                    continue
                raise
            informer = Informer(ApiEventSource(self.rest, resource, label_selector=JOB_ID), backoff=self.backoff)
            informer.add_handler(self._on_workload(kind))
            informers.append(informer)
        return informers

    def _on_request(self, event_type: str, obj: KubeObject) -> None:
        self.outbox.put(self.provisioning.on_request(event_type, obj, self.clock()))

    async def _request_informer(self) -> Informer | None:
        """An informer of Muster's ProvisioningRequests, when the cluster serves them (else None)."""
        try:
            await self.rest.list(PROVISIONING_REQUESTS, label_selector=JOB_ID, page_size=1)
        except Exception as exc:
            if is_not_found(exc) or status_of(exc) == 403:
                return None  # no autoscaler API here (or not allowed): nodes are never bought on this cluster
            raise
        informer = Informer(ApiEventSource(self.rest, PROVISIONING_REQUESTS, label_selector=JOB_ID),
                            backoff=self.backoff)
        informer.add_handler(self._on_request)
        return informer

    async def _tick_requests(self, stop: asyncio.Event) -> None:
        """Answer provisioned requests whose nodes were not all observed within their grace period."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=5.0)
            self.outbox.put(self.provisioning.tick(self.clock()))

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the three caches until ``stop`` is set."""
        pods = pod_cache(self.rest, backoff=self.backoff)
        jobs = job_cache(self.rest, label_selector=JOB_ID, backoff=self.backoff)
        nodes = node_cache(self.rest, backoff=self.backoff)
        pods.add_handler(self._on_pod)
        jobs.add_handler(self._on_job)
        nodes.add_handler(self._on_node)
        informers: list[Informer] = [pods, jobs, nodes]
        try:
            workloads = await self._workload_informers()
            requests = await self._request_informer()
            if requests is not None:
                workloads.append(requests)
            informers += workloads
            pods.start()
            jobs.start()
            for informer in workloads:
                informer.start()
            if not await _synced_or_stopped([pods, jobs, *workloads], stop):
                return
            nodes.start()
            if not await _synced_or_stopped([nodes], stop):
                return
            await self._retire_vanished_nodes()
            log.info("cluster %s: watching %d nodes, %d pods, %d Muster jobs", self.cluster,
                     len(nodes.store), len(pods.store), len(jobs.store))
            self.ready.set()
            async with asyncio.TaskGroup() as group:
                if requests is not None:
                    group.create_task(self._tick_requests(stop), name=f"node_watcher:{self.cluster}:requests")
                if self.gpu_metrics.enabled:
                    await self._read_gpus(stop, pods)
                await stop.wait()
        finally:
            for informer in informers:
                await informer.stop()

    async def _read_gpus(self, stop: asyncio.Event, pods: Informer) -> None:
        """Read every exporter each ``interval_s`` until ``stop``; the samples go to the workload tracker. The
        exporter pods the selector picks are found in the pod cache afresh each time."""
        settings = self.gpu_metrics
        failing: set[str] = set()
        picked = f" and the pods labelled {dict(settings.selector)} (port {settings.port})" if settings.selector else ""
        log.info("cluster %s: reading GPU utilisation every %gs from %d exporters%s", self.cluster,
                 settings.interval_s, len(settings.urls), picked)
        async with httpx.AsyncClient(timeout=settings.timeout_s) as client:
            while not stop.is_set():
                answers: list[Samples] = []
                found = exporter_urls(pods.items(), settings.selector, settings.port)
                for url in dict.fromkeys([*settings.urls, *found]):
                    try:
                        response = await client.get(url)
                        response.raise_for_status()
                        answers.append(pod_utilisation(response.text))
                        failing.discard(url)
                    except (httpx.HTTPError, ValueError) as exc:
                        if url not in failing:  # once per failing streak
                            failing.add(url)
                            log.warning("cluster %s: GPU metrics from %s unreadable (its pods count as "
                                        "unmeasured, never idle): %s", self.cluster, url, exc)
                self.outbox.put(self.workloads.on_gpu_samples(merged(answers), self.clock(), settings.idle_at_most))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), settings.interval_s)

    async def _retire_vanished_nodes(self) -> None:
        """``NodeRemoved`` for nodes the capacity topic still lists but the cluster no longer has."""
        if self.previously_published is None:
            return
        try:
            known = await self.previously_published()
        except Exception:
            log.exception("cluster %s: could not read the published capacity; vanished nodes stay listed",
                          self.cluster)
            return
        now = self.clock()
        vanished = sorted(known - set(self.nodes.nodes))
        self.outbox.put(NodeRemoved(cluster=self.cluster, node=name, observed_at=now) for name in vanished)
        if vanished:
            log.info("cluster %s: nodes gone while not watching: %s", self.cluster, ", ".join(vanished))


async def _synced_or_stopped(informers: list[Informer], stop: asyncio.Event) -> bool:
    """Wait until every informer has listed once; False if ``stop`` came first."""
    synced: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*(i.wait_synced() for i in informers)))
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
    for task in (synced, stopped):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return not stop.is_set()
