"""How far ordering alone can go on the Pollux workloads: an oracle reference for fixed-size scheduling.

    .venv/bin/python bench/pollux_oracle.py [--traces-dir ../shared/traces] [--restart-cost 30] [--round 60]
        [--rank gpu-time|time|sqrt] [--keep-running 1.0]

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

A second oracle lets every job run on fewer GPUs than it asked for (never more), at a speed linear in
them, paying the restart whenever its GPU count changes: the setting of ``bench/pollux_replay.py
--elastic``. Muster's core is run in that setting too, with learnt and with true runtimes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
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


RANKS: dict[str, Callable[[_Job], float]] = {  # what the oracle ranks by (least first)
    "gpu-time": lambda j: j.left * j.gpus,
    "time": lambda j: j.left,
    "sqrt": lambda j: j.left * j.gpus**0.5,
}


def oracle_average_jct(
    workload: Workload, *, gpus: int, round_s: float, restart_s: float, rank: str = "gpu-time", keep: float = 1.0
) -> float:
    """Average JCT of the oracle described in the module's docstring; ``keep`` below 1 lets a running job
    stay unless a waiting one ranks better by that factor."""
    by = RANKS[rank]
    jobs = [_Job(j.submit_time, j.num_gpus, j.duration) for j in workload.jobs]
    now = 0.0
    left = len(jobs)
    while left:
        active = sorted(
            (j for j in jobs if j.submit <= now and j.end is None),
            key=lambda j: (by(j) * (keep if j.running else 1.0), j.submit),
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


def elastic_oracle_average_jct(workload: Workload, *, gpus: int, round_s: float, restart_s: float) -> float:
    """The same oracle for elastic jobs: each round, down the ranked list, every job gets as many GPUs as
    are left, up to the GPUs it asked for (at least one), at a speed linear in them (what
    ``SimOptions.all_elastic`` assumes); a job whose GPU count changes pays the restart again."""
    jobs = [_Job(j.submit_time, j.num_gpus, j.duration * j.num_gpus) for j in workload.jobs]  # left: GPU-s
    held = [0] * len(jobs)
    now = 0.0
    left = len(jobs)
    while left:
        active = sorted(
            (i for i, j in enumerate(jobs) if j.submit <= now and j.end is None),
            key=lambda i: (jobs[i].left, jobs[i].submit),
        )
        free = gpus
        for i in active:
            job = jobs[i]
            take = min(job.gpus, free)
            free -= take
            if take and take != held[i]:
                job.warm = restart_s
            held[i] = take
        for i in active:
            job = jobs[i]
            if not held[i]:
                continue
            step = round_s
            waited = min(job.warm, step)
            job.warm -= waited
            step -= waited
            if step * held[i] >= job.left:
                job.end = now + round_s - (step - job.left / held[i])
                held[i] = 0
                left -= 1
            else:
                job.left -= step * held[i]
        now += round_s
    return statistics.mean(j.end - j.submit for j in jobs if j.end is not None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces-dir", type=Path, default=None, help="folder holding pollux-derived/")
    parser.add_argument("--round", type=float, default=60.0, help="seconds between decisions (default 60)")
    parser.add_argument("--restart-cost", type=float, default=30.0, help="seconds a (re)start holds GPUs idle")
    parser.add_argument("--rank", choices=sorted(RANKS), default="gpu-time",
                        help="what the fixed-size oracle ranks by: remaining GPU-time (default), remaining "
                        "time, or remaining time x sqrt(GPUs)")
    parser.add_argument("--keep-running", type=float, default=1.0,
                        help="a running job stays unless a waiting one ranks better by this factor (default 1)")
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
        "muster (core, every job elastic)": [],
        "muster (core, elastic, told)": [],
        "oracle, elastic (linear below size)": [],
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
            oracle_average_jct(workload, gpus=GPUS, round_s=args.round, restart_s=args.restart_cost,
                               rank=args.rank, keep=args.keep_running)
        )
        elastic = replace(options, all_elastic=True)
        for name, load in (("muster (core, every job elastic)", workload), ("muster (core, elastic, told)", told)):
            report = build_report(simulate(load, cluster, policy_config("muster"), options=elastic))
            rows[name].append(report["avg_jct_s"])
        rows["oracle, elastic (linear below size)"].append(
            elastic_oracle_average_jct(workload, gpus=GPUS, round_s=args.round, restart_s=args.restart_cost)
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
