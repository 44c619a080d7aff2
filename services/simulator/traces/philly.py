"""Microsoft Philly (philly-pollux/philly.csv) as one queue per virtual cluster.

- Every one of the 15 VCs becomes queue ``vc-<hash>``; all queues share cohort ``philly`` with no
  borrowing limit, so idle quota of one VC can be borrowed by another (and reclaimed).
- Quotas come from ``helios/philly_vc_node_count.csv`` (11 VCs): nominal = nodes x 8 GPUs (the
  8 GPUs per node that the Helios QSSF simulator assumes for Philly). The 4 VCs missing from that
  file (tiny: 3-8 jobs of at most 8 GPUs each) get one node each, so every VC's largest job fits in
  its own quota. The cluster has one node group holding all those nodes (356 x 8 = 2,848 GPUs).
- ``node_scale`` shrinks (or grows) every VC's node count to ``max(1, round(nodes x scale))`` to
  study the same arrivals under more contention: the trace's GPU demand averages only ~13% of the
  full 2,848 GPUs, so the full-size cluster barely queues.
- Submit times are seconds after the first submission; ``duration`` is the recorded run time.
- No runtime estimate is written: the simulator fills it from completed-job history (see
  ``services.simulator.estimates``). Jobs are marked checkpointable (DL training that saves
  checkpoints, the assumption Tiresias and Gandiva make for Philly) unless told otherwise.
"""

from __future__ import annotations

import csv
import math
from datetime import datetime
from pathlib import Path

from schemas.config import (
    ClusterConfig,
    CohortConfig,
    MusterConfig,
    NodeGroupConfig,
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


def philly_cluster(
    vcs: list[str], node_counts: dict[str, int], gpus_per_node: int = GPUS_PER_NODE, node_scale: float = 1.0
) -> MusterConfig:
    """One node group with every VC's nodes; one queue per VC with nominal = its nodes' GPUs."""
    if node_scale <= 0:
        raise ValueError("node_scale must be positive")
    nodes = {vc: max(1, round(node_counts.get(vc, NODES_FOR_MISSING_VC) * node_scale)) for vc in vcs}
    total = sum(nodes.values())
    group = NodeGroupConfig(
        name="philly",
        count=total,
        gpus_per_node=gpus_per_node,
        gpu_type=GPU_TYPE,
        topology=TopologyConfig(racks=max(1, math.ceil(total / NODES_PER_RACK))),
    )
    queues = [
        QueueConfig(
            name=queue_of(vc),
            cohort=COHORT,
            tenant=queue_of(vc),
            quotas={gpu_resource(GPU_TYPE): ResourceQuotaConfig(nominal=count * gpus_per_node)},
        )
        for vc, count in sorted(nodes.items())
    ]
    return MusterConfig(
        clusters=[ClusterConfig(name="philly", node_groups=[group])],
        cohorts=[CohortConfig(name=COHORT)],
        queues=queues,
    )


def load_philly(traces_dir: Path, checkpointable: bool = True, node_scale: float = 1.0) -> Trace:
    """Workload and cluster of the Philly replay (all 15 VCs, quotas per VC)."""
    workload = read_philly_jobs(traces_dir / "philly-pollux" / "philly.csv", checkpointable)
    node_counts = read_vc_node_counts(traces_dir / "helios" / "philly_vc_node_count.csv")
    vcs = sorted({j.queue.removeprefix("vc-") for j in workload.jobs} | set(node_counts))
    return Trace(workload, philly_cluster(vcs, node_counts, node_scale=node_scale))
