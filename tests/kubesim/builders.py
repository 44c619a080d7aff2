"""Manifests and polling helpers for the kubesim tests."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

CLUSTER_FILE = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DURATION = "kubesim.muster.dev/duration-seconds"
EXIT_CODE = "kubesim.muster.dev/exit-code"


def pod_spec(gpus: int = 0, **extra: Any) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        "tolerations": [GPU_TOLERATION],
    }
    spec.update(extra)
    return spec


def pod(name: str, namespace: str = "team-a", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                     "annotations": annotations or {}},
        "spec": pod_spec(**spec),
    }


def job(name: str, namespace: str = "team-a", completions: int = 1, parallelism: int = 1,
        duration: float | None = 0.2, exit_code: int | None = None, gpus: int = 0, indexed: bool = False,
        **spec: Any) -> dict[str, Any]:
    annotations = {}
    if duration is not None:
        annotations[DURATION] = str(duration)
    if exit_code is not None:
        annotations[EXIT_CODE] = str(exit_code)
    body: dict[str, Any] = {
        "completions": completions,
        "parallelism": parallelism,
        "template": {"metadata": {"annotations": annotations},
                     "spec": pod_spec(gpus, restartPolicy="Never")},
    }
    if indexed:
        body["completionMode"] = "Indexed"
    body.update(spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": body}


async def eventually(check: Callable[[], Any], within: float = 5.0, interval: float = 0.02, what: str = "") -> Any:
    """Poll ``check`` (a function or a coroutine function) every ``interval`` s until it returns a truthy
    value, and return that as soon as it does; fails the test after ``within`` s, saying ``what`` it
    waited for."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"{what or 'condition'} not met within {within}s; last result: {result!r}")
        await asyncio.sleep(interval)


class Api:
    """A thin JSON client over aiohttp for one served KubeSim."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    async def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                   params: dict[str, str] | None = None, headers: dict[str, str] | None = None,
                   ) -> tuple[int, Any]:
        data = orjson.dumps(body) if body is not None and not isinstance(body, str | bytes) else body
        hdrs = {"Content-Type": content_type, **(headers or {})}
        async with self.session.request(method, self.url + path, data=data, params=params, headers=hdrs) as r:
            raw = await r.read()
            try:
                return r.status, orjson.loads(raw)
            except orjson.JSONDecodeError:
                return r.status, raw.decode()

    async def get(self, path: str, **params: str) -> tuple[int, Any]:
        return await self.call("GET", path, params=params or None)

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        return await self.call("POST", path, body)

    async def put(self, path: str, body: Any) -> tuple[int, Any]:
        return await self.call("PUT", path, body)

    async def patch(self, path: str, body: Any, content_type: str, **params: str) -> tuple[int, Any]:
        return await self.call("PATCH", path, body, content_type, params=params or None)

    async def delete(self, path: str, body: Any = None, **params: str) -> tuple[int, Any]:
        return await self.call("DELETE", path, body, params=params or None)

    async def watch(self, path: str, count: int, limit_s: float = 5.0, **params: str) -> list[dict[str, Any]]:
        """Read ``count`` watch events (or fewer if the stream ends first)."""
        events: list[dict[str, Any]] = []
        query = {"watch": "1", **params}
        async with self.session.get(self.url + path, params=query,
                                    timeout=aiohttp.ClientTimeout(total=limit_s)) as r:
            assert r.status == 200
            async for line in r.content:
                if line.strip():
                    events.append(orjson.loads(line))
                if len(events) >= count:
                    break
        return events
