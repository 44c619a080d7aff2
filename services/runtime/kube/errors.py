"""Classification of Kubernetes API failures: what to retry, what counts as success."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio.client.exceptions import ApiException

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


def api_error(status: int, body: bytes | str, reason: str | None = None) -> ApiException:
    """An ``ApiException`` carrying the status and the response body (a ``Status`` object as JSON)."""
    exc = ApiException(status=status, reason=reason or status_reason(body) or "")
    exc.body = body if isinstance(body, bytes) else body.encode("utf-8")
    return exc


def status_reason(body: bytes | str | None) -> str | None:
    """The ``reason`` field of a ``metav1.Status`` body (``AlreadyExists``, ``Conflict``...), if any."""
    if not body:
        return None
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    reason = data.get("reason") if isinstance(data, dict) else None
    return reason if isinstance(reason, str) else None


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an API error, or None for anything that is not one."""
    if isinstance(exc, ApiException):
        return int(exc.status) if exc.status is not None else None
    return None


def is_transport_error(exc: BaseException) -> bool:
    """Connection refused / reset, a closed stream or a client-side timeout."""
    return isinstance(exc, aiohttp.ClientError | ConnectionError | asyncio.TimeoutError)


def is_retryable(exc: BaseException) -> bool:
    """Worth trying again unchanged: 429, 5xx, or a transport failure."""
    status = status_of(exc)
    if status is not None:
        return status in RETRYABLE_STATUSES
    return is_transport_error(exc)


def retry_after_seconds(exc: BaseException) -> float | None:
    """The ``Retry-After`` header of a 429/503 answer, in seconds, when the server sent one."""
    if not isinstance(exc, ApiException) or not exc.headers:
        return None
    value = exc.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def is_not_found(exc: BaseException) -> bool:
    return status_of(exc) == 404


def is_gone(exc: BaseException) -> bool:
    return status_of(exc) == 410


def is_conflict(exc: BaseException) -> bool:
    """409 with reason ``Conflict`` (a stale resourceVersion), not ``AlreadyExists``."""
    return status_of(exc) == 409 and not is_already_exists(exc)


def is_already_exists(exc: BaseException) -> bool:
    if status_of(exc) != 409:
        return False
    assert isinstance(exc, ApiException)
    return status_reason(exc.body) == "AlreadyExists"
