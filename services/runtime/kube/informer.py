"""List-then-watch caches: an ``Informer`` keeps a local copy of one resource set and streams its changes.

It lists, then watches from the list's resourceVersion with bookmarks, and keeps the last
resourceVersion it saw. A watch that ends, drops or fails transiently resumes from there with
backoff; a 410 Gone (an ERROR event or the HTTP answer) means the history is compacted, so it
lists again and reports the difference as synthetic events. Consumers neither miss nor see twice
a state change (see ``ObjectStore``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from services.runtime.kube.errors import is_gone
from services.runtime.kube.retry import Backoff
from services.runtime.kube.source import EventSource
from services.runtime.kube.store import ADDED, Change, KubeObject, ObjectStore, object_key, resource_version

log = logging.getLogger(__name__)

Handler = Callable[[str, KubeObject], Awaitable[None] | None]
Event = tuple[str, KubeObject]
_CLOSED: Any = object()


class WatchErrorEvent(Exception):
    """The server sent an ERROR event (a ``metav1.Status``) on a watch."""

    def __init__(self, status: KubeObject) -> None:
        self.code = int(status.get("code") or 0)
        self.reason = str(status.get("reason") or "")
        super().__init__(f"watch error {self.code} {self.reason}: {status.get('message', '')}")


def _expired(exc: BaseException) -> bool:
    return is_gone(exc) or (isinstance(exc, WatchErrorEvent) and exc.code == 410)


class Subscription:
    """An async iterator of ``(event_type, object)``, registered from the moment it is created."""

    def __init__(self, informer: Informer, replay: bool) -> None:
        self._informer = informer
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        if replay:
            for obj in informer.store:
                self._queue.put_nowait((ADDED, obj))
        informer._subscriptions.append(self)

    def _push(self, item: Event) -> None:
        self._queue.put_nowait(item)

    def close(self) -> None:
        """Stop delivery; iteration ends after the events already queued."""
        if self in self._informer._subscriptions:
            self._informer._subscriptions.remove(self)
            self._queue.put_nowait(_CLOSED)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        item = await self._queue.get()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)
            raise StopAsyncIteration
        return item

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class Informer:
    """A cache of one resource set plus a change stream; run it with ``async with`` or ``start``/``stop``."""

    def __init__(self, source: EventSource, *, backoff: Backoff | None = None, name: str = "") -> None:
        self.source = source
        self.name = name or source.describe()
        self.store = ObjectStore()
        self.backoff = backoff or Backoff()
        self.resource_version = ""
        self.lists = 0  # full lists done (the first one plus every re-list after a 410)
        self.watches = 0  # watch requests opened
        self._handlers: list[Handler] = []
        self._subscriptions: list[Subscription] = []
        self._synced = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ reading

    @property
    def synced(self) -> bool:
        """True once the first list is in the cache."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def get(self, name: str, namespace: str | None = None) -> KubeObject | None:
        return self.store.get(f"{namespace}/{name}" if namespace else name)

    def items(self) -> list[KubeObject]:
        """Every cached object."""
        return list(self.store)

    async def wait_for(self, predicate: Callable[[list[KubeObject]], bool]) -> list[KubeObject]:
        """Wait until ``predicate(current objects)`` holds (bound it with ``asyncio.timeout``)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.synced and predicate(self.items()))
        return self.items()

    # ------------------------------------------------------------------ consuming changes

    def add_handler(self, handler: Handler) -> Callable[[], None]:
        """Call ``handler(event_type, object)`` for every change (awaited if it returns an awaitable).

        Handlers run inside the informer's loop, so a slow one delays the next events. Returns
        a function that removes the handler.
        """
        self._handlers.append(handler)
        return lambda: self._handlers.remove(handler) if handler in self._handlers else None

    def subscribe(self, replay: bool = True) -> Subscription:
        """A change stream; with ``replay`` it begins with ADDED for every object already cached."""
        return Subscription(self, replay)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer {self.name}")

    async def stop(self) -> None:
        """Cancel the loop, wait for it, and end every subscription."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for sub in list(self._subscriptions):
            sub.close()

    async def __aenter__(self) -> Informer:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def run(self) -> None:
        """List, then watch for ever; returns only by cancellation."""
        failures = 0
        need_list = True
        while True:
            if need_list:
                try:
                    items, rv = await self.source.list()
                except Exception as exc:
                    failures += 1
                    await self._pause(failures, f"list failed: {exc!r}")
                    continue
                self.lists += 1
                await self._emit_all(self.store.replace(items))
                self.resource_version = rv
                need_list = False
                self._synced.set()
                await self._notify()
            try:
                received = await self._watch_once()
            except Exception as exc:
                if _expired(exc):
                    log.info("%s: resourceVersion %s expired, listing again", self.name, self.resource_version)
                    need_list = True
                    continue
                failures += 1
                await self._pause(failures, f"watch failed: {exc!r}")
                continue
            if received:
                failures = 0
            else:  # the stream closed at once: don't spin on a server that keeps closing it
                failures += 1
                await self._pause(failures, "watch closed without events")

    async def _watch_once(self) -> int:
        """One watch request from the last resourceVersion; the number of events it carried."""
        received = 0
        self.watches += 1
        stream = self.source.watch(self.resource_version)
        try:
            async for event in stream:
                received += 1
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    raise WatchErrorEvent(obj)
                rv = resource_version(obj)
                if kind != "BOOKMARK":
                    await self._emit_all(self.store.apply(str(kind), obj))
                    await self._notify()
                if rv:
                    self.resource_version = rv
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return received

    async def _pause(self, failures: int, why: str) -> None:
        delay = self.backoff.delay(failures)
        log.warning("%s: %s; retrying in %.2fs", self.name, why, delay)
        await asyncio.sleep(delay)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _emit_all(self, changes: list[Change]) -> None:
        for change in changes:
            for sub in list(self._subscriptions):
                sub._push((change.type, change.object))
            for handler in list(self._handlers):
                try:
                    result = handler(change.type, change.object)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    log.exception("%s: handler failed on %s %s", self.name, change.type,
                                  object_key(change.object))
