"""The fault-injection endpoints under ``/kubesim/`` (not part of the Kubernetes API)."""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from aiohttp import web

from services.kubesim.dcgm_exporter import exposition
from services.kubesim.errors import ApiError
from services.kubesim.kubelet import KubeletProfile
from services.kubesim.resources import JOBS, NODES, PODS
from services.kubesim.store import Store


class FaultTarget(Protocol):
    """What the endpoints read and call: ``KubeSim``, which serves them."""

    cluster_name: str
    profile: KubeletProfile
    store: Store

    def set_node_ready(self, name: str, ready: bool) -> None: ...

    def fail_pod(self, namespace: str, name: str, exit_code: int = 1) -> None: ...

    def drop_watches(self) -> int: ...

    def fail_api(self, status: int, seconds: float) -> None: ...

    def compact(self) -> None: ...


async def _json(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw:
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"invalid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object")
    return body


#: where kubesim plays the DCGM exporter of its nodes (``dcgm_exporter``: a pod's simulated GPU utilisation)
DCGM_PATH = "/kubesim/dcgm-exporter/metrics"


def admin_routes(sim: FaultTarget) -> list[web.RouteDef]:
    """``GET /kubesim/state``, the simulated DCGM exporter (``DCGM_PATH``) and POST endpoints that call the
    ``KubeSim`` fault methods."""

    async def state(request: web.Request) -> web.Response:
        store = sim.store
        body = {
            "cluster": sim.cluster_name,
            "profile": sim.profile.name,
            "resourceVersion": store.resource_version,
            "nodes": sum(1 for _ in store.view(NODES)),
            "pods": sum(1 for _ in store.view(PODS)),
            "jobs": sum(1 for _ in store.view(JOBS)),
            "watches": store.watch_count,
        }
        return web.json_response(body)

    async def node_ready(request: web.Request) -> web.Response:
        body = await _json(request)
        sim.set_node_ready(request.match_info["name"], bool(body.get("ready", True)))
        return web.json_response({"ok": True})

    async def fail_pod(request: web.Request) -> web.Response:
        body = await _json(request)
        sim.fail_pod(request.match_info["namespace"], request.match_info["name"], int(body.get("exitCode", 1)))
        return web.json_response({"ok": True})

    async def drop_watches(request: web.Request) -> web.Response:
        return web.json_response({"dropped": sim.drop_watches()})

    async def fail_api(request: web.Request) -> web.Response:
        body = await _json(request)
        sim.fail_api(int(body.get("status", 500)), float(body.get("seconds", 2.0)))
        return web.json_response({"ok": True})

    async def compact(request: web.Request) -> web.Response:
        sim.compact()
        return web.json_response({"resourceVersion": sim.store.resource_version})

    async def dcgm_metrics(request: web.Request) -> web.Response:
        return web.Response(text=exposition(sim.store.view(PODS)), content_type="text/plain")

    return [
        web.get("/kubesim/state", state),
        web.get(DCGM_PATH, dcgm_metrics),
        web.post("/kubesim/nodes/{name}/ready", node_ready),
        web.post("/kubesim/namespaces/{namespace}/pods/{name}/fail", fail_pod),
        web.post("/kubesim/watches/drop", drop_watches),
        web.post("/kubesim/api-failure", fail_api),
        web.post("/kubesim/compact", compact),
    ]
