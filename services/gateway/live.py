"""Live changes for streaming clients (``GET /v1/stream``, the web dashboard, ``muster list --watch``).

The gateway's views call ``LiveHub.publish`` for every change they fold; each open stream holds a
``Subscription`` that keeps only the latest change per object (a job, a queue, a node), so a slow client
costs at most one entry per object it can see and never falls behind by more than one batch. Changes are
serialised once, however many streams carry them. Pure asyncio, no I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from services.gateway.auth import Principal

Kind = Literal["job", "queue", "node"]
KINDS: tuple[Kind, ...] = ("job", "queue", "node")

#: how long a stream lets changes gather before it sends them as one batch
BATCH_WINDOW_S = 0.1


@dataclass(frozen=True, slots=True)
class Change:
    """One object changed: ``data`` is its JSON (already encoded), or None when it was removed.

    ``tenant`` is whose it is (None: shared by every tenant, such as a node); ``fields`` are what
    stream filters match against (queue, state...).
    """

    kind: Kind
    key: str
    data: str | None
    tenant: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamFilter:
    """What one stream wants: kinds of objects, and for jobs equality filters on their fields."""

    kinds: frozenset[Kind] = frozenset(KINDS)
    job_id: str | None = None
    queue: str | None = None
    state: str | None = None
    tenant: str | None = None

    def matches(self, change: Change) -> bool:
        if change.kind not in self.kinds:
            return False
        if change.kind != "job":
            return True
        if self.job_id is not None and change.key != self.job_id:
            return False
        wanted = (("queue", self.queue), ("state", self.state), ("tenant", self.tenant))
        # a removed job, or a job leaving the filtered state, is still news to the stream
        return all(value is None or name == "state" or change.fields.get(name) == value for name, value in wanted)


class Subscription:
    """One open stream: the latest pending change per object the caller may see."""

    def __init__(self, principal: Principal, wanted: StreamFilter) -> None:
        self.principal = principal
        self.wanted = wanted
        self._pending: dict[tuple[Kind, str], Change] = {}
        self._wake = asyncio.Event()
        self.closed = False

    def offer(self, change: Change) -> None:
        if change.tenant is not None and not self.principal.owns(change.tenant):
            return
        if not self.wanted.matches(change):
            return
        self._pending[(change.kind, change.key)] = change
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    @property
    def backlog(self) -> int:
        return len(self._pending)

    async def next_batch(self, window_s: float = BATCH_WINDOW_S) -> list[Change]:
        """Wait for a change, let others gather for ``window_s``, then take them all (empty once closed)."""
        await self._wake.wait()
        if not self.closed and window_s > 0:
            await asyncio.sleep(window_s)
        self._wake.clear()
        if self.closed:
            return []
        batch = list(self._pending.values())
        self._pending.clear()
        return batch


class LiveHub:
    """Fans changes out to the open subscriptions; ``close`` ends every stream (gateway shutdown)."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        self.closed = False

    def __len__(self) -> int:
        return len(self._subscriptions)

    @property
    def listening(self) -> bool:
        """True when some stream is open: only then are changes worth encoding."""
        return bool(self._subscriptions)

    def publish(self, change: Change) -> None:
        for subscription in self._subscriptions:
            subscription.offer(change)

    @contextlib.contextmanager
    def subscribe(self, principal: Principal, wanted: StreamFilter) -> Iterator[Subscription]:
        subscription = Subscription(principal, wanted)
        if self.closed:
            subscription.close()
        self._subscriptions.add(subscription)
        try:
            yield subscription
        finally:
            self._subscriptions.discard(subscription)

    def close(self) -> None:
        self.closed = True
        for subscription in self._subscriptions:
            subscription.close()
