"""Plain JSON access to the Kubernetes REST API over a kubernetes-asyncio ``ApiClient``.

Objects stay ``dict``s as the server sends them (no model classes), which is what caches,
diffs and the offline schema validation want.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from enum import Enum
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from services.runtime.kube.errors import api_error, is_gone
from services.runtime.kube.resources import Resource
from services.runtime.kube.retry import RetryPolicy, with_retries

KubeObject = dict[str, Any]
Query = list[tuple[str, str]]


class PatchType(str, Enum):
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    JSON = "application/json-patch+json"


class KubeRest:
    """JSON requests with bounded retries of transient failures (429, 5xx, connection errors)."""

    def __init__(self, api: ApiClient, retry: RetryPolicy | None = None, request_timeout: float = 30.0) -> None:
        self.api = api
        self.retry = retry or RetryPolicy()
        self.request_timeout = request_timeout

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        retry: bool = True,
    ) -> KubeObject:
        """One request, the decoded JSON answer; raises ``ApiException`` on a non-2xx status."""

        async def once() -> KubeObject:
            data = await self._body(method, path, query, body, content_type)
            decoded: KubeObject = orjson.loads(data) if data else {}
            return decoded

        if not retry:
            return await once()
        return await with_retries(once, self.retry, f"{method} {path}")

    async def _send(
        self, method: str, path: str, query: Query | None, body: Any, content_type: str,
        limits: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        resp: aiohttp.ClientResponse = await self.api.call_api(
            path, method,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=limits,
        )
        return resp

    async def text(self, path: str) -> str:
        """A plain-text answer (the API server's ``/metrics``, ``/healthz``); raises ``ApiException`` on a
        non-2xx status."""

        async def once() -> str:
            return (await self._body("GET", path, None, None, "application/json")).decode()

        return await with_retries(once, self.retry, f"GET {path}")

    async def _body(self, method: str, path: str, query: Query | None, body: Any, content_type: str) -> bytes:
        """The answer's bytes; ``ApiException`` on a non-2xx status."""
        resp = await self._send(method, path, query, body, content_type,
                                aiohttp.ClientTimeout(total=self.request_timeout))
        try:
            data = await resp.read()
            if resp.status >= 300:
                exc = api_error(resp.status, data, resp.reason)
                exc.headers = resp.headers
                raise exc
        finally:
            resp.release()
        return data

    # ------------------------------------------------------------------ reads

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> KubeObject:
        return await self.request("GET", resource.object_path(name, namespace))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> tuple[list[KubeObject], str]:
        """All objects (paged with ``limit``/``continue``) and the list's resourceVersion."""
        items: list[KubeObject] = []
        token = ""
        while True:
            query = [*_selectors(label_selector, field_selector), ("limit", str(page_size))]
            if token:
                query.append(("continue", token))
            try:
                page = await self.request("GET", resource.collection_path(namespace), query=query)
            except ApiException as exc:
                if not (token and is_gone(exc)):
                    raise
                items, token = [], ""  # the continue token expired: start the list again
                continue
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return [_with_kind(o, resource) for o in items], str(meta.get("resourceVersion") or "")

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str = "",
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> AsyncIterator[KubeObject]:
        """Raw watch events (``{"type": ..., "object": ...}``) until the server ends the stream.

        The connection is closed when the iterator is closed or its consumer is cancelled.
        A non-2xx answer raises ``ApiException``; ERROR events are passed through.
        """
        query = [*_selectors(label_selector, field_selector),
                 ("watch", "true"), ("timeoutSeconds", str(timeout_seconds))]
        if bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if resource_version:
            query.append(("resourceVersion", resource_version))
        limits = aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout,
                                       sock_read=timeout_seconds + self.request_timeout)
        resp = await self._send("GET", resource.collection_path(namespace), query, None,
                                "application/json", limits)
        try:
            if resp.status >= 300:
                exc = api_error(resp.status, await resp.read(), resp.reason)
                exc.headers = resp.headers
                raise exc
            buf = bytearray()
            async for chunk in resp.content.iter_any():
                buf.extend(chunk)
                while (end := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:end])
                    del buf[: end + 1]
                    if line.strip():
                        yield orjson.loads(line)
            if bytes(buf).strip():
                yield orjson.loads(bytes(buf))
        finally:
            resp.close()

    # ------------------------------------------------------------------ writes

    async def create(self, resource: Resource, obj: KubeObject, namespace: str | None = None) -> KubeObject:
        ns = namespace or _namespace_of(obj, resource)
        return await self.request("POST", resource.collection_path(ns), body=obj)

    async def replace(self, resource: Resource, obj: KubeObject, namespace: str | None = None) -> KubeObject:
        """PUT; the object's ``metadata.resourceVersion`` makes it a compare-and-swap."""
        ns = namespace or _namespace_of(obj, resource)
        return await self.request("PUT", resource.object_path(obj["metadata"]["name"], ns), body=obj)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: KubeObject | Sequence[KubeObject],
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> KubeObject:
        body = list(patch) if patch_type is PatchType.JSON else patch
        return await self.request("PATCH", resource.object_path(name, namespace, subresource),
                                  body=body, content_type=patch_type.value)

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
    ) -> KubeObject:
        options: KubeObject = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return await self.request("DELETE", resource.object_path(name, namespace), body=options)


def _selectors(label_selector: str | None, field_selector: str | None) -> Query:
    query: Query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _namespace_of(obj: KubeObject, resource: Resource) -> str | None:
    if not resource.namespaced:
        return None
    ns = (obj.get("metadata") or {}).get("namespace")
    if not ns:
        raise ValueError(f"{resource.kind} has no metadata.namespace and none was given")
    return str(ns)


def _with_kind(obj: KubeObject, resource: Resource) -> KubeObject:
    """List items come without apiVersion/kind; fill them in so they look like watched objects."""
    obj.setdefault("apiVersion", resource.api_version)
    obj.setdefault("kind", resource.kind)
    return obj
