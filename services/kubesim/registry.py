"""The write path shared by the HTTP API and the controllers: create, update, patch and delete."""

from __future__ import annotations

from typing import Any

from services.kubesim.errors import ApiError, conflict, invalid
from services.kubesim.meta import Obj, deep, meta, now_rfc3339
from services.kubesim.patch import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, apply_patch
from services.kubesim.resources import NAMESPACES, PODS, ResourceType
from services.kubesim.store import Store
from services.kubesim.validation import (
    apply_defaults_after_create,
    apply_defaults_before_create,
    check_update,
    validate,
)

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
NAMESPACE_FINALIZER = "kubernetes"
TERMINAL_PHASES = ("Succeeded", "Failed")


class Registry:
    """Kubernetes write semantics on top of the ``Store``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, rt: ResourceType, namespace: str | None, body: Any) -> Obj:
        validate(rt, body)
        obj = deep(body)
        m = meta(obj)
        if rt.namespaced:
            ns = namespace or m.get("namespace") or "default"
            if m.get("namespace") and m["namespace"] != ns:
                raise ApiError(400, "the namespace of the provided object does not match the namespace sent "
                               "on the request", "BadRequest")
            m["namespace"] = ns
            namespace_obj = self.store.try_get(NAMESPACES, "", ns)
            if namespace_obj is None:
                raise ApiError(404, f'namespaces "{ns}" not found', "NotFound",
                               {"name": ns, "kind": "namespaces"})
            if namespace_obj["metadata"].get("deletionTimestamp"):
                raise ApiError(403, f"unable to create new content in namespace {ns} because it is being "
                               "terminated", "Forbidden")
        for server_field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            m.pop(server_field, None)
        apply_defaults_before_create(rt, obj)
        created = self.store.create(rt, obj)
        if apply_defaults_after_create(rt, created):
            created = self.store.replace(rt, created)
        return created

    def update(self, rt: ResourceType, namespace: str, name: str, body: Any, subresource: str = "") -> Obj:
        """PUT: replace with optimistic concurrency; the main resource keeps status, ``/status`` keeps spec."""
        validate(rt, body)
        new = deep(body)
        m = meta(new)
        if m.get("name") != name:
            raise ApiError(400, f"the name of the object ({m.get('name')}) does not match the name on the URL "
                           f"({name})", "BadRequest")
        old = self.store.get(rt, namespace, name)
        if rt.namespaced:
            m["namespace"] = namespace
        return self._store_update(rt, old, new, subresource, str(m.get("resourceVersion") or ""))

    def _store_update(self, rt: ResourceType, old: Obj, new: Obj, subresource: str, expect_rv: str) -> Obj:
        if subresource == "status":
            merged = deep(old)
            if "status" in new:
                merged["status"] = new["status"]
            for key in ("labels", "annotations"):  # the status subresource still takes these, as the real one
                if key in new.get("metadata", {}):
                    merged["metadata"][key] = new["metadata"][key]
            new = merged
        elif "status" in rt.subresources:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if expect_rv and expect_rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, old["metadata"]["name"], rt.group)
        check_update(rt, old, new)
        stored = self.store.replace(rt, new, expect_rv or None)
        return self._finish_if_released(rt, stored)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        patch_body: Any,
        subresource: str = "",
    ) -> Obj:
        if rt.custom and content_type.split(";")[0].strip() == STRATEGIC_PATCH:  # as for a CRD's resource
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types include: "
                           f"{JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}", "UnsupportedMediaType")
        old = self.store.try_get(rt, namespace, name)
        if old is None:
            if content_type.startswith(APPLY_PATCH) and not subresource:
                body = deep(patch_body) if isinstance(patch_body, dict) else patch_body
                if isinstance(body, dict):
                    meta(body).setdefault("name", name)
                return self.create(rt, namespace, body)
            return self.store.get(rt, namespace, name)
        patched = apply_patch(content_type, deep(old), patch_body)
        if not isinstance(patched, dict):
            raise invalid(rt.kind, name, [("", "Invalid value: patch result is not an object")], rt.group)
        pm = meta(patched)
        if pm.get("name") != name:
            raise invalid(rt.kind, name, [("metadata.name", "Invalid value: field is immutable")], rt.group)
        validate(rt, patched)
        expect = str(pm.get("resourceVersion") or "")
        if expect == old["metadata"]["resourceVersion"]:
            expect = ""
        return self._store_update(rt, old, patched, subresource, expect)

    def write(self, rt: ResourceType, obj: Obj) -> Obj:
        """Controller write of a whole object (spec and status), no validation or conflict check."""
        return self._finish_if_released(rt, self.store.replace(rt, obj))

    def _finish_if_released(self, rt: ResourceType, obj: Obj) -> Obj:
        """Remove an object whose deletion was waiting only for finalizers that are now gone."""
        m = obj["metadata"]
        if m.get("deletionTimestamp") and not m.get("finalizers") and not self._waits_for_kubelet(rt, obj):
            return self.store.remove(rt, m.get("namespace", ""), m["name"])
        return obj

    @staticmethod
    def _waits_for_kubelet(rt: ResourceType, obj: Obj) -> bool:
        return (
            rt is PODS
            and bool((obj.get("spec") or {}).get("nodeName"))
            and (obj.get("status") or {}).get("phase") not in TERMINAL_PHASES
            and int(obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0
        )

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        grace_seconds: int | None = None,
        propagation: str | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> Obj:
        """DELETE with grace period and propagation policy (Background by default)."""
        obj = self.store.get(rt, namespace, name)
        m = obj["metadata"]
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != m["uid"]:
            raise ApiError(409, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                           f"{m['uid']}", "Conflict")
        if pre.get("resourceVersion") and pre["resourceVersion"] != m["resourceVersion"]:
            raise conflict(rt.plural, name, rt.group)
        policy = propagation or "Background"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise ApiError(400, f"unsupported propagationPolicy {policy!r}", "BadRequest")
        finalizers = list(m.get("finalizers") or [])
        if policy == "Foreground" and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if policy == "Orphan" and ORPHAN not in finalizers:
            finalizers.append(ORPHAN)
        if rt is NAMESPACES and NAMESPACE_FINALIZER not in finalizers:
            finalizers.append(NAMESPACE_FINALIZER)
        grace = self._grace(rt, obj, grace_seconds)
        already = bool(m.get("deletionTimestamp"))
        if rt is NAMESPACES:
            obj.setdefault("status", {})["phase"] = "Terminating"
        if not finalizers and grace == 0:
            if rt is PODS and not already:  # a pod is marked deleting first (one MODIFIED event), as for real
                m["deletionTimestamp"] = now_rfc3339()
                m["deletionGracePeriodSeconds"] = 0
                self.store.replace(rt, obj)
            return self.store.remove(rt, namespace, name)
        if already and grace == 0 and rt is PODS:
            m["deletionGracePeriodSeconds"] = 0
            return self._finish_if_released(rt, self.store.replace(rt, obj))
        if already and m.get("finalizers") == finalizers:
            return obj
        m["finalizers"] = finalizers
        if not already:
            m["deletionTimestamp"] = now_rfc3339()
            m["deletionGracePeriodSeconds"] = grace
        elif grace < int(m.get("deletionGracePeriodSeconds") or 0):
            m["deletionGracePeriodSeconds"] = grace
        return self._mark_deleting(rt, obj)

    def _mark_deleting(self, rt: ResourceType, obj: Obj) -> Obj:
        current = self.store.get(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        current["metadata"].update(
            {k: obj["metadata"][k] for k in ("finalizers", "deletionTimestamp", "deletionGracePeriodSeconds")
             if k in obj["metadata"]}
        )
        if "status" in obj:
            current["status"] = obj["status"]
        stored = self.store.replace(rt, current)
        if not stored["metadata"].get("finalizers") and not self._waits_for_kubelet(rt, stored):
            return self.store.remove(rt, stored["metadata"].get("namespace", ""), stored["metadata"]["name"])
        return stored

    @staticmethod
    def _grace(rt: ResourceType, obj: Obj, requested: int | None) -> int:
        if rt is not PODS:
            return 0
        if not (obj.get("spec") or {}).get("nodeName") or (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return 0
        if requested is not None:
            return max(int(requested), 0)
        return int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))

    def remove_finalizer(self, rt: ResourceType, namespace: str, name: str, finalizer: str) -> Obj | None:
        obj = self.store.try_get(rt, namespace, name)
        if obj is None:
            return None
        finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        obj["metadata"]["finalizers"] = finalizers
        return self.write(rt, obj)
