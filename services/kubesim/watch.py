"""Streaming watch responses: newline-delimited ``{"type", "object"}`` events with bookmarks and timeouts."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from aiohttp import web

from services.kubesim.errors import ApiError
from services.kubesim.meta import Obj
from services.kubesim.resources import ResourceType
from services.kubesim.selectors import FieldRequirement, Requirement
from services.kubesim.store import Store, Watcher
from services.kubesim.tables import table


def parse_since(value: str | None) -> int | None:
    """``resourceVersion`` of a watch: None (start with current objects) for absent or ``0``."""
    if value in (None, "", "0"):
        return None
    try:
        return int(str(value))
    except ValueError as exc:
        raise ApiError(400, f"invalid resource version: {value!r}", "BadRequest") from exc


async def serve_watch(
    request: web.Request,
    store: Store,
    rt: ResourceType,
    namespace: str | None,
    labels: list[Requirement],
    fields: list[FieldRequirement],
    bookmark_interval: float,
    as_table: bool,
) -> web.StreamResponse:
    """Stream events until the client leaves, ``timeoutSeconds`` passes or watches are dropped."""
    query = request.query
    bookmarks = query.get("allowWatchBookmarks", "").lower() in ("true", "1")
    timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        watcher: Watcher = store.watch(rt, namespace, labels, fields, parse_since(query.get("resourceVersion")))
    except ApiError as exc:
        await response.write(_line({"type": "ERROR", "object": exc.status()}))
        await response.write_eof()
        return response
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout if timeout else None
    first = True
    try:
        while True:
            wait = bookmark_interval if bookmarks else None
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                wait = remaining if wait is None else min(wait, remaining)
            try:
                item = await asyncio.wait_for(watcher.queue.get(), wait)
            except TimeoutError:
                if bookmarks and (deadline is None or loop.time() < deadline):
                    await response.write(_line({"type": "BOOKMARK", "object": _bookmark(rt, store)}))
                continue
            if item is None:
                response.force_close()
                break
            etype, obj = item
            payload: Obj = table(rt.kind, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                 query.get("includeObject", "Object"), first) if as_table else obj
            first = False
            await response.write(_line({"type": etype, "object": payload}))
    except ConnectionResetError:
        return response  # the client went away
    finally:
        store.unwatch(watcher)
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response


def _bookmark(rt: ResourceType, store: Store) -> dict[str, Any]:
    return {"kind": rt.kind, "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(store.resource_version)}}


def _line(event: dict[str, Any]) -> bytes:
    return orjson.dumps(event) + b"\n"
