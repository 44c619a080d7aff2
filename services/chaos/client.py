"""The gateway's HTTP API as the administrator, retrying through killed gateways and broker outages."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class GatewayError(RuntimeError):
    """The gateway refused a request for good (a 4xx answer other than the retryable ones)."""


class Gateway:
    """Submit and cancel jobs; every call retries transport errors and 429/5xx answers until its deadline."""

    def __init__(self, url: str, token: str, *, retry_for_s: float = 120.0, pause_s: float = 0.5) -> None:
        self._http = httpx.AsyncClient(base_url=url, timeout=10.0, headers={"Authorization": f"Bearer {token}"})
        self._retry_for_s = retry_for_s
        self._pause_s = pause_s
        self.retries = 0

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, *, json: Any = None, headers: dict[str, str] | None = None,
                    also_retry: frozenset[int] = frozenset()) -> httpx.Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._retry_for_s
        while True:
            try:
                response = await self._http.request(method, path, json=json, headers=headers)
                if response.status_code not in RETRY_STATUSES | also_retry:
                    return response
                problem = f"{response.status_code} {response.text[:200]}"
            except httpx.TransportError as exc:
                problem = repr(exc)
            if loop.time() > deadline:
                raise GatewayError(f"{method} {path}: still failing after {self._retry_for_s:.0f}s: {problem}")
            self.retries += 1
            await asyncio.sleep(self._pause_s)

    async def submit(self, spec: dict[str, Any], key: str) -> str:
        """The job id of ``spec``; retries carry the same Idempotency-Key, so they are the same job."""
        response = await self._call("POST", "/v1/jobs", json=spec, headers={"Idempotency-Key": key})
        if response.status_code not in (200, 202):
            raise GatewayError(f"submission {key} refused: {response.status_code} {response.text[:300]}")
        job_id: str = response.json()["job_id"]
        return job_id

    async def cancel(self, job_id: str) -> int:
        """Ask to cancel; the final HTTP status (202 accepted, 404 unknown, 409 already ended)."""
        response = await self._call("POST", f"/v1/jobs/{job_id}/cancel", json={"reason": "chaos"},
                                    also_retry=frozenset({404}))
        return response.status_code

    async def state(self, job_id: str) -> str | None:
        """The job's state as the gateway shows it, or None when it cannot be read now."""
        try:
            response = await self._http.get(f"/v1/jobs/{job_id}")
        except httpx.TransportError:
            return None
        if response.status_code != 200:
            return None
        state: str = response.json()["state"]
        return state
