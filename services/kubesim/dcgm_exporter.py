"""Plays NVIDIA's DCGM exporter for simulated GPU nodes (kubesim's, or the KWOK nodes of the local real control
plane), where no GPU exists: ``GET /metrics`` answers ``DCGM_FI_DEV_GPU_UTIL`` for each GPU of every running
pod that holds GPUs, labelled with the pod, its namespace and container as the exporter's Kubernetes mode
labels them. This is a simulation, clearly: a pod's utilisation is its annotation
``muster.dev/simulated-gpu-util`` (percent, changeable while it runs; absent: 0, since nothing computes on a
simulated node). The node watcher reads it as it would read the real exporters (``MUSTER_GPU_METRICS_URLS``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from schemas.kube import GPU_RESOURCE, MUSTER_PREFIX
from services.runtime.kube import PODS, KubeRest

#: a pod's simulated GPU utilisation in percent (0-100)
SIMULATED_UTIL = MUSTER_PREFIX + "simulated-gpu-util"
METRIC = "DCGM_FI_DEV_GPU_UTIL"


def exposition(pods: Iterable[Mapping[str, Any]]) -> str:
    """The exporter's answer for these pods (Prometheus' text format): one sample per GPU of each running pod."""
    lines = [f"# HELP {METRIC} GPU utilization (in %).", f"# TYPE {METRIC} gauge"]
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") != "Running" or not spec.get("nodeName"):
            continue
        util = _percent((meta.get("annotations") or {}).get(SIMULATED_UTIL))
        for container in spec.get("containers") or []:
            limits = (container.get("resources") or {}).get("limits") or {}
            for gpu in range(_count(limits.get(GPU_RESOURCE))):
                labels = (f'gpu="{gpu}",UUID="GPU-sim-{meta.get("uid", "")}-{gpu}",Hostname="{spec["nodeName"]}",'
                          f'container="{container.get("name", "")}",namespace="{meta.get("namespace", "")}",'
                          f'pod="{meta.get("name", "")}"')
                lines.append(f"{METRIC}{{{labels}}} {util:g}")
    return "\n".join(lines) + "\n"


def _percent(text: object) -> float:
    try:
        return min(max(float(str(text)), 0.0), 100.0)
    except ValueError:
        return 0.0


def _count(value: object) -> int:
    try:
        return max(int(str(value)), 0)
    except ValueError:
        return 0


class DcgmExporter:
    """The simulated exporter of every node of one cluster, reading its pods through ``rest`` on each scrape."""

    def __init__(self, rest: KubeRest) -> None:
        self.rest = rest

    async def metrics(self, request: web.Request) -> web.Response:
        pods, _ = await self.rest.list(PODS)
        return web.Response(text=exposition(pods), content_type="text/plain")

    @asynccontextmanager
    async def serve(self, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
        """Serve ``/metrics`` on ``host:port`` (0: a free port); yields its URL."""
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
            yield f"http://{host}:{runner.addresses[0][1]}/metrics"
        finally:
            await runner.cleanup()
