"""The object cache behind an informer: applies watch events and re-lists, and says what changed.

Pure and synchronous. Every change it reports is one an observer has not seen yet: a repeated
event (same resourceVersion) is dropped, and a re-list is turned into the synthetic
ADDED / MODIFIED / DELETED events that take the old cache to the new list.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

KubeObject = dict[str, Any]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Change:
    """One state change as consumers see it."""

    type: str  # ADDED | MODIFIED | DELETED
    object: KubeObject


def object_key(obj: KubeObject) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def resource_version(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class ObjectStore:
    """Objects by key, fed by watch events and full lists."""

    def __init__(self) -> None:
        self._objects: dict[str, KubeObject] = {}

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __iter__(self) -> Iterator[KubeObject]:
        return iter(list(self._objects.values()))

    def get(self, key: str) -> KubeObject | None:
        return self._objects.get(key)

    def keys(self) -> list[str]:
        return list(self._objects)

    def apply(self, event_type: str, obj: KubeObject) -> list[Change]:
        """Apply one ADDED / MODIFIED / DELETED event; the changes not seen before (often none or one)."""
        key = object_key(obj)
        old = self._objects.get(key)
        if event_type == DELETED:
            if old is None:
                return []
            del self._objects[key]
            return [Change(DELETED, obj)]
        if event_type not in (ADDED, MODIFIED):
            raise ValueError(f"not an object event: {event_type}")
        self._objects[key] = obj
        return _transition(old, obj)

    def replace(self, items: list[KubeObject]) -> list[Change]:
        """Make the cache equal to a fresh list; the changes that took it there, deletions first."""
        fresh = {object_key(o): o for o in items}
        changes = [Change(DELETED, old) for key, old in self._objects.items() if key not in fresh]
        for key, obj in fresh.items():
            changes.extend(_transition(self._objects.get(key), obj))
        self._objects = fresh
        return changes


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _transition(old: KubeObject | None, new: KubeObject) -> list[Change]:
    """What consumers must see to go from ``old`` to ``new`` under one key.

    An unchanged resourceVersion is a repeat; another uid under the same name is a delete
    and re-create that happened while the watch was behind.
    """
    if old is None:
        return [Change(ADDED, new)]
    if resource_version(old) == resource_version(new):
        return []
    if _uid(old) and _uid(new) and _uid(old) != _uid(new):
        return [Change(DELETED, old), Change(ADDED, new)]
    return [Change(MODIFIED, new)]
