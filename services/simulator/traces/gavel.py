"""Gavel's per-VC Philly traces (philly-gavel-msr/seed=0/*.trace, tab separated, no header).

- Columns: job type, command, steps flag, needs-data-dir, total steps, arrival (s), scale factor.
- Run time = total steps / steps-per-second of the job type alone on one V100, which is how Gavel's
  trace generator turned durations into steps (``throughputs['v100'][job_type]['null']``). The table
  ships in ``services/simulator/data/gavel_v100_throughputs.json``. Multi-GPU jobs keep that run time
  (the generator scaled steps with the gang's throughput; we treat the gang as one unit).
- Scale factor = GPUs of the gang. Arrival times of every VC file start at 0; VCs are merged.
- Cluster: the 500 V100s of Gavel's ``cluster_specs.json`` as 125 nodes x 4 GPUs; one queue
  ``vc-<file stem>`` per VC in cohort ``gavel``, nominal quota proportional to the VC's GPU-seconds
  of demand (rounded down), borrowing unlimited. Jobs are checkpointable (Gavel preempts every round).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from schemas.config import (
    ClusterConfig,
    CohortConfig,
    MusterConfig,
    NodeGroupConfig,
    QueueConfig,
    ResourceQuotaConfig,
)
from services.core.model import gpu_resource
from services.simulator.traces.common import Trace, proportional_quotas, require_file
from services.simulator.workload import Workload, WorkloadJob, sort_jobs

GPU_TYPE = "v100"
TOTAL_GPUS = 500
GPUS_PER_NODE = 4
COHORT = "gavel"


def v100_steps_per_second() -> dict[str, float]:
    """Job type -> steps per second on one V100 (Gavel's isolated oracle throughput)."""
    text = resources.files("services.simulator").joinpath("data/gavel_v100_throughputs.json").read_text("utf-8")
    table: dict[str, float] = json.loads(text)["steps_per_second"]
    return table


def read_gavel_trace(path: Path, queue: str, throughputs: dict[str, float]) -> list[WorkloadJob]:
    """One VC's jobs; raises ``ValueError`` naming the file and line on malformed rows."""
    jobs: list[WorkloadJob] = []
    for line_no, line in enumerate(require_file(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 7:
            raise ValueError(f"{path}:{line_no}: expected 7 tab-separated fields, got {len(fields)}")
        job_type = fields[0]
        if job_type not in throughputs:
            raise ValueError(f"{path}:{line_no}: no throughput known for job type {job_type!r}")
        jobs.append(
            WorkloadJob(
                job_id=f"{queue}-{line_no:05d}",
                submit_time=float(fields[5]),
                duration=int(fields[4]) / throughputs[job_type],
                num_gpus=int(fields[6]),
                queue=queue,
                checkpointable=True,
            )
        )
    return jobs


def gavel_cluster(workload: Workload) -> MusterConfig:
    demand: dict[str, float] = {}
    for j in workload.jobs:
        demand[j.queue] = demand.get(j.queue, 0.0) + j.duration * j.num_gpus
    quotas = proportional_quotas(demand, TOTAL_GPUS)
    return MusterConfig(
        clusters=[
            ClusterConfig(
                name="gavel",
                node_groups=[
                    NodeGroupConfig(
                        name="v100", count=TOTAL_GPUS // GPUS_PER_NODE, gpus_per_node=GPUS_PER_NODE, gpu_type=GPU_TYPE
                    )
                ],
            )
        ],
        cohorts=[CohortConfig(name=COHORT)],
        queues=[
            QueueConfig(
                name=q,
                cohort=COHORT,
                tenant=q,
                quotas={gpu_resource(GPU_TYPE): ResourceQuotaConfig(nominal=n)},
            )
            for q, n in sorted(quotas.items())
        ],
    )


def load_gavel(traces_dir: Path, vc: str | None = None) -> Trace:
    """All VC traces of seed 0 (or only ``vc``) on Gavel's 500-GPU cluster."""
    folder = traces_dir / "philly-gavel-msr" / "seed=0"
    paths = [folder / f"{vc}.trace"] if vc else sorted(folder.glob("*.trace"))
    if not paths:
        raise FileNotFoundError(f"no Gavel traces under {folder}")
    throughputs = v100_steps_per_second()
    jobs = [j for p in paths for j in read_gavel_trace(p, f"vc-{p.stem.lower()}", throughputs)]
    workload = Workload("gavel" if vc is None else f"gavel-{vc}", sort_jobs(jobs))
    return Trace(workload, gavel_cluster(workload))
