"""Idempotent writes: creating twice, deleting twice and updating from stale state are all harmless.

Transient failures (429, 5xx, connection errors) are retried with backoff by ``KubeRest``.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence

from kubernetes_asyncio.client.exceptions import ApiException

from services.runtime.kube.errors import is_conflict, is_not_found, status_of
from services.runtime.kube.resources import NAMESPACES, Resource
from services.runtime.kube.rest import KubeObject, KubeRest, PatchType

log = logging.getLogger(__name__)

Mutation = Callable[[KubeObject], KubeObject | None]


class UpdateConflictError(RuntimeError):
    """An update kept meeting newer versions of the object and gave up."""


async def create_or_get(
    rest: KubeRest, resource: Resource, obj: KubeObject, namespace: str | None = None, *, attempts: int = 3
) -> tuple[KubeObject, bool]:
    """Create ``obj``; if its (deterministic) name already exists, the existing object.

    Returns ``(object, created)``. A create retried after a lost answer therefore succeeds too.
    """
    name = obj["metadata"]["name"]
    ns = namespace or obj["metadata"].get("namespace")
    for _ in range(attempts):
        try:
            return await rest.create(resource, obj, ns), True
        except ApiException as exc:
            if status_of(exc) != 409:
                raise
        try:
            return await rest.get(resource, name, ns), False
        except ApiException as exc:
            if not is_not_found(exc):  # deleted between our create and get: create again
                raise
    raise UpdateConflictError(f"{resource.kind} {name}: kept appearing and disappearing during create")


async def patch(
    rest: KubeRest,
    resource: Resource,
    name: str,
    body: KubeObject | Sequence[KubeObject],
    namespace: str | None = None,
    patch_type: PatchType = PatchType.MERGE,
    subresource: str | None = None,
) -> KubeObject:
    """A merge (default), strategic-merge or JSON patch; the object after it."""
    return await rest.patch(resource, name, body, namespace, patch_type, subresource)


async def ensure_namespace(rest: KubeRest, name: str) -> KubeObject:
    """The namespace ``name``, created when missing."""
    namespace, _ = await create_or_get(rest, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": name}})
    return namespace


async def delete(
    rest: KubeRest,
    resource: Resource,
    name: str,
    namespace: str | None = None,
    *,
    grace_period_seconds: int | None = None,
    propagation: str = "Background",
) -> bool:
    """Delete with background propagation (dependents are collected by the server).

    Returns False when the object was already gone, which counts as success.
    """
    try:
        await rest.delete(resource, name, namespace, propagation=propagation,
                          grace_period_seconds=grace_period_seconds)
    except ApiException as exc:
        if is_not_found(exc):
            return False
        raise
    return True


async def update(
    rest: KubeRest,
    resource: Resource,
    name: str,
    mutate: Mutation,
    namespace: str | None = None,
    *,
    attempts: int = 5,
    subresource: str | None = None,
) -> KubeObject:
    """Read, apply ``mutate``, write back with the read resourceVersion; on 409 Conflict start over.

    ``mutate`` gets a private copy and edits it in place (or returns a new object); it must be
    safe to call more than once. If it leaves the object unchanged nothing is written.
    """
    for attempt in range(1, attempts + 1):
        current = await rest.get(resource, name, namespace)
        desired = copy.deepcopy(current)
        returned = mutate(desired)
        if returned is not None:
            desired = returned
        if desired == current:
            return current
        desired.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        path = resource.object_path(name, namespace, subresource)
        try:
            return await rest.request("PUT", path, body=desired)
        except ApiException as exc:
            if not is_conflict(exc):
                raise
            log.info("%s %s changed under update (try %d/%d), reading again", resource.kind, name,
                     attempt, attempts)
    raise UpdateConflictError(f"{resource.kind} {name}: still conflicting after {attempts} tries")
