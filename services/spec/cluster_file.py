"""The cluster file: a YAML document with clusters, node groups, queues and cohorts.

It feeds the simulator, kubesim and ``muster up``. Node names are deterministic:
``<cluster>-<group>-<index>``; racks are filled in order (index * racks // count).
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from schemas.config import MusterConfig, NodeGroupConfig
from schemas.kube import GPU_TYPE, NODE_GROUP
from services.core.model import CohortSpec, Node, QueueSpec
from services.spec.core_types import cohort_spec, queue_spec


def load_cluster_file(path: str | Path) -> MusterConfig:
    """Parse and validate a cluster file; raises ``ValueError`` naming the file on any problem."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_cluster_yaml(text, source=str(path))


def parse_cluster_yaml(text: str, source: str = "<string>") -> MusterConfig:
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: top level must be a mapping")
    if "node_groups" in raw and "clusters" not in raw:  # single-cluster shorthand
        cluster = {"name": raw.pop("cluster", "default"), "node_groups": raw.pop("node_groups")}
        raw["clusters"] = [cluster]
    try:
        return MusterConfig.model_validate(raw)
    except Exception as exc:
        raise ValueError(f"{source}: {exc}") from exc


def group_node_names(cluster: str, group: NodeGroupConfig) -> list[str]:
    return [f"{cluster}-{group.name}-{i}" for i in range(group.count)]


def rack_of(group: NodeGroupConfig, index: int) -> str:
    racks = group.topology.racks
    return f"{group.topology.rack_prefix}-{index * racks // max(group.count, 1)}"


def core_nodes(cfg: MusterConfig) -> list[Node]:
    """Expand every node group into core ``Node`` values."""
    nodes: list[Node] = []
    for cluster in cfg.clusters:
        for group in cluster.node_groups:
            for i, name in enumerate(group_node_names(cluster.name, group)):
                topo = {"zone": group.topology.zone, "block": group.topology.block, "rack": rack_of(group, i)}
                labels = {**group.labels, NODE_GROUP: group.name, GPU_TYPE: group.gpu_type}
                nodes.append(
                    Node(
                        name=name,
                        cluster=cluster.name,
                        gpu_type=group.gpu_type,
                        gpus=group.gpus_per_node,
                        cpu_m=group.cpu * 1000,
                        memory_mb=group.memory_gb * 1024,
                        topology=MappingProxyType(topo),
                        labels=MappingProxyType(labels),
                        nvlink_groups=tuple(group.nvlink_groups),
                        taints=frozenset(group.taints),
                    )
                )
    return nodes


def core_queues(cfg: MusterConfig) -> list[QueueSpec]:
    return [queue_spec(q) for q in cfg.queues]


def core_cohorts(cfg: MusterConfig) -> list[CohortSpec]:
    return [cohort_spec(c) for c in cfg.cohorts]
