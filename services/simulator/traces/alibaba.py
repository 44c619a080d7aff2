"""Alibaba PAI 2023 "openb" pod lists on the openb GPU node list.

- Each pod is one job: submit = ``creation_time``, duration = ``deletion_time - scheduled_time``.
  Pods never scheduled (no ``scheduled_time``; the trace's Pending pods) have no run time and are
  dropped, as are CPU-only pods (``num_gpu`` = 0): Muster admits GPU work.
- Fractional GPUs are rounded up to whole GPUs: a pod asking ``num_gpu`` GPUs at ``gpu_milli`` < 1000
  each takes ``num_gpu`` whole GPUs (the core schedules whole devices).
- ``gpu_spec`` (allowed GPU models, ``|``-separated) pins the job's GPU type when it names exactly
  one model; otherwise the job accepts any GPU type.
- Queues by QoS class: ``guaranteed`` (priority 1000, not preemptible), ``ls`` (latency-sensitive,
  priority 100), ``burstable`` (50) and ``be`` (best-effort, 10). All share cohort ``openb``; each
  queue's nominal quota of every GPU type is that type's GPUs split in proportion to the queue's
  share of requested GPU-seconds (rounded down, at least 0), borrowing unlimited.
- Nodes: one node group per (model, GPUs per node, CPU, memory) shape, GPU type = lower-cased model.
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from pathlib import Path

from schemas.config import (
    ClusterConfig,
    CohortConfig,
    MusterConfig,
    NodeGroupConfig,
    QueueConfig,
    ResourceQuotaConfig,
)
from services.core.model import ANY_GPU, gpu_resource
from services.simulator.traces.common import Trace, require_file
from services.simulator.workload import Workload, WorkloadJob, sort_jobs

COHORT = "openb"
QOS_QUEUES: dict[str, tuple[str, int, bool]] = {  # qos -> (queue, priority, preemptible)
    "Guaranteed": ("guaranteed", 1000, False),
    "LS": ("ls", 100, True),
    "Burstable": ("burstable", 50, True),
    "BE": ("be", 10, True),
}


def gpu_type_of(model: str) -> str:
    return model.strip().lower()


def read_openb_pods(path: Path) -> Workload:
    """GPU pods with a known run time, in arrival order."""
    jobs: list[WorkloadJob] = []
    with require_file(path).open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            num_gpu = int(row["num_gpu"])
            if num_gpu == 0 or not row["scheduled_time"] or not row["deletion_time"]:
                continue
            duration = float(row["deletion_time"]) - float(row["scheduled_time"])
            if duration <= 0:
                continue
            queue, priority, preemptible = QOS_QUEUES.get(row["qos"], QOS_QUEUES["BE"])
            models = [m for m in row["gpu_spec"].split("|") if m.strip()]
            jobs.append(
                WorkloadJob(
                    job_id=row["name"],
                    submit_time=float(row["creation_time"]),
                    duration=duration,
                    num_gpus=num_gpu,
                    queue=queue,
                    gpu_type=gpu_type_of(models[0]) if len(models) == 1 else ANY_GPU,
                    priority=priority,
                    preemptible=preemptible,
                )
            )
    return Workload(path.stem, sort_jobs(jobs))


def read_openb_nodes(path: Path) -> list[NodeGroupConfig]:
    """Node groups, one per distinct node shape."""
    shapes: Counter[tuple[str, int, int, int]] = Counter()
    with require_file(path).open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            gpus = int(row["gpu"])
            if gpus == 0:
                continue
            cores = math.ceil(int(row["cpu_milli"]) / 1000)
            memory_gb = math.ceil(int(row["memory_mib"]) / 1024)
            shapes[(gpu_type_of(row["model"]), gpus, cores, memory_gb)] += 1
    return [
        NodeGroupConfig(
            name=f"{model}-{gpus}g-{cores}c-{mem}g",
            count=count,
            gpus_per_node=gpus,
            gpu_type=model,
            cpu=cores,
            memory_gb=mem,
        )
        for (model, gpus, cores, mem), count in sorted(shapes.items())
    ]


def openb_cluster(workload: Workload, groups: list[NodeGroupConfig]) -> MusterConfig:
    """Cluster of the node groups with one queue per QoS class sharing a cohort."""
    per_type: dict[str, int] = defaultdict(int)
    for g in groups:
        per_type[g.gpu_type] += g.count * g.gpus_per_node
    demand: dict[str, float] = defaultdict(float)
    for j in workload.jobs:
        demand[j.queue] += j.duration * j.num_gpus
    total = sum(demand.values()) or 1.0
    queues = [
        QueueConfig(
            name=name,
            cohort=COHORT,
            tenant=name,
            quotas={
                gpu_resource(t): ResourceQuotaConfig(nominal=int(gpus * demand.get(name, 0.0) / total))
                for t, gpus in sorted(per_type.items())
            },
        )
        for name, _, _ in sorted(QOS_QUEUES.values())
    ]
    return MusterConfig(
        clusters=[ClusterConfig(name="openb", node_groups=groups)],
        cohorts=[CohortConfig(name=COHORT)],
        queues=queues,
    )


def load_alibaba(traces_dir: Path, variant: str = "default") -> Trace:
    """The openb pod list ``variant`` (e.g. ``default``, ``multigpu50``) on the openb GPU nodes."""
    folder = traces_dir / "alibaba-pai-gpu-2023"
    workload = read_openb_pods(folder / f"openb_pod_list_{variant}.csv")
    groups = read_openb_nodes(folder / "openb_node_list_gpu_node.csv")
    return Trace(workload, openb_cluster(workload, groups))
