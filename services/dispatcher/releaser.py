"""Releases the gated pods of admitted workload objects, each onto a planned node of its role.

A workload's controller creates its pods from templates that carry the scheduling gate
``muster.dev/admission`` (its owner put it there, or the release did). Such a pod waits, unscheduled,
until this releaser gives it ``nodeSelector: {kubernetes.io/hostname: <node>}`` (allowed while a pod is
gated), Muster's labels (job, attempt, queue, role) and removes the gate; the default scheduler then binds
it to that node when the node has room. The node is one its role was planned on with a slot left, counting
the role's pods that hold a node already (``workload_plans.choose_node``), so a restarted pod of a JobSet,
a re-created pod of a StatefulSet or the new cluster of a retried RayJob land on the admitted nodes again,
and surplus pods (a rollout's surge) stay gated.

It watches every pod of the cluster (gated pods carry no label Muster could select them by), acts on each
change of a gated pod, and sweeps every ``SWEEP_S`` for pods whose object was admitted after they were
created (a Deployment's pods wait gated before their job is admitted) and for objects whose pods only
their status names (a RayJob's cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from schemas import kube as ann
from services.dispatcher.workload_book import WorkloadRun
from services.dispatcher.workload_plans import choose_node, node_of
from services.runtime.kube import PODS, Backoff, KubeObject, KubeRest, PatchType, label_value, pod_cache
from services.runtime.kube.errors import is_not_found, status_of
from services.spec.kinds import ungate_pod_patch
from services.spec.pod_resources import holds_node

log = logging.getLogger(__name__)

SWEEP_S = 2.0
#: a job that uses GPUs is placed on GPU nodes, which carry the GPU taint: each of its pods (a launcher too,
#: which Muster may place beside its workers) gets the toleration as it is released, as Muster's own Jobs have it
GPU_TOLERATIONS = ({"key": ann.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},)
REFRESH_S = 2.0  # at most this often an object is read again to learn which pods are its own


def release_labels(job_id: str, attempt: int, role: str) -> dict[str, str]:
    """The labels a pod gets as it is released onto its node: its job, attempt and role."""
    return {ann.JOB_ID: label_value(job_id), ann.ATTEMPT: str(attempt), ann.ROLE: role}


def gated(pod: Mapping[str, Any]) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(g, dict) and g.get("name") == ann.ADMISSION_GATE for g in gates) and not (
        pod.get("metadata") or {}).get("deletionTimestamp")


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _uid(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")


def owns(run: WorkloadRun, pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` is one of ``run``'s object's pods (its namespace, a selector of its kind, a role)."""
    meta = pod.get("metadata") or {}
    if meta.get("namespace") != run.namespace:
        return False
    labels = _labels(pod)
    if not any(all(labels.get(k) == v for k, v in sel.items()) for sel in run.kind.pod_selectors(run.obj)):
        return False
    return run.kind.pod_role(run.obj, pod) is not None


