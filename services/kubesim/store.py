"""The object store: objects by resource type, a global resourceVersion, a bounded event history and watchers."""

from __future__ import annotations

import asyncio
import builtins
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from services.kubesim.errors import already_exists, conflict, gone, not_found
from services.kubesim.meta import Obj, deep, meta, new_uid, now_rfc3339, random_suffix
from services.kubesim.resources import ResourceType
from services.kubesim.selectors import FieldRequirement, Requirement, fields_match, labels_match

Key = tuple[str, str]


def _owner_uids(obj: Obj) -> set[str]:
    return {str(r["uid"]) for r in (obj.get("metadata") or {}).get("ownerReferences") or () if r.get("uid")}


def key_of(obj: Obj) -> Key:
    m = obj.get("metadata") or {}
    return (str(m.get("namespace") or ""), str(m.get("name") or ""))


@dataclass(frozen=True)
class StoreEvent:
    """One change: ``type`` is ADDED, MODIFIED or DELETED; ``old`` is the previous state if any."""

    rv: int
    rtype: ResourceType
    type: str
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class Watcher:
    """A watch stream's filter and queue; ``None`` in the queue means the stream must end."""

    rtype: ResourceType
    namespace: str | None
    labels: list[Requirement]
    fields: list[FieldRequirement]
    queue: asyncio.Queue[tuple[str, Obj] | None] = field(default_factory=asyncio.Queue)
    closed: bool = False

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace and key_of(obj)[0] != self.namespace:
            return False
        return labels_match(self.labels, (obj.get("metadata") or {}).get("labels")) and fields_match(
            self.fields, obj
        )

    def translate(self, ev: StoreEvent) -> tuple[str, Obj] | None:
        """The event as this watcher sees it (selector changes turn MODIFIED into ADDED or DELETED)."""
        if ev.rtype != self.rtype:
            return None
        if ev.type == "DELETED":
            return ("DELETED", ev.obj) if self._matches(ev.obj) or self._matches(ev.old) else None
        new_ok = self._matches(ev.obj)
        old_ok = ev.type == "MODIFIED" and self._matches(ev.old)
        if new_ok and old_ok:
            return ("MODIFIED", ev.obj)
        if new_ok:
            return ("ADDED", ev.obj)
        if old_ok:
            return ("DELETED", ev.obj)
        return None

    def offer(self, ev: StoreEvent) -> None:
        if self.closed:
            return
        out = self.translate(ev)
        if out is not None:
            self.queue.put_nowait(out)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class Store:
    """In-memory objects with Kubernetes resourceVersion semantics; every read returns a copy."""

    def __init__(self, history_limit: int = 10_000) -> None:
        self.resource_version = 1
        self._objects: dict[ResourceType, dict[Key, Obj]] = {}
        self._history: deque[StoreEvent] = deque()
        self._history_limit = history_limit
        self._floor = 1
        self._watchers: set[Watcher] = set()
        self._listeners: list[Callable[[StoreEvent], None]] = []
        # (resource type, owner uid) -> keys of the objects whose ownerReferences name that uid: a controller
        # finds its objects without reading every object of the type (a Job's pods among tens of thousands)
        self._owned: dict[tuple[ResourceType, str], set[Key]] = {}

    # -- reads -----------------------------------------------------------------------------------
    def _table(self, rt: ResourceType) -> dict[Key, Obj]:
        return self._objects.setdefault(rt, {})

    def try_get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        obj = self._table(rt).get((namespace if rt.namespaced else "", name))
        return deep(obj) if obj is not None else None

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.try_get(rt, namespace, name)
        if obj is None:
            raise not_found(rt.plural, name, rt.group)
        return obj

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        labels: list[Requirement] | None = None,
        fields: list[FieldRequirement] | None = None,
    ) -> tuple[list[Obj], int]:
        """Matching objects sorted by (namespace, name) and the resourceVersion of the read."""
        items = [deep(o) for _, o in sorted(self._table(rt).items()) if self._keep(o, namespace, labels, fields)]
        return items, self.resource_version

    def stored(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        """The stored object itself, not copied (for controllers that only read), or None."""
        return self._table(rt).get((namespace if rt.namespaced else "", name))

    def view(self, rt: ResourceType) -> Iterator[Obj]:
        """Stored objects without copying, for controllers that only read."""
        return iter(list(self._table(rt).values()))

    def owned_by(self, rt: ResourceType, uid: str) -> builtins.list[Obj]:
        """Stored objects of ``rt`` whose ownerReferences name ``uid`` (not copied: for controllers that only
        read), in (namespace, name) order."""
        table = self._table(rt)
        return [table[k] for k in sorted(self._owned.get((rt, uid), ())) if k in table]

    @staticmethod
    def _keep(
        obj: Obj,
        namespace: str | None,
        labels: builtins.list[Requirement] | None,
        fields: builtins.list[FieldRequirement] | None,
    ) -> bool:
        if namespace and key_of(obj)[0] != namespace:
            return False
        if labels and not labels_match(labels, (obj.get("metadata") or {}).get("labels")):
            return False
        return not (fields and not fields_match(fields, obj))

    # -- writes ----------------------------------------------------------------------------------
    def _next_rv(self) -> int:
        self.resource_version += 1
        return self.resource_version

    def create(self, rt: ResourceType, obj: Obj) -> Obj:
        """Store a new object: fills name (from generateName), uid, timestamps, generation, resourceVersion."""
        obj = deep(obj)
        m = meta(obj)
        if not rt.namespaced:
            m.pop("namespace", None)
        if not m.get("name") and m.get("generateName"):
            for _ in range(20):
                m["name"] = f"{m['generateName']}{random_suffix()}"
                if key_of(obj) not in self._table(rt):
                    break
        key = key_of(obj)
        if key in self._table(rt):
            raise already_exists(rt.plural, key[1], rt.group)
        rv = self._next_rv()
        m.update(
            {"uid": new_uid(), "creationTimestamp": now_rfc3339(), "resourceVersion": str(rv), "generation": 1}
        )
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        self._table(rt)[key] = obj
        self._emit(StoreEvent(rv, rt, "ADDED", obj, None))
        return deep(obj)

    def replace(self, rt: ResourceType, obj: Obj, expect_rv: str | None = None) -> Obj:
        """Store a new state of an existing object; 409 Conflict if ``expect_rv`` is stale."""
        obj = deep(obj)
        key = key_of(obj)
        current = self._table(rt).get(key)
        if current is None:
            raise not_found(rt.plural, key[1], rt.group)
        m, cm = meta(obj), current["metadata"]
        if expect_rv and expect_rv != cm["resourceVersion"]:
            raise conflict(rt.plural, key[1], rt.group)
        for fixed in ("uid", "creationTimestamp", "name"):
            m[fixed] = cm[fixed]
        if cm.get("deletionTimestamp"):
            m["deletionTimestamp"] = cm["deletionTimestamp"]
            if "deletionGracePeriodSeconds" not in m and "deletionGracePeriodSeconds" in cm:
                m["deletionGracePeriodSeconds"] = cm["deletionGracePeriodSeconds"]
        if not rt.namespaced:
            m.pop("namespace", None)
        generation = int(cm.get("generation", 1))
        if obj.get("spec") != current.get("spec"):
            generation += 1
        m["generation"] = generation
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        if {k: v for k, v in obj.items() if k != "metadata"} == {
            k: v for k, v in current.items() if k != "metadata"
        } and {k: v for k, v in m.items() if k != "resourceVersion"} == {
            k: v for k, v in cm.items() if k != "resourceVersion"
        }:
            return deep(current)  # no-op updates do not bump the resourceVersion
        rv = self._next_rv()
        m["resourceVersion"] = str(rv)
        self._table(rt)[key] = obj
        self._emit(StoreEvent(rv, rt, "MODIFIED", obj, current))
        return deep(obj)

    def remove(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """Delete the object now and emit DELETED."""
        key = (namespace if rt.namespaced else "", name)
        current = self._table(rt).pop(key, None)
        if current is None:
            raise not_found(rt.plural, name, rt.group)
        rv = self._next_rv()
        final = deep(current)
        final["metadata"]["resourceVersion"] = str(rv)
        self._emit(StoreEvent(rv, rt, "DELETED", final, current))
        return deep(final)

    # -- events and watches ----------------------------------------------------------------------
    def add_listener(self, fn: Callable[[StoreEvent], None]) -> None:
        self._listeners.append(fn)

    def _index(self, ev: StoreEvent) -> None:
        key = key_of(ev.obj)
        if ev.old is not None:
            for uid in _owner_uids(ev.old):
                keys = self._owned.get((ev.rtype, uid))
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._owned[(ev.rtype, uid)]
        if ev.type != "DELETED":
            for uid in _owner_uids(ev.obj):
                self._owned.setdefault((ev.rtype, uid), set()).add(key)

    def _emit(self, ev: StoreEvent) -> None:
        self._index(ev)
        self._history.append(ev)
        while len(self._history) > self._history_limit:
            self._floor = self._history.popleft().rv
        for w in list(self._watchers):
            w.offer(ev)
        for fn in list(self._listeners):
            fn(ev)

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: builtins.list[Requirement],
        fields: builtins.list[FieldRequirement],
        since: int | None,
    ) -> Watcher:
        """Register a watcher; replays history after ``since`` or current objects as ADDED when None.

        Raises 410 Gone when ``since`` is older than the retained history.
        """
        w = Watcher(rt, namespace or None, labels, fields)
        if since is None:
            for obj in self.list(rt, namespace, labels, fields)[0]:
                w.queue.put_nowait(("ADDED", obj))
        else:
            if since < self._floor:
                raise gone(f"too old resource version: {since} ({self._floor})")
            for ev in self._history:
                if ev.rv > since:
                    w.offer(ev)
        self._watchers.add(w)
        return w

    def unwatch(self, w: Watcher) -> None:
        self._watchers.discard(w)

    def compact(self) -> None:
        """Forget all history: watches from any older resourceVersion get 410 Gone."""
        self._history.clear()
        self._floor = self.resource_version

    def drop_watches(self) -> int:
        watchers = list(self._watchers)
        for w in watchers:
            w.close()
        self._watchers.clear()
        return len(watchers)

    @property
    def watch_count(self) -> int:
        return len(self._watchers)
