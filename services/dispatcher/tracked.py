"""Background work the dispatcher tracks by job: preemption handshakes and pending gang restarts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TrackedTasks:
    """At most one task per key; replacing or cancelling a key's task cancels the running one."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, key: object) -> bool:
        return key in self._tasks

    def spawn(self, key: str, work: Coroutine[Any, Any, None], name: str = "") -> asyncio.Task[None]:
        self.cancel(key)
        task = asyncio.get_running_loop().create_task(work, name=name or key)
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._finished(key, done))
        return task

    def _finished(self, key: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", task.get_name(), exc_info=task.exception())

    def cancel(self, key: str) -> None:
        """Cancel ``key``'s task, unless it is the task calling this (it finishes on its own)."""
        task = self._tasks.get(key)
        if task is not None and task is not asyncio.current_task():
            del self._tasks[key]
            task.cancel()

    async def stop(self, key: str) -> None:
        """Cancel ``key``'s task and wait until it has ended, so its effects are all visible afterwards.

        A task may finish a step it must not leave half done (see ``replacement.replace``) before it ends.
        """
        task = self._tasks.get(key)
        if task is None or task is asyncio.current_task():
            return
        self.cancel(key)
        await asyncio.wait({task})  # its outcome is logged by _finished; a cancel of the caller still propagates

    async def close(self) -> None:
        """Cancel every task and wait for them to end."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
