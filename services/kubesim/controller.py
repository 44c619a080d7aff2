"""A small reconcile loop: keys are queued and handled on the next event-loop turn, never recursively."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Hashable

from services.kubesim.errors import ApiError

log = logging.getLogger(__name__)


class Reconciler(ABC):
    """Collects keys from store events and reconciles each once per loop turn."""

    name = "controller"

    def __init__(self) -> None:
        self._pending: dict[Hashable, None] = {}
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        if self._pending:
            self._schedule()

    def stop(self) -> None:
        self._loop = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def enqueue(self, key: Hashable) -> None:
        self._pending[key] = None
        self._schedule()

    def _schedule(self) -> None:
        if self._loop is not None and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        if self._loop is None:
            return
        batch, self._pending = list(self._pending), {}
        for key in batch:
            try:
                self.reconcile(key)
            except ApiError as exc:
                log.debug("%s: %s: %s", self.name, key, exc.message)
            except Exception:
                log.exception("%s failed on %s", self.name, key)

    @abstractmethod
    def reconcile(self, key: Hashable) -> None:
        """Bring the object named by ``key`` towards its desired state."""
