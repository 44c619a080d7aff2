"""Shared builders for the Kubernetes client layer tests: objects, templates, a scripted event source."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from schemas.decisions import NodePods, PlacementPlan
from services.dispatcher.render import JobTemplate
from services.runtime.kube import KubeObject

HANG = "hang"  # a watch script ending in HANG keeps the stream open until cancelled


def obj(name: str, rv: int | str, namespace: str | None = "default", uid: str | None = None,
        **extra: Any) -> KubeObject:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv), "uid": uid or f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, **extra}


def event(kind: str, o: KubeObject) -> KubeObject:
    return {"type": kind, "object": o}


def bookmark(rv: int | str) -> KubeObject:
    return {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
                                           "metadata": {"resourceVersion": str(rv)}}}


def expired() -> KubeObject:
    return {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                        "code": 410, "reason": "Expired", "message": "too old resource version"}}


@dataclass
class FakeSource:
    """Lists and watch streams played from scripts; each watch call takes the next script.

    A script is a list of events, exceptions (raised where they stand) and optionally HANG at
    its end. When the scripts run out a watch hangs until cancelled.
    """

    lists: builtins.list[tuple[builtins.list[KubeObject], str] | BaseException] = field(default_factory=list)
    streams: builtins.list[builtins.list[Any]] = field(default_factory=list)
    watch_calls: builtins.list[str] = field(default_factory=list)
    list_calls: int = 0
    open_streams: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def describe(self) -> str:
        return "fake"

    async def list(self) -> tuple[builtins.list[KubeObject], str]:
        self.list_calls += 1
        self.changed.set()
        item = self.lists.pop(0)
        if isinstance(item, BaseException):
            raise item
        objects, rv = item
        return [dict(o) for o in objects], rv

    def watch(self, resource_version: str) -> AsyncIterator[KubeObject]:
        self.watch_calls.append(resource_version)
        self.changed.set()
        script = self.streams.pop(0) if self.streams else [HANG]
        return self._play(script)

    async def _play(self, script: builtins.list[Any]) -> AsyncIterator[KubeObject]:
        self.open_streams += 1
        try:
            for item in script:
                if isinstance(item, BaseException):
                    raise item
                if item == HANG:
                    await asyncio.Event().wait()
                yield item
        finally:
            self.open_streams -= 1

    async def wait_watch_calls(self, n: int) -> None:
        while len(self.watch_calls) < n:
            self.changed.clear()
            await self.changed.wait()


def template(**overrides: Any) -> JobTemplate:
    fields: dict[str, Any] = {
        "job_id": "train-1", "namespace": "team-a", "queue": "team-a", "image": "busybox:1.36",
        "command": ("python", "train.py"), "replicas": 2, "gpus_per_pod": 8, "gpu_type": "a100",
        "cpu_m": 8000, "memory_mb": 65536, "priority_class": "normal", "grace_period_s": 45.0,
    }
    fields.update(overrides)
    return JobTemplate(**fields)


def placement(*nodes: tuple[str, int], cluster: str = "east") -> PlacementPlan:
    return PlacementPlan(cluster=cluster, nodes=[NodePods(node=n, pods=p) for n, p in nodes])


class GatedSource:
    """Wraps a real event source; while ``gate`` is clear, new watches wait (the informer falls behind)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.gate.set()
        self.watch_versions: list[str] = []
        self.waiting = asyncio.Event()

    def describe(self) -> str:
        return f"gated {self.inner.describe()}"

    async def list(self) -> tuple[list[KubeObject], str]:
        result: tuple[list[KubeObject], str] = await self.inner.list()
        return result

    def watch(self, resource_version: str) -> AsyncIterator[KubeObject]:
        self.watch_versions.append(resource_version)
        return self._gated(resource_version)

    async def _gated(self, resource_version: str) -> AsyncIterator[KubeObject]:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        stream = self.inner.watch(resource_version)
        try:
            async for item in stream:
                yield item
        finally:
            await stream.aclose()


def lease(name: str, namespace: str, labels: dict[str, str], holder: str = "a") -> KubeObject:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"holderIdentity": holder}}


async def eventually(predicate: Any, interval: float = 0.02) -> None:
    """Poll ``predicate()`` until it holds (bound it with ``asyncio.timeout``), for state with no event to wait on."""
    while True:
        if predicate():
            return
        await asyncio.sleep(interval)
