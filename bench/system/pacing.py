"""Producing at a fixed rate or as a burst: how many messages are due at each moment."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

TICK_S = 0.005


async def paced(count: int, rate: float | None) -> AsyncIterator[range]:
    """Yield index ranges as they fall due: ``rate`` per second from now on, or all at once (burst)."""
    if rate is None:
        step = 500
        for start in range(0, count, step):
            yield range(start, min(count, start + step))
            await asyncio.sleep(0)
        return
    started = time.perf_counter()
    sent = 0
    while sent < count:
        due = min(count, int((time.perf_counter() - started) * rate) + 1)
        if due > sent:
            yield range(sent, due)
            sent = due
        await asyncio.sleep(TICK_S)
