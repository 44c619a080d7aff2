"""Pollux workloads: muster against Tiresias (2D-LAS) and FIFO, next to the published figures.

    .venv/bin/python bench/pollux_replay.py [--traces-dir DIR] [--policy NAME ...] [--json FILE] [--elastic]

Every ``pollux-derived/workload-N.csv`` found is replayed on ``examples/sim/cluster-pollux.yaml``
(16 nodes x 4 GPUs) in the setting the published figures use: decisions every 60 s, every (re)start
holds its GPUs 30 s without progress, a preempted job keeps its progress. No policy sees a job's true
duration: muster learns runtimes from the jobs that finished before (a job's id is its name).
``--elastic`` lets every multi-pod job run on as few as one pod, at a speed linear in its GPUs, and
charges a restart for every resize (``SimOptions.all_elastic``).
Tiresias is replayed here too, so the ratio to read is muster / tiresias of the same run; the
published averages are printed beside them for reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from services.simulator.engine import SimOptions, simulate
from services.simulator.policies import POLICIES, policy_config
from services.simulator.report import build_report
from services.simulator.traces.common import default_traces_dir
from services.simulator.workload import read_workload_csv
from services.spec.cluster_file import load_cluster_file

CLUSTER = Path(__file__).resolve().parent.parent / "examples" / "sim" / "cluster-pollux.yaml"
OPTIONS = SimOptions(round_s=60.0, restart_cost_s=30.0, all_checkpointable=True)
#: average JCT (s) published with the Pollux artifact (results-jobload/*-1.0.summary.json)
PUBLISHED: dict[str, dict[int, float]] = {
    "tiresias (published)": {1: 2473.65, 2: 5144.96, 3: 3876.26, 4: 3280.26},
    "optimus (published)": {1: 4087.06, 2: 6913.88, 3: 3944.01, 4: 5967.75},
    "pollux (published)": {1: 2088.8, 2: 3322.9, 3: 2188.5, 4: 2721.0},
}
DEFAULT_POLICIES = ("fifo", "tiresias", "muster")


def workloads(traces: Path) -> dict[int, Path]:
    folder = traces / "pollux-derived"
    found = {int(p.stem.split("-")[1]): p for p in folder.glob("workload-*.csv")}
    if not found:
        raise SystemExit(f"no workload-N.csv in {folder}")
    return dict(sorted(found.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces-dir", type=Path, default=None, help="folder holding pollux-derived/")
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES), help="default: fifo, tiresias, muster")
    parser.add_argument("--json", type=Path, help="also write every report here")
    parser.add_argument("--elastic", action="store_true",
                        help="every multi-pod job elastic down to one pod (Pollux resizes every job)")
    args = parser.parse_args(argv)
    options = replace(OPTIONS, all_elastic=True) if args.elastic else OPTIONS
    files = workloads(args.traces_dir or default_traces_dir())
    cluster = load_cluster_file(CLUSTER)
    policies = args.policy or list(DEFAULT_POLICIES)
    table: dict[str, dict[int, float]] = {}
    reports: dict[str, dict[int, Any]] = {}
    for name in policies:
        for n, path in files.items():
            report = build_report(simulate(read_workload_csv(path), cluster, policy_config(name), options=options))
            table.setdefault(name, {})[n] = report["avg_jct_s"]
            reports.setdefault(name, {})[n] = report
        print(f"  ran {name}", file=sys.stderr, flush=True)
    numbers = list(files)
    setting = ", every job elastic" if args.elastic else ""
    print(f"average JCT (s) per workload; {len(numbers)} workloads, 16x4 GPUs, 60 s rounds, 30 s restarts{setting}")
    print(f"{'policy':34}" + "".join(f"{'w' + str(n):>9}" for n in numbers) + f"{'mean':>9}")
    rows = {**table, **{k: v for k, v in PUBLISHED.items() if all(n in v for n in numbers)}}
    for name, by_n in rows.items():
        mean = statistics.mean(by_n[n] for n in numbers)
        print(f"{name:34}" + "".join(f"{by_n[n]:9.0f}" for n in numbers) + f"{mean:9.0f}")
    if "tiresias" in table:
        base = statistics.mean(table["tiresias"][n] for n in numbers)
        for name, by_n in table.items():
            if name != "tiresias":
                ratio = statistics.mean(by_n[n] for n in numbers) / base
                print(f"{name} / tiresias (same run, mean of the workloads): {ratio:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"workloads": numbers, "runs": reports}, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
