"""The Kubernetes REST API over aiohttp: routing, CRUD verbs, lists, watches and Status errors."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import yaml
from aiohttp import web

from services.kubesim import discovery
from services.kubesim.errors import ApiError, status_object
from services.kubesim.meta import Obj
from services.kubesim.openapi import openapi_v3_group, openapi_v3_root
from services.kubesim.patch import APPLY_PATCH
from services.kubesim.registry import Registry
from services.kubesim.resources import PODS, ResourceType, lookup, resources_in
from services.kubesim.selectors import parse_field_selector, parse_label_selector
from services.kubesim.tables import table, wants_table
from services.kubesim.watch import serve_watch

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Target:
    """What a request path names."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def error_response(exc: ApiError) -> web.Response:
    return json_response(exc.status(), exc.code)


def _parse_target(group: str, version: str, rest: list[str]) -> Target:
    namespaced_plurals = {r.plural for r in resources_in(group, version) if r.namespaced}
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in namespaced_plurals:
        ns, plural, tail = rest[1], rest[2], rest[3:]
    else:
        ns, plural, tail = None, rest[0], rest[1:]
    rt = lookup(group, version, plural)
    if rt is None or len(tail) > 2:
        raise ApiError(404, "the server could not find the requested resource", "NotFound")
    name = tail[0] if tail else None
    sub = tail[1] if len(tail) > 1 else ""
    if sub and sub not in rt.subresources and not (rt is PODS and sub == "binding"):
        raise ApiError(404, "the server could not find the requested resource", "NotFound")
    if not rt.namespaced and ns is not None:
        raise ApiError(404, "the server could not find the requested resource", "NotFound")
    return Target(rt, ns, name, sub)


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    try:
        if request.content_type.startswith(APPLY_PATCH) or request.content_type.endswith("yaml"):
            return yaml.safe_load(raw)
        return orjson.loads(raw)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise ApiError(400, f"couldn't get version/kind; json parse error: {exc}", "BadRequest") from exc


