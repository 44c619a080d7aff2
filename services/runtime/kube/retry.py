"""Bounded retries with exponential backoff and jitter for Kubernetes API calls."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from services.runtime.kube.errors import is_retryable, retry_after_seconds

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays ``initial * factor**n`` capped at ``maximum``, each scaled by a random factor in [1-jitter, 1]."""

    initial: float = 0.2
    factor: float = 2.0
    maximum: float = 10.0
    jitter: float = 0.5

    def delay(self, failures: int) -> float:
        """The pause after ``failures`` consecutive failures (1 for the first)."""
        base = min(self.maximum, self.initial * self.factor ** max(failures - 1, 0))
        return base * (1.0 - self.jitter * random.random())

    def delays(self) -> Iterator[float]:
        n = 0
        while True:
            n += 1
            yield self.delay(n)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most ``attempts`` tries of one call; only failures that ``is_retryable`` accepts are retried."""

    attempts: int = 6
    backoff: Backoff = Backoff()

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")


async def with_retries(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    what: str = "kubernetes call",
    retryable: Callable[[BaseException], bool] = is_retryable,
) -> T:
    """Run ``call``; on a retryable failure wait and try again, up to ``policy.attempts`` tries in all."""
    failures = 0
    while True:
        try:
            return await call()
        except Exception as exc:
            failures += 1
            if failures >= policy.attempts or not retryable(exc):
                raise
            delay = max(policy.backoff.delay(failures), retry_after_seconds(exc) or 0.0)
            log.warning("%s failed (%s), try %d/%d in %.2fs", what, _describe(exc), failures + 1,
                        policy.attempts, delay)
            await asyncio.sleep(delay)


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    return f"HTTP {status}" if status else f"{type(exc).__name__}: {exc}"
