"""How far ordering alone can go on the Pollux workloads: an oracle reference for fixed-size scheduling.

    .venv/bin/python bench/pollux_oracle.py [--traces-dir ../shared/traces] [--restart-cost 30] [--round 60]

Replays every ``pollux-derived/workload-N.csv`` with a scheduler no real one can be: it knows every
job's true duration, ranks jobs by least remaining GPU-time (remaining duration x GPUs, the order that
average completion time rewards), takes the whole ranked list every round, preempts any running job
that falls outside it at no cost but the restart, and packs GPUs as one pool (a 48-GPU gang fits
whenever 48 GPUs are free, whichever nodes they are on). Jobs keep the GPU count they asked for. The
round (60 s) and the restart cost (30 s of held GPUs without progress) are the published figures'
setting, as in ``bench/pollux_replay.py``; Tiresias is replayed by the real core in the same run, so
the ratio printed is to the same Tiresias that ``pollux_replay`` compares Muster with.

This is a reference, not a proof: a cleverer oracle could do a little better, and real placement on
4-GPU nodes only does worse. What it shows is the order of magnitude that is left to any scheduler
that does not change how many GPUs a job runs on (Pollux does, and its published figures reflect it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from services.simulator.engine import SimOptions, simulate
from services.simulator.policies import policy_config
from services.simulator.report import build_report
from services.simulator.traces.common import default_traces_dir
from services.simulator.workload import Workload, read_workload_csv
from services.spec.cluster_file import load_cluster_file

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "sim" / "cluster-pollux.yaml"
GPUS = 64  # 16 nodes x 4 GPUs


@dataclass
class _Job:
    submit: float
    gpus: int
    left: float  # seconds of progress still needed at its GPU count
    warm: float = 0.0  # restart time still to sit through before progress
    running: bool = False
    end: float | None = None


def oracle_average_jct(workload: Workload, *, gpus: int, round_s: float, restart_s: float) -> float:
    """Average JCT of the oracle described in the module's docstring."""
    jobs = [_Job(j.submit_time, j.num_gpus, j.duration) for j in workload.jobs]
    now = 0.0
    left = len(jobs)
    while left:
        active = sorted(
            (j for j in jobs if j.submit <= now and j.end is None), key=lambda j: (j.left * j.gpus, j.submit)
        )
        free = gpus
        for job in active:
            chosen = job.gpus <= free
            if chosen:
                free -= job.gpus
                if not job.running:
                    job.running, job.warm = True, restart_s
            else:
                job.running = False
        for job in active:
            if not job.running:
                continue
            step = round_s
            waited = min(job.warm, step)
            job.warm -= waited
            step -= waited
            if step >= job.left:
                job.end = now + round_s - (step - job.left)
                job.running = False
                left -= 1
            else:
                job.left -= step
        now += round_s
    return statistics.mean(j.end - j.submit for j in jobs if j.end is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces-dir", type=Path, default=None, help="folder holding pollux-derived/")
    parser.add_argument("--round", type=float, default=60.0, help="seconds between decisions (default 60)")
    parser.add_argument("--restart-cost", type=float, default=30.0, help="seconds a (re)start holds GPUs idle")
    args = parser.parse_args(argv)
    folder = (args.traces_dir or default_traces_dir()) / "pollux-derived"
    files = sorted(folder.glob("workload-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
    if not files:
        raise SystemExit(f"no workload-N.csv in {folder}")
    cluster = load_cluster_file(CLUSTER)
    options = SimOptions(round_s=args.round, restart_cost_s=args.restart_cost, all_checkpointable=True)
    rows: dict[str, list[float]] = {
        "tiresias (core)": [],
        "muster (core, told true durations)": [],
        "oracle, fixed GPU counts": [],
    }
    for path in files:
        workload = read_workload_csv(path)
        told = replace(workload, jobs=tuple(replace(j, runtime_estimate=j.duration) for j in workload.jobs))
        for name, policy, load in (
            ("tiresias (core)", "tiresias", workload),
            ("muster (core, told true durations)", "muster", told),
        ):
            report = build_report(simulate(load, cluster, policy_config(policy), options=options))
            rows[name].append(report["avg_jct_s"])
        rows["oracle, fixed GPU counts"].append(
            oracle_average_jct(workload, gpus=GPUS, round_s=args.round, restart_s=args.restart_cost)
        )
    print(f"average JCT (s); {GPUS} GPUs, {args.round:g} s rounds, {args.restart_cost:g} s restarts")
    print(f"{'':36}" + "".join(f"{path.stem.replace('workload-', 'w'):>9}" for path in files) + f"{'mean':>9}")
    for name, row in rows.items():
        print(f"{name:36}" + "".join(f"{v:9.0f}" for v in row) + f"{statistics.mean(row):9.0f}")
    base = statistics.mean(rows["tiresias (core)"])
    for name, row in rows.items():
        if name != "tiresias (core)":
            print(f"{name} / tiresias (mean of the workloads): {statistics.mean(row) / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