class KubeApi:
    """Request handlers for ``/api`` and ``/apis`` bound to one registry."""

    def __init__(self, registry: Registry, bookmark_interval: float) -> None:
        self.registry = registry
        self.store = registry.store
        self.bookmark_interval = bookmark_interval

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/version", self._version),
            web.get("/healthz", self._ok),
            web.get("/readyz", self._ok),
            web.get("/livez", self._ok),
            web.get("/openapi/v3", self._openapi_root),
            web.get("/openapi/v3/{tail:.*}", self._openapi_group),
            web.route("*", "/api", self._core),
            web.route("*", "/api/{tail:.*}", self._core),
            web.route("*", "/apis", self._groups),
            web.route("*", "/apis/{tail:.*}", self._groups),
        ]

    async def _version(self, request: web.Request) -> web.Response:
        return json_response(discovery.version_info())

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _openapi_root(self, request: web.Request) -> web.Response:
        return json_response(openapi_v3_root())

    async def _openapi_group(self, request: web.Request) -> web.Response:
        doc = openapi_v3_group(request.match_info["tail"])
        if doc is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        return json_response(doc)

    async def _core(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.match_info.get("tail", "").split("/") if p]
        if not parts:
            return json_response(discovery.api_versions())
        if parts[0] != "v1":
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if len(parts) == 1:
            return json_response(discovery.resource_list("", "v1"))
        return await self._resource(request, _parse_target("", "v1", parts[1:]))

    async def _groups(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.match_info.get("tail", "").split("/") if p]
        if not parts:
            return json_response(discovery.api_groups())
        if len(parts) == 1:
            group = discovery.api_group(parts[0])
            if group is None:
                raise ApiError(404, "the server could not find the requested resource", "NotFound")
            return json_response(group)
        if len(parts) == 2:
            resources = discovery.resource_list(parts[0], parts[1])
            if resources is None:
                raise ApiError(404, "the server could not find the requested resource", "NotFound")
            return json_response(resources)
        return await self._resource(request, _parse_target(parts[0], parts[1], parts[2:]))

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        method = request.method
        if t.name is None:
            if method == "GET":
                return await self._list(request, t)
            if method == "POST":
                created = self.registry.create(t.rt, t.namespace, await _body(request))
                return json_response(created, 201)
            if method == "DELETE":
                return await self._delete_collection(request, t)
        elif method == "GET":
            if t.subresource == "log":
                return self._log(t)
            return self._one(request, self.store.get(t.rt, t.namespace or "", t.name), t)
        elif method == "PUT" and t.subresource != "binding":
            body = await _body(request)
            return json_response(self.registry.update(t.rt, t.namespace or "", t.name, body, t.subresource))
        elif method == "PATCH" and t.subresource != "binding":
            if t.subresource == "log":
                raise ApiError(405, "the server does not allow this method on the requested resource")
            if request.content_type.startswith(APPLY_PATCH) and not request.query.get("fieldManager"):
                raise ApiError(400, "PATCH, application/apply-patch+yaml requires fieldManager to be set")
            patched = self.registry.patch(t.rt, t.namespace or "", t.name, request.content_type,
                                          await _body(request), t.subresource)
            return json_response(patched)
        elif method == "POST" and t.subresource == "binding":
            return self._bind(t, await _body(request))
        elif method == "DELETE" and not t.subresource:
            return json_response(await self._delete_one(request, t))
        raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")

    def _one(self, request: web.Request, obj: Obj, t: Target) -> web.Response:
        if wants_table(request.headers.get("Accept", "")):
            meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
            return json_response(table(t.rt.kind, [obj], meta, request.query.get("includeObject", "Object")))
        return json_response(obj)

    async def _list(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        labels = parse_label_selector(q.get("labelSelector"))
        fields = parse_field_selector(q.get("fieldSelector"))
        as_table = wants_table(request.headers.get("Accept", ""))
        if q.get("watch", "").lower() in ("1", "true"):
            return await serve_watch(request, self.store, t.rt, t.namespace, labels, fields,
                                     self.bookmark_interval, as_table)
        items, rv = self.store.list(t.rt, t.namespace, labels, fields)
        start = 0
        if q.get("continue"):
            try:
                token = orjson.loads(base64.urlsafe_b64decode(q["continue"].encode()))
                start, rv = int(token["start"]), int(token["rv"])
            except (ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
                raise ApiError(400, "continue key is not valid", "BadRequest") from exc
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        limit = int(q["limit"]) if q.get("limit", "").isdigit() and int(q["limit"]) > 0 else None
        page = items[start:start + limit] if limit else items[start:]
        if limit and start + limit < len(items):
            meta["continue"] = base64.urlsafe_b64encode(orjson.dumps({"start": start + limit, "rv": rv})).decode()
            if not (q.get("labelSelector") or q.get("fieldSelector")):  # the real server cannot count those
                meta["remainingItemCount"] = len(items) - start - limit
        if as_table:
            return json_response(table(t.rt.kind, page, meta, q.get("includeObject", "Object")))
        return json_response({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version, "metadata": meta,
                              "items": page})

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        body = await _body(request)
        options: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
        q = request.query
        if q.get("gracePeriodSeconds"):
            options["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
        if q.get("propagationPolicy"):
            options["propagationPolicy"] = q["propagationPolicy"]
        if options.get("orphanDependents") is True and "propagationPolicy" not in options:
            options["propagationPolicy"] = "Orphan"
        return options

    async def _delete_one(self, request: web.Request, t: Target) -> Obj:
        opts = await self._delete_options(request)
        assert t.name is not None
        return self.registry.delete(t.rt, t.namespace or "", t.name, opts.get("gracePeriodSeconds"),
                                    opts.get("propagationPolicy"), opts.get("preconditions"))

    async def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        opts = await self._delete_options(request)
        labels = parse_label_selector(request.query.get("labelSelector"))
        fields = parse_field_selector(request.query.get("fieldSelector"))
        items, _ = self.store.list(t.rt, t.namespace, labels, fields)
        deleted = []
        for obj in items:
            m = obj["metadata"]
            try:
                deleted.append(self.registry.delete(t.rt, m.get("namespace", ""), m["name"],
                                                    opts.get("gracePeriodSeconds"), opts.get("propagationPolicy")))
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return json_response({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version,
                              "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": deleted})

    def _bind(self, t: Target, body: Any) -> web.Response:
        node = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
        if not node:
            raise ApiError(422, "Binding target name is required", "Invalid")
        assert t.name is not None
        pod = self.store.get(PODS, t.namespace or "", t.name)
        if (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(409, f'pod {t.name} is already assigned to node "{pod["spec"]["nodeName"]}"', "Conflict",
                           {"name": t.name, "kind": "pods/binding"})
        pod["spec"]["nodeName"] = node
        self.registry.write(PODS, pod)
        return json_response(status_object(201, "", ""), 201)

    def _log(self, t: Target) -> web.Response:
        assert t.name is not None
        pod = self.store.get(PODS, t.namespace or "", t.name)
        status = pod.get("status") or {}
        lines = [f"kubesim: pod {t.namespace}/{t.name} on node {(pod.get('spec') or {}).get('nodeName')}",
                 f"phase: {status.get('phase')}"]
        for cs in status.get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated")
            if term:
                lines.append(f"container {cs.get('name')} exited with code {term.get('exitCode')}")
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")


def error_middleware(is_failing: Callable[[], int | None]) -> Any:
    """Turn ``ApiError`` into Status responses and answer injected failures for API paths."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith("/kubesim"):
            code = is_failing()
            if code is not None:
                return error_response(ApiError(code, "kubesim: injected API failure"))
        try:
            return await handler(request)
        except ApiError as exc:
            return error_response(exc)
        except web.HTTPNotFound:
            return error_response(ApiError(404, "the server could not find the requested resource", "NotFound"))
        except web.HTTPMethodNotAllowed:
            return error_response(ApiError(405, "the server does not allow this method on the requested resource"))

    return middleware