class Releaser:
    """Ungates the pods of the workload runs in ``runs`` (the dispatcher's book, read live)."""

    def __init__(self, rest: KubeRest, runs: Mapping[str, WorkloadRun], *, backoff: Backoff | None = None,
                 on_released: Callable[[], None] | None = None) -> None:
        self.rest = rest
        self.runs = runs
        self.backoff = backoff
        self.on_released = on_released
        self.released = 0
        self._pods: dict[str, KubeObject] = {}  # uid -> the pods this releaser may have to count or release
        #: uid -> (job id, attempt, role, node) of the pods released but not yet seen released by the watch
        self._sent: dict[str, tuple[str, int, str, str]] = {}
        self._refreshed: dict[str, float] = {}
        self._surplus: set[str] = set()  # pods logged as having no slot left (logged once)
        self._lock = asyncio.Lock()

    async def run(self, stop: asyncio.Event) -> None:
        informer = pod_cache(self.rest, backoff=self.backoff)
        informer.add_handler(self._on_pod)
        informer.start()
        try:
            await informer.wait_synced()
            while not stop.is_set():
                await self.sweep()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), SWEEP_S)
        finally:
            await informer.stop()

    async def _on_pod(self, event_type: str, pod: KubeObject) -> None:
        uid = _uid(pod)
        if event_type == "DELETED" or not (gated(pod) or ann.JOB_ID in _labels(pod)):
            self._pods.pop(uid, None)
            self._sent.pop(uid, None)
            self._surplus.discard(uid)
            return
        self._pods[uid] = pod
        if uid in self._sent and node_of(pod) is not None:
            del self._sent[uid]  # the watch shows the release now
        if gated(pod):
            async with self._lock:
                await self._release(pod)

    async def sweep(self) -> None:
        """Release every gated pod whose object is admitted (learning RayJob-like objects' pods anew)."""
        async with self._lock:
            waiting = [p for p in self._pods.values() if gated(p)]
            namespaces = {str((p.get("metadata") or {}).get("namespace")) for p in waiting}
            for run in list(self.runs.values()):
                if run.namespace in namespaces and run.preemption is None:
                    await self._refresh(run)
            for pod in waiting:
                await self._release(pod)

    async def _refresh(self, run: WorkloadRun) -> None:
        """Read the object again (its status may name its pods now), at most every ``REFRESH_S``."""
        now = asyncio.get_running_loop().time()
        key = f"{run.job_id}/{run.attempt}"
        if now - self._refreshed.get(key, -REFRESH_S) < REFRESH_S:
            return
        self._refreshed[key] = now
        try:
            run.obj = await self.rest.get(run.resource, run.name, run.namespace if run.resource.namespaced else None)
        except Exception as exc:
            if not is_not_found(exc):
                log.info("releaser: could not read %s/%s: %s", run.namespace, run.name, exc)

    def _owner(self, pod: Mapping[str, Any]) -> WorkloadRun | None:
        for run in self.runs.values():
            if run.preemption is None and owns(run, pod):
                return run
        return None

    def _placed(self, run: WorkloadRun, role: str) -> Iterable[str]:
        """Nodes of the role's pods that hold one (seen by the watch or just released by us)."""
        for uid, pod in self._pods.items():
            if uid in self._sent or not holds_node(pod) or gated(pod):
                continue
            node = node_of(pod)
            if node is not None and owns(run, pod) and run.kind.pod_role(run.obj, pod) == role:
                yield node
        for job_id, attempt, sent_role, node in self._sent.values():
            if (job_id, attempt, sent_role) == (run.job_id, run.attempt, role):
                yield node

    async def _release(self, pod: KubeObject) -> None:
        uid = _uid(pod)
        if uid in self._sent or not gated(pod):
            return
        run = self._owner(pod)
        if run is None:
            return
        role = run.kind.pod_role(run.obj, pod)
        assert role is not None
        node = choose_node(run.plan, role, run.main_role, self._placed(run, role))
        meta = pod.get("metadata") or {}
        if node is None:
            if uid not in self._surplus:
                self._surplus.add(uid)
                log.info("pod %s/%s of job %s: every planned slot of role %s is taken; it stays gated",
                         meta.get("namespace"), meta.get("name"), run.job_id, role)
            return
        try:
            patch = ungate_pod_patch(pod, node, release_labels(run.job_id, run.attempt, role),
                                     tolerations=GPU_TOLERATIONS if run.uses_gpus else ())
        except ValueError as exc:
            log.warning("pod %s/%s cannot be released: %s", meta.get("namespace"), meta.get("name"), exc)
            return
        self._sent[uid] = (run.job_id, run.attempt, role, node)
        try:
            await self.rest.patch(PODS, str(meta["name"]), patch.body, str(meta["namespace"]), PatchType.JSON)
        except Exception as exc:
            self._sent.pop(uid, None)
            if is_not_found(exc) or status_of(exc) == 409:  # gone, or changed since read: the next event says
                return
            log.error("releasing pod %s/%s onto %s failed: %s", meta.get("namespace"), meta.get("name"), node, exc)
            return
        self.released += 1
        if self.on_released is not None:
            self.on_released()
        log.debug("pod %s/%s of job %s (role %s) released onto %s", meta.get("namespace"), meta.get("name"),
                  run.job_id, role, node)
