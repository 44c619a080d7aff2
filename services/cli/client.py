"""A small HTTP client of the gateway API for the ``muster`` job commands.

Where it connects, first match wins: ``MUSTER_URL`` and ``MUSTER_TOKEN``; a context named by
``--context`` / ``MUSTER_CONTEXT`` (``services.cli.contexts``); the file at ``MUSTER_CLI_CONFIG``;
``.muster/cli.yaml`` (``url``, ``token``) as ``muster up`` writes it, looked up from the current
directory upwards; the current context of the user's ``~/.config/muster/config.yaml``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import yaml

from services.cli import contexts

CLI_CONFIG = Path(".muster") / "cli.yaml"


class ClientError(Exception):
    """An answer the gateway refused, or no answer; ``str()`` is a message fit for a terminal."""

    def __init__(self, message: str, *, status: int | None = None, error: str = "", field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.field = field


@dataclass(frozen=True)
class ClientSettings:
    url: str
    token: str

    def __repr__(self) -> str:  # never show the token
        return f"ClientSettings(url={self.url!r})"


def _find_config(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / CLI_CONFIG
        if candidate.is_file():
            return candidate
    return None


def load_settings(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> ClientSettings:
    """Connection settings from the environment, then the CLI config file."""
    env = os.environ if environ is None else environ
    url, token = env.get("MUSTER_URL"), env.get("MUSTER_TOKEN")
    named = env.get("MUSTER_CONTEXT")
    if (url is None or token is None) and named:
        chosen = contexts.resolve(named, env)
        if chosen is not None:
            url, token = url or chosen.url, token or chosen.token
    path = Path(env["MUSTER_CLI_CONFIG"]) if env.get("MUSTER_CLI_CONFIG") else _find_config(cwd or Path.cwd())
    if (url is None or token is None) and path is not None and path.is_file():
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ClientError(f"{path}: expected a mapping with url and token")
        url = url or data.get("url")
        token = token or data.get("token")
    if url is None or token is None:
        current = contexts.resolve(None, env)
        if current is not None:
            url, token = url or current.url, token or current.token
    if not url:
        raise ClientError("no gateway address: set MUSTER_URL, pick a context (`muster config get-contexts`) "
                          "or run `muster up` (it writes .muster/cli.yaml and the context `local`)")
    if not token:
        raise ClientError("no API token: set MUSTER_TOKEN or add `token` to .muster/cli.yaml")
    return ClientSettings(str(url).rstrip("/"), str(token))


def _error_message(response: httpx.Response) -> ClientError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    error = str(body.get("error") or response.reason_phrase or "error")
    field = body.get("field")
    detail = str(body.get("detail") or "")
    text = f"{response.status_code} {error}"
    if field:
        text += f" [{field}]"
    if detail:
        text += f": {detail}"
    return ClientError(text, status=response.status_code, error=error, field=field)


class GatewayClient:
    """Synchronous calls of the gateway's /v1 API; every non-2xx answer raises ``ClientError``."""

    def __init__(self, settings: ClientSettings, *, timeout: float = 10.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(base_url=settings.url, timeout=timeout, transport=transport,
                                  headers={"Authorization": f"Bearer {settings.token}"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach the gateway at {self._http.base_url}: {exc}") from None
        if response.status_code >= 400:
            raise _error_message(response)
        return response.json()

    def submit(self, spec: Mapping[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        result: dict[str, Any] = self._call("POST", "/v1/jobs", json=dict(spec), headers=headers)
        return result

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/jobs/{job_id}")
        return result

    def jobs(self, *, queue: str | None = None, state: str | None = None, tenant: str | None = None,
             limit: int = 100, active: bool | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.job_page(queue=queue, state=state, tenant=tenant, limit=limit,
                                                    active=active)["items"]
        return items

    def job_page(self, *, queue: str | None = None, state: str | None = None, tenant: str | None = None,
                 limit: int = 100, active: bool | None = None) -> dict[str, Any]:
        """``{"items": [...newest first], "total": every match}``; ``active`` True: unfinished jobs only."""
        params: dict[str, Any] = {k: v for k, v in {"queue": queue, "state": state, "tenant": tenant}.items() if v}
        if active is not None:
            params["active"] = "true" if active else "false"
        result: dict[str, Any] = self._call("GET", "/v1/jobs", params={**params, "limit": limit})
        return result

    def watch(self, **params: str | None) -> Iterator[tuple[str, Any]]:
        """The live stream (``GET /v1/stream``, Server-Sent Events) as (event, decoded data), until it ends."""
        query = {k: v for k, v in params.items() if v}
        try:
            timeout = httpx.Timeout(10.0, read=None)
            with self._http.stream("GET", "/v1/stream", params=query, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error_message(response)
                event, data = "message", list[str]()
                for line in response.iter_lines():
                    if not line:
                        if data:
                            yield event, json.loads("\n".join(data))
                        event, data = "message", []
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].removeprefix(" "))
        except httpx.HTTPError as exc:
            raise ClientError(f"the stream from the gateway at {self._http.base_url} broke: {exc}") from None

    def explain(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/jobs/{job_id}/explain")
        return result

    def action(self, job_id: str, action: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``cancel``, ``suspend`` or ``resume``."""
        result: dict[str, Any] = self._call("POST", f"/v1/jobs/{job_id}/{action}",
                                            json=dict(body) if body is not None else None)
        return result

    def set_priority(self, job_id: str, priority_class: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("PATCH", f"/v1/jobs/{job_id}", json={"priority_class": priority_class})
        return result

    def scale(self, job_id: str, replicas: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/v1/jobs/{job_id}/scale", json={"replicas": replicas})
        return result

    def queues(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._call("GET", "/v1/queues")["items"]
        return items

    def recurring_jobs(self, tenant: str | None = None) -> list[dict[str, Any]]:
        params = {"tenant": tenant} if tenant else {}
        items: list[dict[str, Any]] = self._call("GET", "/v1/recurring", params=params)["items"]
        return items

    def recurring(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/recurring/{name}")
        return result

    def recurring_action(self, name: str, action: str) -> dict[str, Any]:
        """``suspend``, ``resume`` or ``delete`` a recurring job."""
        if action == "delete":
            result: dict[str, Any] = self._call("DELETE", f"/v1/recurring/{name}")
        else:
            result = self._call("POST", f"/v1/recurring/{name}/{action}")
        return result
