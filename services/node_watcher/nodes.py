"""Node objects (plus the pods bound to them) as ``NodeState``: capacity, topology, taints, health. Pure."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from schemas.capacity import NodeState, NodeTopology, Taint
from schemas.envelope import clip_text
from schemas.kube import (
    BLOCK,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    GPU_TYPE,
    MIG_RESOURCE_PREFIX,
    NVLINK_GROUPS,
    RACK,
    SHARED_GPUS,
)
from services.spec.pod_resources import holds_node_resources, pod_gpus
from services.spec.quantity import mebibytes, millicores, whole

log = logging.getLogger(__name__)

KubeObject = dict[str, Any]

ZONE_LABEL = "topology.kubernetes.io/zone"
NO_GPU = "none"
MAX_GPUS = 64  # the wire contract's bound per node
_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
_NAME_INVALID = re.compile(r"[^a-z0-9.-]+")


def gpu_type_name(product: str) -> str:
    """A GPU product label (``NVIDIA-A100-SXM4-80GB``) as a Muster name (``nvidia-a100-sxm4-80gb``)."""
    cleaned = _NAME_INVALID.sub("-", product.lower())
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip("-.")[:63].rstrip("-.")
    return cleaned or NO_GPU


def node_gpu_type(labels: Mapping[str, str]) -> str:
    """``muster.dev/gpu-type`` when the operator set it, else the normalised ``nvidia.com/gpu.product``."""
    explicit = labels.get(GPU_TYPE)
    if explicit:
        return gpu_type_name(explicit)
    product = labels.get(GPU_PRODUCT_LABEL)
    return gpu_type_name(product) if product else NO_GPU


def gpus_in_use(pods: Iterable[KubeObject]) -> int:
    """GPUs held by the unfinished pods among ``pods``."""
    return sum(pod_gpus(p) for p in pods if holds_node_resources(p))


def ready_condition(node: KubeObject) -> KubeObject | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return dict(cond)
    return None


def _nvlink_groups(annotations: Mapping[str, str], gpus: int, node: str) -> list[int]:
    text = annotations.get(NVLINK_GROUPS, "").strip()
    if not text:
        return []
    try:
        groups = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        log.warning("node %s: unreadable %s %r", node, NVLINK_GROUPS, text)
        return []
    if sum(groups) != gpus or any(g < 1 or g > MAX_GPUS for g in groups) or len(groups) > 16:
        log.warning("node %s: %s %r does not describe its %d GPUs", node, NVLINK_GROUPS, text, gpus)
        return []
    return groups


def _taints(node: KubeObject) -> list[Taint]:
    taints = []
    for raw in (node.get("spec") or {}).get("taints") or []:
        key = raw.get("key")
        effect = raw.get("effect", "NoSchedule")
        if not key or effect not in _EFFECTS:
            continue
        taints.append(Taint(key=key, value=str(raw.get("value") or "")[:63], effect=effect))
    return taints[:64]


def _quantity(allocatable: Mapping[str, Any], name: str, convert: Any, node: str) -> int:
    value = allocatable.get(name)
    if value is None:
        return 0
    try:
        return max(0, int(convert(value)))
    except ValueError:
        log.warning("node %s: unreadable allocatable %s %r", node, name, value)
        return 0


def node_state(node: KubeObject, cluster: str, pods: Iterable[KubeObject] = ()) -> NodeState:
    """The ``NodeState`` of ``node``; ``pods`` are the pods bound to it (for ``gpus_in_use``)."""
    meta = node.get("metadata") or {}
    name = str(meta["name"])
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items() if len(str(v)) <= 63}
    annotations = meta.get("annotations") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    gpus = min(MAX_GPUS, _quantity(allocatable, GPU_RESOURCE, whole, name))
    ready = ready_condition(node)
    healthy = ready is not None and ready.get("status") == "True"
    reason = ""
    if not healthy:
        reason = "no Ready condition" if ready is None else (
            f"Ready={ready.get('status')}: {ready.get('reason', '')} {ready.get('message', '')}".strip())
    return NodeState(
        cluster=cluster,
        node=name,
        gpu_type=node_gpu_type(labels),
        gpus_allocatable=gpus,
        gpus_in_use=min(MAX_GPUS, gpus_in_use(pods)),
        cpu_m=_quantity(allocatable, "cpu", millicores, name),
        memory_mb=_quantity(allocatable, "memory", mebibytes, name),
        topology=NodeTopology(
            zone=labels.get(ZONE_LABEL, ""),
            block=labels.get(BLOCK, ""),
            rack=labels.get(RACK, ""),
            nvlink_groups=_nvlink_groups(annotations, gpus, name),
        ),
        labels=labels,
        taints=_taints(node),
        healthy=healthy,
        schedulable=not bool((node.get("spec") or {}).get("unschedulable")),
        health_reason=clip_text(reason),
        unhealthy_since=None if healthy or ready is None else _transition_time(ready),
        gpus_shared=_shared_gpus(labels, gpus, name),
        mig=_mig_slices(allocatable, name),
    )


def _shared_gpus(labels: Mapping[str, str], gpus: int, node: str) -> int:
    """How many of the node's GPUs may hold fractional pods: its ``muster.dev/shared-gpus`` label."""
    value = labels.get(SHARED_GPUS)
    if value is None:
        return 0
    try:
        return max(0, min(int(value), gpus))
    except ValueError:
        log.warning("node %s: unreadable %s label %r", node, SHARED_GPUS, value)
        return 0


def _mig_slices(allocatable: Mapping[str, Any], node: str) -> dict[str, int]:
    """MIG slices per profile: the ``nvidia.com/mig-<profile>`` resources (the device plugin's mixed strategy)."""
    out: dict[str, int] = {}
    for resource in sorted(allocatable):
        name = str(resource)
        if name.startswith(MIG_RESOURCE_PREFIX) and len(out) < 16:
            n = min(448, _quantity(allocatable, name, whole, node))
            if n > 0:
                out[name[len(MIG_RESOURCE_PREFIX):][:32]] = n
    return out


def _transition_time(condition: KubeObject) -> datetime | None:
    """The condition's ``lastTransitionTime``; None when it is missing or unreadable."""
    raw = condition.get("lastTransitionTime")
    if not isinstance(raw, str):
        return None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def _name(obj: KubeObject) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

