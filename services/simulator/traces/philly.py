"""Microsoft Philly (philly-pollux/philly.csv) as one queue per virtual cluster, in two set-ups.

- Every one of the 15 VCs becomes queue ``vc-<hash>`` with nominal quota = its nodes x 8 GPUs.
- Node counts come from ``helios/philly_vc_node_count.csv`` (11 VCs; the 8 GPUs per node that the
  Helios QSSF simulator assumes for Philly). The 4 VCs missing from that file (tiny: 3-8 jobs of at
  most 8 GPUs each) get one node each. A VC never gets fewer nodes than its largest job in the whole
  trace needs (``ceil(GPUs / 8)``), so every job fits in its own VC; at full size this changes
  nothing on the real trace (356 x 8 = 2,848 GPUs).
- ``node_scale`` shrinks (or grows) every VC's node count to ``max(round(nodes x scale), floor)``
  (floor: one node, or what the VC's largest job needs) to study the same arrivals under more
  contention: the trace's GPU demand averages only ~13% of the full 2,848 GPUs.
- ``setup`` says how VCs share nodes:

  - ``cohort`` (default): one node group holding every VC's nodes; all queues in cohort ``philly``
    with no borrowing limit, so idle quota of one VC can be borrowed by another (and reclaimed).
  - ``partitioned``: static partitions, as Philly and the Helios simulator ran it. Each VC has its
    own node group (label ``philly.muster.dev/vc=<hash>``) and a pool ``vc-<hash>`` selecting it;
    its queue names that pool and no cohort, so it runs only on its own nodes and never borrows.

  Both set-ups have the same nodes at the same ``node_scale``.
- Submit times are seconds after the first submission; ``duration`` is the recorded run time.
- No runtime estimate is written: the simulator fills it from completed-job history (see
  ``services.simulator.estimates``). Jobs are marked checkpointable (DL training that saves
  checkpoints, the assumption Tiresias and Gandiva make for Philly) unless told otherwise.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Literal, get_args

from schemas.config import (
    AutoscaleConfig,
    BurstBudgetConfig,
    ClusterConfig,
    CohortConfig,
    MusterConfig,
    NodeGroupConfig,
    PoolConfig,
    QueueConfig,
    ResourceQuotaConfig,
    TopologyConfig,
)
from services.core.model import gpu_resource
from services.simulator.traces.common import Trace, require_file
from services.simulator.workload import Workload, WorkloadJob

GPUS_PER_NODE = 8
NODES_FOR_MISSING_VC = 1
GPU_TYPE = "generic"
COHORT = "philly"
NODES_PER_RACK = 32
VC_LABEL = "philly.muster.dev/vc"
Setup = Literal["cohort", "partitioned"]
SETUPS: tuple[str, ...] = get_args(Setup)


def queue_of(vc: str) -> str:
    return f"vc-{vc.lower()}"


def read_vc_node_counts(path: Path) -> dict[str, int]:
    """``vc -> node count`` from the Helios Philly VC file."""
    with require_file(path).open(newline="", encoding="utf-8") as fh:
        return {row["vc"].strip(): int(row["node num"]) for row in csv.DictReader(fh)}


def read_philly_jobs(path: Path, checkpointable: bool = True) -> Workload:
    """The Philly jobs in arrival order (same-second submissions keep file order)."""
    rows: list[tuple[datetime, int, dict[str, str]]] = []
    with require_file(path).open(newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            rows.append((datetime.fromisoformat(row["timestamp"]), i, row))
    rows.sort(key=lambda r: (r[0], r[1]))
    if not rows:
        return Workload("philly", ())
    origin = rows[0][0]
    jobs = tuple(
        WorkloadJob(
            job_id=f"philly-{i:05d}",
            submit_time=(ts - origin).total_seconds(),
            duration=float(row["duration"]),
            num_gpus=int(row["num_gpus"]),
            queue=queue_of(row["cluster"].strip()),
            checkpointable=checkpointable,
        )
        for ts, i, row in rows
    )
    return Workload("philly", jobs)


def vc_nodes(
    vcs: list[str],
    node_counts: Mapping[str, int],
    node_scale: float = 1.0,
    largest_job: Mapping[str, int] | None = None,
    gpus_per_node: int = GPUS_PER_NODE,
) -> dict[str, int]:
    """Nodes per VC: its Helios count (or one node) times ``node_scale``, rounded, at least its floor."""
    if node_scale <= 0:
        raise ValueError("node_scale must be positive")
    largest = largest_job or {}
    return {
        vc: max(
            1,
            round(node_counts.get(vc, NODES_FOR_MISSING_VC) * node_scale),
            math.ceil(largest.get(vc, 0) / gpus_per_node),
        )
        for vc in vcs
    }


def _group(name: str, count: int, gpus_per_node: int, labels: dict[str, str] | None = None) -> NodeGroupConfig:
    return NodeGroupConfig(
        name=name,
        count=count,
        gpus_per_node=gpus_per_node,
        gpu_type=GPU_TYPE,
        topology=TopologyConfig(racks=max(1, math.ceil(count / NODES_PER_RACK)), rack_prefix=f"rack-{name}"),
        labels=labels or {},
    )


def philly_cluster(
    vcs: list[str],
    node_counts: Mapping[str, int],
    gpus_per_node: int = GPUS_PER_NODE,
    node_scale: float = 1.0,
    setup: str = "cohort",
    largest_job: Mapping[str, int] | None = None,
) -> MusterConfig:
    """The Philly cluster in ``setup`` (see the module docstring): one queue per VC, nominal = its GPUs."""
    if setup not in SETUPS:
        raise ValueError(f"unknown Philly set-up {setup!r}; known: {', '.join(SETUPS)}")
    nodes = vc_nodes(vcs, node_counts, node_scale, largest_job, gpus_per_node)
    quota = {vc: {gpu_resource(GPU_TYPE): ResourceQuotaConfig(nominal=n * gpus_per_node)} for vc, n in nodes.items()}
    if setup == "partitioned":
        return MusterConfig(
            clusters=[
                ClusterConfig(
                    name="philly",
                    node_groups=[
                        _group(queue_of(vc), n, gpus_per_node, {VC_LABEL: vc.lower()})
                        for vc, n in sorted(nodes.items())
                    ],
                )
            ],
            pools=[PoolConfig(name=queue_of(vc), node_labels={VC_LABEL: vc.lower()}) for vc in sorted(nodes)],
            queues=[
                QueueConfig(name=queue_of(vc), tenant=queue_of(vc), pool=queue_of(vc), quotas=quota[vc])
                for vc in sorted(nodes)
            ],
        )
    total = sum(nodes.values())
    group = NodeGroupConfig(
        name="philly",
        count=total,
        gpus_per_node=gpus_per_node,
        gpu_type=GPU_TYPE,
        topology=TopologyConfig(racks=max(1, math.ceil(total / NODES_PER_RACK))),
    )
    queues = [
        QueueConfig(name=queue_of(vc), cohort=COHORT, tenant=queue_of(vc), quotas=quota[vc]) for vc in sorted(nodes)
    ]
    return MusterConfig(
        clusters=[ClusterConfig(name="philly", node_groups=[group])],
        cohorts=[CohortConfig(name=COHORT)],
        queues=queues,
    )


def with_burst(cluster: MusterConfig, nodes: int, delay_s: float, price_per_gpu_hour: float,
               gpu_hours: float) -> MusterConfig:
    """The partitioned set-up with a cloud to burst to: every VC may have up to ``nodes`` more nodes bought
    (ready ``delay_s`` after they are asked for) in its own partition (its label, so its pool), within a burst
    budget of ``gpu_hours`` a month. Its quota is unchanged: work on bought nodes runs outside it."""
    if not cluster.pools:
        raise ValueError("bursting is modelled for the partitioned set-up only")
    grown = [
        home.model_copy(update={
            "count": 0, "topology": TopologyConfig(rack_prefix=f"cloud-{home.name}"),
            "autoscale": AutoscaleConfig(max=nodes, provision_delay_s=delay_s, price_per_gpu_hour=price_per_gpu_hour)})
        for c in cluster.clusters for home in c.node_groups
    ]
    queues = [q.model_copy(update={"burst_budget": BurstBudgetConfig(gpu_hours=gpu_hours)}) for q in cluster.queues]
    cloud = ClusterConfig(name="cloud", burst=True, node_groups=grown)
    return cluster.model_copy(update={"clusters": [*cluster.clusters, cloud], "queues": queues})


def load_philly(
    traces_dir: Path, checkpointable: bool = True, node_scale: float = 1.0, setup: str = "cohort"
) -> Trace:
    """Workload and cluster of the Philly replay (all 15 VCs, quotas per VC) in ``setup``."""
    workload = read_philly_jobs(traces_dir / "philly-pollux" / "philly.csv", checkpointable)
    node_counts = read_vc_node_counts(traces_dir / "helios" / "philly_vc_node_count.csv")
    largest: dict[str, int] = {}
    for job in workload.jobs:
        vc = job.queue.removeprefix("vc-")
        largest[vc] = max(largest.get(vc, 0), job.num_gpus)
    vcs = sorted(set(largest) | set(node_counts))
    cluster = philly_cluster(vcs, node_counts, node_scale=node_scale, setup=setup, largest_job=largest)
    return Trace(workload, cluster)


def parse_philly_variant(variant: str) -> tuple[str, float]:
    """``[SETUP][:SCALE]`` after ``philly:`` -> (set-up, node scale): ``0.25``, ``partitioned``,
    ``partitioned:0.25``, ``cohort:0.3``; empty -> (``cohort``, 1.0)."""
    setup, scale = "cohort", 1.0
    for part in filter(None, variant.split(":")):
        if part in SETUPS:
            setup = part
            continue
        try:
            scale = float(part)
        except ValueError:
            raise ValueError(
                f"philly variant {variant!r}: expected [SETUP][:SCALE], SETUP one of {', '.join(SETUPS)}"
            ) from None
    return setup, scale
