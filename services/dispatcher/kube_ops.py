"""The dispatcher's Kubernetes writes and reads, each idempotent (thin wrappers over ``services.runtime.kube``)."""

from __future__ import annotations

import logging
from typing import Any

from schemas import kube as ann
from services.runtime.kube import (
    JOBS,
    PODS,
    KubeObject,
    KubeRest,
    create_or_get,
    delete,
    ensure_namespace,
    patch,
)
from services.runtime.kube.errors import is_not_found, status_of

log = logging.getLogger(__name__)


def _annotations(obj: KubeObject) -> dict[str, str]:
    annotations: dict[str, str] = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations


def owned_by(pod: KubeObject, uid: str | None, name: str | None) -> bool:
    """Whether a Job of this uid or name owns the pod."""
    return any(r.get("kind") == "Job" and (r.get("uid") == uid or r.get("name") == name)
               for r in (pod.get("metadata") or {}).get("ownerReferences") or [])


class KubeOps:
    """Namespace, Job and Pod operations on one cluster."""

    def __init__(self, rest: KubeRest) -> None:
        self.rest = rest
        self._namespaces: set[str] = set()

    async def ensure_namespace(self, namespace: str) -> None:
        """Create the namespace unless it exists; a refusal (no RBAC for namespaces) is only logged."""
        if namespace in self._namespaces:
            return
        try:
            await ensure_namespace(self.rest, namespace)
        except Exception as exc:
            if status_of(exc) != 403:
                raise
            log.warning("not allowed to ensure namespace %s; assuming it exists", namespace)
        self._namespaces.add(namespace)

    async def create_job(self, manifest: KubeObject) -> tuple[KubeObject, bool]:
        """Create the Job, or return the one already under its name (``created`` False)."""
        return await create_or_get(self.rest, JOBS, manifest)

    async def get_job(self, namespace: str, name: str) -> KubeObject | None:
        try:
            return await self.rest.get(JOBS, name, namespace)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    async def patch_job(self, namespace: str, name: str, body: KubeObject) -> KubeObject | None:
        """A merge patch; None when the Job does not exist."""
        try:
            return await patch(self.rest, JOBS, name, body, namespace)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    async def annotate_job(self, namespace: str, name: str, annotations: dict[str, str]) -> KubeObject | None:
        return await self.patch_job(namespace, name, {"metadata": {"annotations": annotations}})

    async def delete_job(self, namespace: str, name: str, reason: str, *, propagation: str = "Background") -> bool:
        """Mark the Job as deleted by Muster (and why), then delete it (background propagation unless told).

        With ``Foreground`` the Job stays, marked for deletion, until the server has removed its last
        pod, so its disappearance means the gang's resources are free. Returns False when it was gone.
        """
        marked = await self.annotate_job(namespace, name, {ann.DELETED_BY: ann.MUSTER, ann.DELETE_REASON: reason})
        if marked is None:
            return False
        return await delete(self.rest, JOBS, name, namespace, propagation=propagation)

    async def end_pods(self, job: KubeObject, grace_s: int) -> int:
        """Delete the Job's pods with at most ``grace_s`` to stop (a later delete may only shorten the
        grace a pod has, never lengthen it); how many were still there."""
        ended = 0
        for pod in await self.pods_of(job):
            meta: dict[str, Any] = pod.get("metadata") or {}
            ended += await delete(self.rest, PODS, str(meta["name"]), meta.get("namespace"),
                                  grace_period_seconds=max(0, grace_s))
        return ended

    async def list_jobs(self) -> list[KubeObject]:
        """Every Job carrying a Muster job id, in all namespaces."""
        items, _ = await self.rest.list(JOBS, label_selector=ann.JOB_ID)
        return items

    async def attempt_pods(self, job: KubeObject) -> list[KubeObject]:
        """Every pod of the Job's attempt (all its revisions, terminating ones included)."""
        meta = job.get("metadata") or {}
        labels = meta.get("labels") or {}
        selector = ",".join(f"{k}={labels[k]}" for k in (ann.JOB_ID, ann.ATTEMPT) if k in labels) or None
        pods, _ = await self.rest.list(PODS, meta.get("namespace"), label_selector=selector)
        return pods

    async def pods_of(self, job: KubeObject) -> list[KubeObject]:
        """The pods the Job controls."""
        meta = job.get("metadata") or {}
        uid, name = meta.get("uid"), meta.get("name")
        return [p for p in await self.attempt_pods(job) if owned_by(p, uid, name)]

    async def annotate_pods(self, job: KubeObject, annotations: dict[str, str]) -> int:
        """Annotate every pod of the Job (pods gone meanwhile are skipped); how many were annotated."""
        done = 0
        for pod in await self.pods_of(job):
            meta: dict[str, Any] = pod.get("metadata") or {}
            if _annotations(pod).get(ann.PREEMPT_REQUESTED) == annotations.get(ann.PREEMPT_REQUESTED):
                done += 1
                continue
            try:
                await patch(self.rest, PODS, str(meta["name"]), {"metadata": {"annotations": annotations}},
                            meta.get("namespace"))
                done += 1
            except Exception as exc:
                if not is_not_found(exc):
                    raise
        return done
