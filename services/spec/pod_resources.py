"""What a pod holds on its node, read from Kubernetes objects. Pure; shared by the node-state watcher
(capacity reports) and the dispatcher's binder (room on a node before binding)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from schemas.kube import GPU_RESOURCE
from services.spec.quantity import whole

log = logging.getLogger(__name__)

KubeObject = dict[str, Any]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def pod_gpus(pod: KubeObject) -> int:
    """GPUs one pod holds: the sum of its containers' ``nvidia.com/gpu`` limits (or requests)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU_RESOURCE) or (resources.get("requests") or {}).get(
            GPU_RESOURCE)
        if value is not None:
            try:
                total += whole(value)
            except ValueError:
                meta = pod.get("metadata") or {}
                log.warning("pod %s/%s: unreadable GPU quantity %r", meta.get("namespace", ""), meta.get("name", ""),
                            value)
    return total


def holds_node_resources(pod: KubeObject) -> bool:
    """A pod bound to a node and not finished (a terminating pod still holds its resources)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (
        (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES)


def holds_node(pod: Mapping[str, Any]) -> bool:
    """Whether a pod still counts as one of its workload's pods on its node: not ended, not being deleted
    (unlike ``holds_node_resources``, a pod on its way out no longer counts)."""
    meta = pod.get("metadata") or {}
    return not meta.get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
