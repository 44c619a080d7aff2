"""``KubeSim``: one simulated cluster of the cluster file, served over HTTP with fault injection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web

from schemas.config import ClusterConfig, MusterConfig
from services.kubesim.admin import admin_routes
from services.kubesim.api import KubeApi, error_middleware
from services.kubesim.errors import ApiError
from services.kubesim.events import EventRecorder
from services.kubesim.gc import GarbageCollector
from services.kubesim.jobs import JobController
from services.kubesim.kubelet import PROFILES, Kubelet, KubeletProfile
from services.kubesim.meta import now_micro
from services.kubesim.nodes import cluster_nodes, with_readiness
from services.kubesim.registry import Registry
from services.kubesim.resources import LEASES, NAMESPACES, NODES, PODS
from services.kubesim.scheduler import Scheduler
from services.kubesim.store import Store, StoreEvent
from services.spec.cluster_file import load_cluster_file

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class KubeSim:
    """A Kubernetes API server with a Job controller, scheduler, kubelet and garbage collector behind it."""

    def __init__(
        self,
        config: MusterConfig,
        cluster_name: str | None = None,
        profile: str | KubeletProfile = "zero",
        bookmark_interval: float | None = None,
        history_limit: int = 10_000,
        seed: int = 0,
    ) -> None:
        self.config = config
        self.cluster: ClusterConfig = self._pick_cluster(config, cluster_name)
        self.cluster_name = self.cluster.name
        if isinstance(profile, str):
            if profile not in PROFILES:
                raise ValueError(f"unknown profile {profile!r}; choose one of {sorted(PROFILES)}")
            profile = PROFILES[profile]
        self.profile = profile
        self.bookmark_interval = bookmark_interval or (1.0 if profile.name == "zero" else 10.0)
        self.store = Store(history_limit)
        self.registry = Registry(self.store)
        self.events = EventRecorder(self.registry)
        self.gc = GarbageCollector(self.registry)
        self.jobs = JobController(self.registry, self.events)
        self.scheduler = Scheduler(self.registry, self.events)
        self.kubelet = Kubelet(self.registry, self.events, profile, seed)
        self._api_failure: tuple[int, float] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.url: str | None = None
        self._populate()
        self.store.add_listener(self._dispatch)

    @classmethod
    def from_cluster_file(
        cls, path: str | Path, cluster_name: str | None = None, profile: str = "zero", **kwargs: object
    ) -> KubeSim:
        return cls(load_cluster_file(path), cluster_name=cluster_name, profile=profile, **kwargs)  # type: ignore[arg-type]

    @staticmethod
    def _pick_cluster(config: MusterConfig, name: str | None) -> ClusterConfig:
        if not config.clusters:
            raise ValueError("the cluster file declares no clusters")
        if name is None:
            return config.clusters[0]
        for cluster in config.clusters:
            if cluster.name == name:
                return cluster
        raise ValueError(f"no cluster named {name!r}; known: {[c.name for c in config.clusters]}")

    def _populate(self) -> None:
        namespaces = list(SYSTEM_NAMESPACES) + [t.namespace for t in self.config.tenants]
        for ns in dict.fromkeys(namespaces):
            self.registry.create(NAMESPACES, None, {"metadata": {"name": ns}})
        for node in cluster_nodes(self.cluster):
            created = self.registry.create(NODES, None, node)
            name = created["metadata"]["name"]
            self.registry.create(LEASES, "kube-node-lease", {
                "metadata": {"name": name, "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": name, "uid": created["metadata"]["uid"]}]},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()},
            })

    def _dispatch(self, ev: StoreEvent) -> None:
        self.gc.on_event(ev)
        self.jobs.on_event(ev)
        self.scheduler.on_event(ev)
        self.kubelet.on_event(ev)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the controllers on the running loop (``serve`` does this)."""
        self._loop = asyncio.get_running_loop()
        for controller in (self.gc, self.jobs, self.scheduler, self.kubelet):
            controller.start(self._loop)
        self.scheduler.enqueue("__all__")

    def stop(self) -> None:
        for controller in (self.gc, self.jobs, self.scheduler, self.kubelet):
            controller.stop()
        self._loop = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[error_middleware(self._failing_status)], client_max_size=64 * 2**20)
        app.add_routes(admin_routes(self))
        app.add_routes(KubeApi(self.registry, self.bookmark_interval).routes())
        return app

    @asynccontextmanager
    async def serve(self, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
        """Serve the API; yields the base URL, e.g. ``http://127.0.0.1:40123``."""
        self.start()
        runner = web.AppRunner(self.app(), handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
            bound = runner.addresses[0]
            self.url = f"http://{host}:{bound[1]}"
            yield self.url
        finally:
            self.drop_watches()
            await runner.cleanup()
            self.stop()
            self.url = None

    # -- fault injection -------------------------------------------------------------------------
    def set_node_ready(self, name: str, ready: bool) -> None:
        """Mark a node Ready or NotReady (with unreachable taints); pods on a NotReady node fail NodeLost."""
        node = self.store.get(NODES, "", name)
        self.registry.write(NODES, with_readiness(node, ready))

    def fail_pod(self, namespace: str, name: str, exit_code: int = 1) -> None:
        """End a pod's containers now with ``exit_code`` (Failed, or Succeeded for 0)."""
        pod = self.store.get(PODS, namespace, name)
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            raise ApiError(409, f"pod {namespace}/{name} has already finished", "Conflict")
        self.kubelet.finish(pod, exit_code)

    def drop_watches(self) -> int:
        """Close every open watch stream; returns how many were closed."""
        return self.store.drop_watches()

    def fail_api(self, status: int = 500, seconds: float = 2.0) -> None:
        """Answer every Kubernetes API request with ``status`` for ``seconds``."""
        loop = self._loop or asyncio.get_event_loop()
        self._api_failure = (status, loop.time() + seconds)

    def _failing_status(self) -> int | None:
        if self._api_failure is None or self._loop is None:
            return None
        status, until = self._api_failure
        if self._loop.time() >= until:
            self._api_failure = None
            return None
        return status

    def compact(self) -> None:
        """Forget the event history: watches from an older resourceVersion get 410 Gone."""
        self.store.compact()
