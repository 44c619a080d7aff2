"""The cluster file: a YAML document with clusters, node groups, queues and cohorts.

It feeds the simulator, kubesim and ``muster up``. Node names are deterministic:
``<cluster>-<group>-<index>``; racks are filled in order (index * racks // count).

Pools confine queues to nodes: a node belongs to the first pool, by name, whose (non-empty)
``node_labels`` it carries, else to ``default``; a queue with a ``pool`` runs only on that pool's
nodes. ``core_nodes`` labels every node with its pool (``POOL_LABEL``), the same rule and label the queue
manager applies (``services.queue_manager.pools``), here for the simulator; a pooled queue's jobs get the
matching selector from ``services.spec.core_types.configured_job``, in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

import yaml

from schemas.config import ClusterConfig, MusterConfig, NodeGroupConfig, PoolConfig, QueueConfig
from schemas.kube import GPU_TYPE, NODE_GROUP, POOL
from services.core.model import BurstBudget, CohortSpec, GrowableGroup, Node, QueueSpec
from services.spec.core_types import cohort_spec, queue_spec

POOL_LABEL = POOL
DEFAULT_POOL = "default"


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


def node_pool(labels: Mapping[str, str], pools: Iterable[PoolConfig]) -> str:
    """The pool of a node with ``labels``: the first by name whose (non-empty) labels it carries."""
    for pool in sorted(pools, key=lambda p: p.name):
        if pool.node_labels and all(labels.get(k) == v for k, v in pool.node_labels.items()):
            return pool.name
    return DEFAULT_POOL


def group_node(cfg: MusterConfig, cluster: str, group: NodeGroupConfig, name: str, index: int) -> Node:
    """One node of a group as the core sees it, labelled with its group, GPU type and pool."""
    return _node(cfg.pools, cluster, group, name, index)


def _node(pools: Iterable[PoolConfig], cluster: str, group: NodeGroupConfig, name: str, index: int) -> Node:
    own = {**group.labels, NODE_GROUP: group.name, GPU_TYPE: group.gpu_type}
    labels = {**own, POOL_LABEL: node_pool(own, pools)}
    topo = {"zone": group.topology.zone, "block": group.topology.block, "rack": rack_of(group, index)}
    return Node(
        name=name,
        cluster=cluster,
        gpu_type=group.gpu_type,
        gpus=group.whole_gpus,
        cpu_m=group.cpu * 1000,
        memory_mb=group.memory_gb * 1024,
        topology=MappingProxyType(topo),
        labels=MappingProxyType(labels),
        nvlink_groups=tuple(group.nvlink_groups),
        taints=frozenset(group.taints),
        shared_gpus=group.shared_gpus,
        mig=MappingProxyType(group.mig_slices),
    )


def core_nodes(cfg: MusterConfig) -> list[Node]:
    """Expand every node group into core ``Node`` values, each labelled with its pool."""
    return [group_node(cfg, cluster.name, group, name, i)
            for cluster in cfg.clusters for group in cluster.node_groups
            for i, name in enumerate(group_node_names(cluster.name, group))]


def growable_group_name(cluster: str, group: NodeGroupConfig) -> str:
    """The core's name of a node group that can grow: unique across clusters."""
    return f"{cluster}-{group.name}"


def bought_node_name(group: str, serial: int) -> str:
    """The name of the ``serial``-th node bought for a growable group (never one of its first nodes' names)."""
    return f"{group}-b{serial}"


def growable_groups(cluster: ClusterConfig, pools: Iterable[PoolConfig]) -> list[tuple[GrowableGroup, NodeGroupConfig]]:
    """The node groups of ``cluster`` that can grow, as the core sees them (labelled with their pool), each with
    its configuration."""
    pools = list(pools)
    out: list[tuple[GrowableGroup, NodeGroupConfig]] = []
    for group in cluster.node_groups:
        auto = group.autoscale
        if auto is None:
            continue
        name = growable_group_name(cluster.name, group)
        template = _node(pools, cluster.name, group, bought_node_name(name, 0), 0)
        out.append((GrowableGroup(name, template, auto.min, auto.max, auto.provision_delay_s,
                                  auto.price_per_gpu_hour, auto.idle_s), group))
    return out


def core_growable_groups(cfg: MusterConfig) -> list[tuple[GrowableGroup, list[str]]]:
    """The node groups that can grow, each with the names of the nodes it starts with."""
    return [(grown, group_node_names(cluster.name, group))
            for cluster in cfg.clusters for grown, group in growable_groups(cluster, cfg.pools)]


BUDGET_WINDOW_S = {"day": 24 * 3600.0, "week": 7 * 24 * 3600.0, "month": 30 * 24 * 3600.0}


def burst_budget(queue: QueueConfig) -> BurstBudget | None:
    """A queue's burst budget as the core checks it (None: nothing is bought for its jobs)."""
    b = queue.burst_budget
    return None if b is None else BurstBudget(b.gpu_hours, b.money, BUDGET_WINDOW_S[b.window])


def core_burst_budgets(cfg: MusterConfig) -> dict[str, BurstBudget]:
    """Each queue's burst budget, as the core checks it."""
    return {q.name: b for q in cfg.queues if (b := burst_budget(q)) is not None}


def core_queues(cfg: MusterConfig) -> list[QueueSpec]:
    return [queue_spec(q) for q in cfg.queues]


def core_cohorts(cfg: MusterConfig) -> list[CohortSpec]:
    return [cohort_spec(c) for c in cfg.cohorts]
