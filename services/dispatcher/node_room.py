"""GPUs free on each node as the binder sees them. Pure bookkeeping: objects in, answers out.

Free = the Node's allocatable ``nvidia.com/gpu`` minus the GPUs of the Muster pods bound to it that have
not finished (terminating pods included: their containers may still hold the devices) minus the
binder's own bindings not yet seen back from the watch. A node whose allocatable is not known yet
counts as roomy, so the binder never waits on missing information; the kubelet still admits every pod.
Pods of other schedulers on the same node are not counted here (the binder watches only Muster's pods);
the queue manager's capacity view already subtracts them before it plans.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from schemas.kube import GPU_RESOURCE
from services.spec.pod_resources import holds_node_resources, pod_gpus
from services.spec.quantity import whole

KubeObject = dict[str, Any]


def pod_key(pod: KubeObject) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def node_allocatable_gpus(node: KubeObject) -> int | None:
    """The node's allocatable GPUs, or None when it does not say (or says something unreadable)."""
    value = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
    if value is None:
        return None
    try:
        return max(0, whole(value))
    except ValueError:
        return None


class NodeRoom:
    def __init__(self) -> None:
        self.allocatable: dict[str, int] = {}
        self.held: dict[str, tuple[str, int]] = {}  # pod key -> (node, GPUs)
        self.used: dict[str, int] = defaultdict(int)

    # ------------------------------------------------------------------ nodes

    def set_node(self, node: KubeObject) -> bool:
        """Record a Node; True when its allocatable GPUs grew (waiting pods may fit now)."""
        name = str((node.get("metadata") or {}).get("name") or "")
        gpus = node_allocatable_gpus(node)
        before = self.allocatable.get(name)
        if gpus is None:
            self.allocatable.pop(name, None)
            return before is not None
        self.allocatable[name] = gpus
        return before is None or gpus > before

    def remove_node(self, name: str) -> None:
        self.allocatable.pop(name, None)

    # ------------------------------------------------------------------ pods

    def observe(self, pod: KubeObject) -> str | None:
        """Fold a pod as it is now; the node it released GPUs on, if it did."""
        key = pod_key(pod)
        if holds_node_resources(pod):
            node = str(pod["spec"]["nodeName"])
            released = self._release(key) if self.held.get(key, (node, 0))[0] != node else None
            self._hold(key, node, pod_gpus(pod))
            return released
        return self._release(key)

    def forget(self, pod: KubeObject) -> str | None:
        """A deleted pod; the node it released GPUs on, if it held any."""
        return self._release(pod_key(pod))

    def reserve(self, pod: KubeObject, node: str) -> None:
        """Count ``pod`` on ``node`` from the moment the binder decides to bind it."""
        self._hold(pod_key(pod), node, pod_gpus(pod))

    def unreserve(self, pod: KubeObject, node: str) -> None:
        """Undo ``reserve`` after a binding that did not happen."""
        key = pod_key(pod)
        if self.held.get(key, ("", 0))[0] == node:
            self._release(key)

    # ------------------------------------------------------------------ reads

    def free(self, node: str) -> int | None:
        allocatable = self.allocatable.get(node)
        return None if allocatable is None else allocatable - self.used.get(node, 0)

    def fits(self, node: str, gpus: int) -> bool:
        free = self.free(node)
        return gpus == 0 or free is None or gpus <= free

    # ------------------------------------------------------------------ internals

    def _hold(self, key: str, node: str, gpus: int) -> None:
        _, before = self.held.get(key, (node, 0))
        self.held[key] = (node, gpus)
        self.used[node] += gpus - before

    def _release(self, key: str) -> str | None:
        held = self.held.pop(key, None)
        if held is None:
            return None
        node, gpus = held
        self.used[node] -= gpus
        if self.used[node] <= 0:
            del self.used[node]
        return node if gpus else None
