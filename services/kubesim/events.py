"""Core v1 Events written by the simulated control plane (deduplicated by object, reason and message)."""

from __future__ import annotations

import uuid

from services.kubesim.errors import ApiError
from services.kubesim.meta import Obj, now_rfc3339
from services.kubesim.registry import Registry
from services.kubesim.resources import EVENTS, NAMESPACES


class EventRecorder:
    """Creates or bumps Event objects about pods, jobs and nodes."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        # (involved object's uid, reason, message) -> (namespace, name) of the Event recorded for it, so that
        # a repeat is found without reading every Event of the cluster
        self._recorded: dict[tuple[object, str, str], tuple[str, str]] = {}

    def record(self, obj: Obj, event_type: str, reason: str, message: str, component: str) -> None:
        m = obj.get("metadata") or {}
        namespace = m.get("namespace") or "default"
        if self.registry.store.try_get(NAMESPACES, "", namespace) is None:
            return
        store = self.registry.store
        now = now_rfc3339()
        seen = (m.get("uid"), reason, message)
        where = self._recorded.get(seen)
        ev = store.try_get(EVENTS, *where) if where is not None else None
        if ev is not None:
            bumped = {**ev, "count": int(ev.get("count", 1)) + 1, "lastTimestamp": now}
            store.replace(EVENTS, bumped)
            return
        event = {
            "metadata": {"name": f"{m.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "kind": obj.get("kind"),
                "apiVersion": obj.get("apiVersion"),
                "name": m.get("name"),
                "namespace": m.get("namespace", ""),
                "uid": m.get("uid"),
                "resourceVersion": m.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": f"{component}-kubesim",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "eventTime": None,
            "count": 1,
        }
        try:
            created = self.registry.create(EVENTS, namespace, event)
        except ApiError:
            return
        self._recorded[seen] = (namespace, created["metadata"]["name"])
