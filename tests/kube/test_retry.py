"""Bounded retries, backoff and the failure classification behind them."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException
from multidict import CIMultiDict, CIMultiDictProxy

from services.runtime.kube import Backoff, RetryPolicy
from services.runtime.kube.errors import (
    api_error,
    is_already_exists,
    is_conflict,
    is_retryable,
    retry_after_seconds,
)
from services.runtime.kube.retry import with_retries

FAST = RetryPolicy(attempts=4, backoff=Backoff(initial=0.001, maximum=0.002))


class Flaky:
    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


async def test_transient_failures_are_retried_until_success() -> None:
    call = Flaky([api_error(500, b"{}"), aiohttp.ClientConnectionError(), api_error(429, b"{}")])
    assert await with_retries(call, FAST) == "ok"
    assert call.calls == 4


async def test_retries_are_bounded() -> None:
    call = Flaky([api_error(503, b"{}")] * 10)
    with pytest.raises(ApiException) as info:
        await with_retries(call, FAST)
    assert info.value.status == 503 and call.calls == 4


async def test_client_errors_are_not_retried() -> None:
    call = Flaky([api_error(422, b'{"reason":"Invalid"}')])
    with pytest.raises(ApiException):
        await with_retries(call, FAST)
    assert call.calls == 1


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    b = Backoff(initial=1.0, factor=2.0, maximum=5.0, jitter=0.5)
    for failures, cap in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (10, 5.0)]:
        d = b.delay(failures)
        assert cap * 0.5 <= d <= cap
    assert Backoff(jitter=0.0).delay(1) == 0.2
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_classification() -> None:
    exists = api_error(409, b'{"kind":"Status","reason":"AlreadyExists","code":409}')
    conflict = api_error(409, b'{"kind":"Status","reason":"Conflict","code":409}')
    assert is_already_exists(exists) and not is_conflict(exists)
    assert is_conflict(conflict) and not is_already_exists(conflict)
    assert is_retryable(api_error(502, b"")) and not is_retryable(api_error(404, b""))
    assert is_retryable(TimeoutError()) and not is_retryable(ValueError())
    limited = api_error(429, b"")
    limited.headers = CIMultiDictProxy(CIMultiDict({"Retry-After": "3"}))
    assert retry_after_seconds(limited) == 3.0
    assert retry_after_seconds(api_error(500, b"")) is None
