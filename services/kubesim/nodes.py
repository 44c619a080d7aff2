"""Node objects built from one cluster of the cluster file, and their readiness."""

from __future__ import annotations

from typing import Any

from schemas.config import ClusterConfig, NodeGroupConfig
from schemas.kube import (
    BLOCK,
    GPU_COUNT_LABEL,
    GPU_PRESENT_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    GPU_TYPE,
    MIG_RESOURCE_PREFIX,
    NODE_GROUP,
    NVLINK_GROUPS,
    RACK,
    SHARED_GPUS,
    TOPOLOGY_PREFIX,
)
from services.kubesim.meta import Obj, now_rfc3339
from services.spec.cluster_file import group_node_names, rack_of

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_taint(text: str) -> dict[str, str]:
    """``key[=value][:Effect]`` as a taint; the effect defaults to NoSchedule."""
    effect = "NoSchedule"
    body = text
    if ":" in text and text.rsplit(":", 1)[1] in EFFECTS:
        body, effect = text.rsplit(":", 1)
    key, _, value = body.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def _conditions(ready: bool) -> list[dict[str, Any]]:
    now = now_rfc3339()
    healthy = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conds = [
        {"type": t, "status": "False", "reason": r, "message": msg, "lastHeartbeatTime": now,
         "lastTransitionTime": now}
        for t, r, msg in healthy
    ]
    conds.append(ready_condition(ready, now))
    return conds


def ready_condition(ready: bool, now: str | None = None) -> dict[str, Any]:
    ts = now or now_rfc3339()
    if ready:
        return {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready "
                "status", "lastHeartbeatTime": ts, "lastTransitionTime": ts}
    return {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": ts, "lastTransitionTime": ts}


def node_object(cluster: str, group: NodeGroupConfig, index: int, name: str, ip: str) -> Obj:
    labels = {
        **group.labels,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": group.name,
        "topology.kubernetes.io/zone": group.topology.zone,
        BLOCK: group.topology.block,
        RACK: rack_of(group, index),
        f"{TOPOLOGY_PREFIX}cluster": cluster,
        NODE_GROUP: group.name,
        GPU_TYPE: group.gpu_type,
    }
    annotations = {"node.alpha.kubernetes.io/ttl": "0"}
    if group.gpus_per_node:
        labels[GPU_PRODUCT_LABEL] = group.gpu_type
        labels[GPU_COUNT_LABEL] = str(group.gpus_per_node)
        labels[GPU_PRESENT_LABEL] = "true"
        groups = group.nvlink_groups or [group.whole_gpus]
        if group.whole_gpus:
            annotations[NVLINK_GROUPS] = ",".join(str(g) for g in groups)
    if group.shared_gpus:
        labels[SHARED_GPUS] = str(group.shared_gpus)
    if group.mig_gpus:
        labels["nvidia.com/mig.strategy"] = "mixed"
    resources = {
        "cpu": str(group.cpu),
        "memory": f"{group.memory_gb * 1024 * 1024}Ki",
        "pods": "110",
        "ephemeral-storage": "1Ti",
        GPU_RESOURCE: str(group.whole_gpus),  # MIG-enabled GPUs show only as their slices (mixed strategy)
        **{MIG_RESOURCE_PREFIX + profile: str(n) for profile, n in group.mig_slices.items()},
    }
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"taints": [parse_taint(t) for t in group.taints], "podCIDR": f"10.{index % 250}.0.0/24"},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": _conditions(True),
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "v1.32.0-kubesim",
                "kubeProxyVersion": "v1.32.0-kubesim",
                "containerRuntimeVersion": "kubesim://1.0",
                "osImage": "kubesim",
                "kernelVersion": "6.1.0",
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "phase": "Running",
        },
    }


def cluster_nodes(cluster: ClusterConfig) -> list[Obj]:
    """Every node of the cluster, named ``<cluster>-<group>-<index>``."""
    nodes: list[Obj] = []
    for group in cluster.node_groups:
        for i, name in enumerate(group_node_names(cluster.name, group)):
            n = len(nodes)
            nodes.append(node_object(cluster.name, group, i, name, f"10.0.{n // 250}.{n % 250 + 1}"))
    return nodes


def node_ready(node: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def with_readiness(node: Obj, ready: bool) -> Obj:
    """The node with its Ready condition and unreachable taints set for ``ready``."""
    status = node.setdefault("status", {})
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
    conds.append(ready_condition(ready))
    status["conditions"] = conds
    spec = node.setdefault("spec", {})
    taints = [t for t in spec.get("taints") or [] if t.get("key") != UNREACHABLE_TAINT]
    if not ready:
        now = now_rfc3339()
        taints += [
            {"key": UNREACHABLE_TAINT, "effect": "NoSchedule", "timeAdded": now},
            {"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": now},
        ]
    spec["taints"] = taints
    return node
