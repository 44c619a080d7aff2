"""Exact gang placement: binds each pod of a Muster Job to the node the plan gave its completion index.

One pod template serves every index of an Indexed Job, so node affinity can only name the set of
planned nodes, and the default scheduler may stack two pods on one of them. With binding on (the
default), the Job's pods name ``schedulerName: muster``; the default scheduler leaves them alone and
this binder posts a ``pods/binding`` for each one to ``placement[index]`` (the ``muster.dev/placement``
annotation the pods carry). The kubelet still admits the pod against the node's resources. Jobs
released on the kube-native path keep their own scheduler (the field cannot change on a suspended
Job) and are held to the planned node set by affinity.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from services.dispatcher import annotations as ann
from services.runtime.kube import PODS, Backoff, KubeObject, KubeRest, pod_cache
from services.runtime.kube.errors import is_not_found, status_of

log = logging.getLogger(__name__)

SCHEDULER_NAME = "muster"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def binding_target(pod: KubeObject, scheduler_name: str = SCHEDULER_NAME) -> str | None:
    """The planned node of an unbound pending pod that Muster schedules, else None. Pure."""
    meta: dict[str, Any] = pod.get("metadata") or {}
    spec: dict[str, Any] = pod.get("spec") or {}
    if spec.get("schedulerName") != scheduler_name or spec.get("nodeName") or meta.get("deletionTimestamp"):
        return None
    if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
        return None
    annotations = meta.get("annotations") or {}
    index = str(annotations.get(INDEX_KEY) or (meta.get("labels") or {}).get(INDEX_KEY) or "")
    try:
        nodes = json.loads(annotations.get(ann.PLACEMENT) or "[]")
    except ValueError:
        return None
    if not index.isdigit() or not isinstance(nodes, list) or int(index) >= len(nodes):
        return None
    return str(nodes[int(index)])


def binding(pod_name: str, node: str) -> KubeObject:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod_name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


class Binder:
    """Watches Muster pods and binds the ones waiting for Muster's scheduling."""

    def __init__(self, rest: KubeRest, *, scheduler_name: str = SCHEDULER_NAME, backoff: Backoff | None = None,
                 on_bound: Callable[[], None] | None = None) -> None:
        self.rest = rest
        self.scheduler_name = scheduler_name
        self.backoff = backoff
        self.on_bound = on_bound
        self.bound = 0

    async def bind(self, pod: KubeObject) -> bool:
        """Bind ``pod`` to its planned node; False when there is nothing to do or it is already done."""
        node = binding_target(pod, self.scheduler_name)
        if node is None:
            return False
        meta = pod["metadata"]
        path = PODS.object_path(str(meta["name"]), str(meta["namespace"]), "binding")
        try:
            await self.rest.request("POST", path, body=binding(str(meta["name"]), node))
        except Exception as exc:
            if is_not_found(exc) or status_of(exc) == 409:
                return False  # deleted meanwhile, or bound by an earlier event
            log.error("binding pod %s/%s to %s failed: %s", meta["namespace"], meta["name"], node, exc)
            return False
        self.bound += 1
        if self.on_bound is not None:
            self.on_bound()
        return True

    async def _on_pod(self, event_type: str, pod: KubeObject) -> None:
        if event_type != "DELETED":
            await self.bind(pod)

    async def run(self, stop: asyncio.Event) -> None:
        """Bind pods until ``stop`` is set."""
        informer = pod_cache(self.rest, label_selector=ann.JOB_ID, backoff=self.backoff)
        informer.add_handler(self._on_pod)
        informer.start()
        try:
            await stop.wait()
        finally:
            await informer.stop()
