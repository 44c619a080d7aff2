"""Garbage collection: ownerReferences, deletion propagation (Background, Foreground, Orphan), namespaces."""

from __future__ import annotations

from collections.abc import Hashable

from services.kubesim.controller import Reconciler
from services.kubesim.meta import Obj, deep
from services.kubesim.registry import FOREGROUND, NAMESPACE_FINALIZER, ORPHAN, Registry
from services.kubesim.resources import NAMESPACES, RESOURCE_TYPES, ResourceType
from services.kubesim.store import StoreEvent

DEPENDENT_TYPES = tuple(r for r in RESOURCE_TYPES if r.namespaced)


class GarbageCollector(Reconciler):
    """Deletes dependents of deleted owners and finishes deletions that wait on dependents."""

    name = "garbage-collector"

    def __init__(self, registry: Registry) -> None:
        super().__init__()
        self.registry = registry
        self._types: dict[str, ResourceType] = {r.kind: r for r in RESOURCE_TYPES}

    def on_event(self, ev: StoreEvent) -> None:
        m = ev.obj["metadata"]
        if ev.type == "DELETED":
            self.enqueue(("orphaned", m["uid"]))
        elif m.get("deletionTimestamp") and set(m.get("finalizers") or []) & {FOREGROUND, ORPHAN,
                                                                              NAMESPACE_FINALIZER}:
            self.enqueue(("owner", ev.rtype.kind, m.get("namespace", ""), m["name"]))
        if ev.rtype.namespaced and (ev.type == "DELETED" or m.get("deletionTimestamp")):
            for ref in m.get("ownerReferences") or []:
                self.enqueue(("owner", ref.get("kind"), m.get("namespace", ""), ref.get("name")))
            self.enqueue(("owner", "Namespace", "", m.get("namespace", "")))

    def _dependents(self, uid: str) -> list[tuple[ResourceType, Obj]]:
        """The objects whose ownerReferences name ``uid``, from the store's owner index (not a read of every
        object: this runs for every deleted object)."""
        store = self.registry.store
        return [(rt, obj) for rt in DEPENDENT_TYPES for obj in store.owned_by(rt, uid)]

    def _in_namespace(self, namespace: str) -> list[tuple[ResourceType, Obj]]:
        return [
            (rt, obj)
            for rt in DEPENDENT_TYPES
            for obj in self.registry.store.view(rt)
            if obj["metadata"].get("namespace") == namespace
        ]

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key[0] == "orphaned":
            for rt, obj in self._dependents(str(key[1])):
                self._delete(rt, obj)
            return
        _, kind, namespace, name = key
        found = self._types.get(str(kind))
        if found is None:
            return
        rt = found
        owner = self.registry.store.try_get(rt, str(namespace), str(name))
        if owner is None or not owner["metadata"].get("deletionTimestamp"):
            return
        finalizers = owner["metadata"].get("finalizers") or []
        uid = owner["metadata"]["uid"]
        if ORPHAN in finalizers:
            for drt, stored in self._dependents(uid):
                dep = deep(stored)  # the store's own object: changed in place, its old owners could not be unindexed
                dep["metadata"]["ownerReferences"] = [
                    r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") != uid
                ]
                self.registry.write(drt, dep)
            self.registry.remove_finalizer(rt, str(namespace), str(name), ORPHAN)
        elif FOREGROUND in finalizers:
            deps = self._dependents(uid)
            for drt, dep in deps:
                self._delete(drt, dep, "Foreground")
            if not deps:
                self.registry.remove_finalizer(rt, str(namespace), str(name), FOREGROUND)
        elif rt is NAMESPACES and NAMESPACE_FINALIZER in finalizers:
            contents = self._in_namespace(str(name))
            for drt, dep in contents:
                self._delete(drt, dep)
            if not contents:
                self.registry.remove_finalizer(rt, "", str(name), NAMESPACE_FINALIZER)

    def _delete(self, rt: ResourceType, obj: Obj, propagation: str = "Background") -> None:
        m = obj["metadata"]
        if m.get("deletionTimestamp"):
            return
        self.registry.delete(rt, m.get("namespace", ""), m["name"], propagation=propagation)
