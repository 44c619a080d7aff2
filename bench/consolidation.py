"""Consolidation on a fragmented workload: muster with and without moving small jobs for whole-node gangs.

    .venv/bin/python bench/consolidation.py [--seed 1] [--hours 48] [--write-workload FILE]

The workload is made here from a seed (so the figures can be reproduced and the seed varied): on
``examples/sim/cluster-fragmented.yaml`` (8 nodes x 8 GPUs, one queue), small checkpointable jobs
(1, 2 or 4 GPUs, log-uniform 10 min to 8 h) arrive at about 90% of the cluster's GPU-time, and an
8-GPU gang that needs a whole node (one pod of 8, 4 h, checkpointable) every 2 hours. Small jobs
scatter over the nodes as they come and go, so free GPUs are often there in total but on no single
node. Both runs replay the same jobs; each job's name is its kind, so runtimes are learnt per kind.
The simulator charges every (re)start 60 s of held GPUs without progress and every stop a 30 s
checkpoint, so a move is not free.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from services.simulator.engine import SimOptions, simulate
from services.simulator.policies import policy_config
from services.simulator.report import build_report
from services.simulator.workload import Workload, WorkloadJob, write_workload_csv
from services.spec.cluster_file import load_cluster_file

CLUSTER = Path(__file__).resolve().parent.parent / "examples" / "sim" / "cluster-fragmented.yaml"
GPUS = 64
LOAD = 0.9
GANG_EVERY_S = 2 * 3600.0
GANG_S = 4 * 3600.0
OPTIONS = SimOptions(restart_cost_s=60.0, checkpoint_s=30.0)
POLICIES = ("muster", "muster-no-consolidation")


def make_workload(seed: int, hours: float) -> Workload:
    """Small jobs at ``LOAD`` of the cluster (gangs included) plus an 8-GPU gang every two hours."""
    rng = random.Random(seed)
    span = hours * 3600.0
    jobs: list[WorkloadJob] = []
    gang_share = 8 * GANG_S / GANG_EVERY_S  # GPUs the gangs keep busy on average
    small_gpus = LOAD * GPUS - gang_share
    sizes = (1, 2, 4)
    mean_gpu_s = statistics.mean(sizes) * (8 * 3600 - 600) / math.log(8 * 3600 / 600)  # log-uniform mean
    rate = small_gpus / mean_gpu_s  # small arrivals per second
    t = 0.0
    n = 0
    while True:
        t += rng.expovariate(rate)
        if t >= span:
            break
        gpus = rng.choice(sizes)
        duration = round(math.exp(rng.uniform(math.log(600), math.log(8 * 3600))))
        jobs.append(WorkloadJob(f"small{gpus}-{n}", round(t, 1), duration, gpus, "research", checkpointable=True))
        n += 1
    for k in range(int(span // GANG_EVERY_S)):
        jobs.append(WorkloadJob(f"gang-{k}", k * GANG_EVERY_S + 1800.0, GANG_S, 8, "research", checkpointable=True))
    jobs.sort(key=lambda j: (j.submit_time, j.job_id))
    return Workload(f"fragmented-seed{seed}", tuple(jobs))


def _row(name: str, report: dict[str, Any], result_records: Any) -> dict[str, Any]:
    gangs = [r for r in result_records.values() if r.spec.job_id.startswith("gang-") and r.first_start is not None]
    small = [r for r in result_records.values() if r.spec.job_id.startswith("small") and r.end is not None]
    waits = sorted(r.first_start - r.spec.submit_time for r in gangs)
    return {
        "policy": name,
        "gang_wait_avg_s": statistics.mean(waits) if waits else float("nan"),
        "gang_wait_max_s": waits[-1] if waits else float("nan"),
        "gangs_started": len(gangs),
        "small_jct_avg_s": statistics.mean(r.end - r.spec.submit_time for r in small) if small else float("nan"),
        "gpu_allocation": report["gpu_allocation_arrivals"],
        "preemptions": report["preemptions"],
        "avg_jct_s": report["avg_jct_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hours", type=float, default=48.0, help="span of the arrivals (default 48)")
    parser.add_argument("--write-workload", type=Path, help="also write the generated workload as CSV")
    args = parser.parse_args(argv)
    workload = make_workload(args.seed, args.hours)
    if args.write_workload:
        write_workload_csv(workload, args.write_workload)
    cluster = load_cluster_file(CLUSTER)
    gangs = sum(j.job_id.startswith("gang-") for j in workload.jobs)
    print(f"{workload.name}: {len(workload.jobs):,} jobs ({gangs} 8-GPU gangs) over {args.hours:g} h on {GPUS} GPUs")
    rows = []
    for name in POLICIES:
        result = simulate(workload, cluster, policy_config(name), options=OPTIONS, policy_name=name)
        rows.append(_row(name, build_report(result), result.records))
    print(
        f"{'policy':26}{'gang wait avg':>14}{'gang wait max':>14}{'small JCT avg':>14}{'GPU alloc.':>11}"
        f"{'preempt.':>9}{'avg JCT':>9}"
    )
    for r in rows:
        print(
            f"{r['policy']:26}{r['gang_wait_avg_s']:14,.0f}{r['gang_wait_max_s']:14,.0f}{r['small_jct_avg_s']:14,.0f}"
            f"{r['gpu_allocation']:11.3f}{r['preemptions']:9,}{r['avg_jct_s']:9,.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
