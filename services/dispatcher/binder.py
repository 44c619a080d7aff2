"""Exact gang placement: binds each pod of a Muster Job to the node the plan gave its completion index.

One pod template serves every index of an Indexed Job, so node affinity can only name the set of
planned nodes, and the default scheduler may stack two pods on one of them. With binding on (the
default), the Job's pods name ``schedulerName: muster``; the default scheduler leaves them alone and
this binder posts a ``pods/binding`` for each one to ``placement[index]`` (the ``muster.dev/placement``
annotation the pods carry). Jobs released on the kube-native path keep their own scheduler (the field
cannot change on a suspended Job) and are held to the planned node set by affinity. The pods of a group
of plain pods that Muster creates itself name it too, and go to the node their hostname selector names:
created on it already (``place``: ``spec.nodeName`` set, its GPUs reserved here) when it has room then, else
bound once it has. The default scheduler would only confirm that choice, a queue, a binding and an Event later.

Like kube-scheduler, the binder binds a pod only when its node has room: the queue manager plans onto
GPUs it has just freed (a preempted or finished job), but the pods that held them may still be
terminating. Such a pod waits, unbound and ``Pending``, until the node's pods release enough GPUs
(``NodeRoom``); binding it at once would make the kubelet reject it (``OutOfnvidia.com/gpu``) and cost
the job a restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from schemas import kube as ann
from services.dispatcher.node_room import NodeRoom, pod_key
from services.runtime.kube import PODS, Backoff, KubeObject, KubeRest, node_cache, pod_cache
from services.runtime.kube.errors import is_not_found, status_of
from services.spec.pod_resources import pod_gpus

log = logging.getLogger(__name__)

#: how long the binder waits for its first list of Nodes before binding without knowing their room
NODE_SYNC_TIMEOUT_S = 10.0
MAX_BINDINGS_IN_FLIGHT = 32  # concurrent pods/binding requests
SCHEDULER_NAME = "muster"
DEFAULT_SCHEDULER = "default-scheduler"  # what the API server writes into a pod that names no scheduler
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def binding_target(pod: KubeObject, scheduler_name: str = SCHEDULER_NAME) -> str | None:
    """The planned node of an unbound pending pod that Muster schedules, else None. Pure.

    A Job's pod finds it by its completion index in the Job's placement; a pod Muster created onto a node
    itself (a group of plain pods, ``released_group``) names it in its hostname selector. A pod still gated
    is not bound (the API server refuses to)."""
    meta: dict[str, Any] = pod.get("metadata") or {}
    spec: dict[str, Any] = pod.get("spec") or {}
    if spec.get("schedulerName") != scheduler_name or spec.get("nodeName") or meta.get("deletionTimestamp"):
        return None
    if (pod.get("status") or {}).get("phase", "Pending") != "Pending" or spec.get("schedulingGates"):
        return None
    annotations = meta.get("annotations") or {}
    if ann.PLACEMENT not in annotations:
        selected = (spec.get("nodeSelector") or {}).get(ann.HOSTNAME_LABEL)
        return str(selected) if selected else None
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
    """Watches Muster pods and binds the ones waiting for Muster's scheduling once their node has room."""

    def __init__(self, rest: KubeRest, *, scheduler_name: str = SCHEDULER_NAME, backoff: Backoff | None = None,
                 on_bound: Callable[[], None] | None = None) -> None:
        self.rest = rest
        self.scheduler_name = scheduler_name
        self.backoff = backoff
        self.on_bound = on_bound
        self.bound = 0
        self.room = NodeRoom()
        #: bindings on their way to the API server (a gang's pods are bound concurrently)
        self._inflight: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_BINDINGS_IN_FLIGHT)
        #: node -> pods planned onto it that wait for room there, oldest first
        self.waiting: dict[str, dict[str, KubeObject]] = {}
        #: set once both caches are listed: until then pods are only counted, so that a pod listed early
        #: is not bound before the terminating pods listed after it are counted
        self.ready = False

    @property
    def pods_waiting(self) -> int:
        return sum(len(pods) for pods in self.waiting.values())

    async def bind(self, pod: KubeObject) -> bool:
        """Bind ``pod`` to its planned node if it has room (else hold it); False when not bound now.

        The binding request goes out as its own task (at most ``MAX_BINDINGS_IN_FLIGHT`` at once), so
        the pods of a gang are bound concurrently; its GPUs are reserved here, before the request."""
        node = binding_target(pod, self.scheduler_name)
        if node is None:
            return False
        key = pod_key(pod)
        gpus = pod_gpus(pod)
        if not self.room.fits(node, gpus):
            if key not in self.waiting.setdefault(node, {}):
                log.info("pod %s waits for room on node %s (needs %d GPUs, %s free)", key, node, gpus,
                         self.room.free(node))
            self.waiting[node][key] = pod
            return False
        self._unwait(node, key)
        self.room.reserve(pod, node)  # before the request: a concurrent decision must see these GPUs taken
        await self._slots.acquire()
        task = asyncio.create_task(self._post(pod, node, key), name=f"bind {key}")
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        return True

    def place(self, pod: KubeObject, namespace: str) -> KubeObject:
        """``pod``, about to be created in ``namespace``, as it should be created: already on its planned node
        (``spec.nodeName``) when that node has room for it now and no earlier pod waits there, its GPUs
        reserved here as ``bind`` reserves them, so that no binding request and no wait for this binder's
        watch follow its creation; else ``pod`` as it is, for ``bind`` to bind once its node has room.
        ``unplace`` undoes the reservation when the creation fails."""
        node = binding_target(pod, self.scheduler_name)
        if node is None or not self.ready or self.waiting.get(node):
            return pod
        placed = {**pod, "metadata": {**(pod.get("metadata") or {}), "namespace": namespace},
                  "spec": {**pod["spec"], "nodeName": node}}
        if not self.room.fits(node, pod_gpus(placed)):
            return pod
        self.room.reserve(placed, node)
        return placed

    def unplace(self, pod: KubeObject) -> None:
        """Undo ``place``'s reservation of a pod whose creation failed."""
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self.room.unreserve(pod, str(node))

    async def _post(self, pod: KubeObject, node: str, key: str) -> None:
        meta = pod["metadata"]
        path = PODS.object_path(str(meta["name"]), str(meta["namespace"]), "binding")
        try:
            await self.rest.request("POST", path, body=binding(str(meta["name"]), node))
        except Exception as exc:
            if status_of(exc) == 409:
                return  # bound by an earlier event: the reservation stands until the watch shows the pod
            self.room.unreserve(pod, node)
            if not is_not_found(exc):
                log.error("binding pod %s to %s failed: %s", key, node, exc)
            return
        finally:
            self._slots.release()
        self.bound += 1
        if self.on_bound is not None:
            self.on_bound()

    async def settled(self) -> None:
        """Until every binding sent so far has its answer."""
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)

    async def _on_pod(self, event_type: str, pod: KubeObject) -> None:
        if event_type == "DELETED":
            released = self.room.forget(pod)
            for node in list(self.waiting):
                self._unwait(node, pod_key(pod))
        else:
            released = self.room.observe(pod)
            if self.ready:
                await self.bind(pod)
        if released is not None:
            await self._retry(released)

    async def _on_node(self, event_type: str, node: KubeObject) -> None:
        name = str((node.get("metadata") or {}).get("name") or "")
        if event_type == "DELETED":
            self.room.remove_node(name)
        elif not self.room.set_node(node):
            return
        await self._retry(name)

    async def _retry(self, node: str) -> None:
        """Bind, oldest first, the pods waiting on ``node`` that fit now."""
        if not self.ready:
            return
        for key, pod in list(self.waiting.get(node, {}).items()):
            if key not in self.waiting.get(node, {}):
                continue  # handled meanwhile
            if binding_target(pod, self.scheduler_name) != node:
                self._unwait(node, key)
                continue
            if not self.room.fits(node, pod_gpus(pod)):
                break  # first come, first bound: a later, smaller pod does not overtake
            await self.bind(pod)

    def _unwait(self, node: str, key: str) -> None:
        pods = self.waiting.get(node)
        if pods is not None and pods.pop(key, None) is not None and not pods:
            del self.waiting[node]

    async def run(self, stop: asyncio.Event) -> None:
        """Bind pods until ``stop`` is set."""
        nodes = node_cache(self.rest, backoff=self.backoff)
        nodes.add_handler(self._on_node)
        informer = pod_cache(self.rest, label_selector=ann.JOB_ID, backoff=self.backoff)
        informer.add_handler(self._on_pod)
        nodes.start()
        informer.start()
        try:
            try:
                await asyncio.wait_for(nodes.wait_synced(), NODE_SYNC_TIMEOUT_S)
            except TimeoutError:
                log.warning("binder: no list of Nodes after %.0fs (is `list nodes` allowed?); binding without "
                            "knowing their room, the kubelet still admits each pod", NODE_SYNC_TIMEOUT_S)
            await informer.wait_synced()
            self.ready = True
            for pod in informer.items():
                await self.bind(pod)
            await stop.wait()
        finally:
            await informer.stop()
            await nodes.stop()
            for task in list(self._inflight):
                task.cancel()
            await self.settled()
