"""Philly replay: FIFO against Muster on all 15 VCs with per-VC quotas; prints a table.

    .venv/bin/python bench/philly_replay.py [--window 0:30d] [--limit N] [--profile]

The cluster is built from the Helios VC node counts (see services/simulator/traces/philly.py);
runtime estimates come only from jobs completed earlier in the same replay. Both policies run
in this process on the same workload, so the ratio is the number to read, not the absolute times.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from services.simulator.engine import SimOptions, simulate
from services.simulator.policies import POLICIES, policy_config
from services.simulator.report import build_report
from services.simulator.sources import parse_duration, parse_window
from services.simulator.traces.common import default_traces_dir
from services.simulator.traces.philly import load_philly
from services.simulator.workload import subset

COLUMNS: tuple[tuple[str, str], ...] = (  # (name, format spec incl. width)
    ("policy", "<22"),
    ("completed", ">13"),
    ("avg_jct_h", ">10.2f"),
    ("p99_jct_h", ">10.1f"),
    ("avg_queue_h", ">12.3f"),
    ("p99_queue_h", ">12.2f"),
    ("gpu_alloc", ">10.3f"),
    ("jain", ">6.3f"),
    ("preempt", ">8"),
    ("cycles", ">8"),
    ("wall_s", ">8.1f"),
)


def _row(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "policy": report["policy"],
        "completed": f"{report['jobs_completed']}/{report['jobs']}",
        "avg_jct_h": report["avg_jct_s"] / 3600,
        "p99_jct_h": report["p99_jct_s"] / 3600,
        "avg_queue_h": report["avg_queue_s"] / 3600,
        "p99_queue_h": report["p99_queue_s"] / 3600,
        "gpu_alloc": report["gpu_allocation"],
        "jain": report["jain_fairness"],
        "preempt": report["preemptions"],
        "cycles": report["cycles"],
        "wall_s": report["wall_s"],
    }


def _print_table(reports: list[dict[str, Any]]) -> None:
    print(" ".join(f"{name:{spec.split('.')[0]}}" for name, spec in COLUMNS))
    for report in reports:
        row = _row(report)
        print(" ".join(f"{row[name]:{spec}}" for name, spec in COLUMNS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces-dir", type=Path, default=None, help="folder with philly-pollux/ and helios/")
    parser.add_argument("--node-scale", type=float, default=1.0, help="multiply every VC's nodes (default 1)")
    parser.add_argument("--window", help="START:END after the first arrival, e.g. 0:30d (default: whole trace)")
    parser.add_argument("--limit", type=int, help="only the first N jobs")
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES), help="default: fifo and muster")
    parser.add_argument("--tick", default="60", help="cycle period while jobs are pending (default 60 s)")
    parser.add_argument(
        "--status-depth",
        type=int,
        default=0,
        help="pending-status depth per queue the core computes each cycle (default 0: status only, no effect "
        "on decisions here; the core's default 100 is much slower on long replays)",
    )
    parser.add_argument("--json", type=Path, help="also write the full reports here")
    parser.add_argument("--profile", action="store_true", help="profile the last policy and print the top functions")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    trace = load_philly(args.traces_dir or default_traces_dir(), node_scale=args.node_scale)
    workload = subset(trace.workload, window=parse_window(args.window) if args.window else None, limit=args.limit)
    load_s = time.perf_counter() - started
    capacity = sum(g.count * g.gpus_per_node for c in trace.cluster.clusters for g in c.node_groups)
    print(
        f"Philly replay: {len(workload.jobs)} jobs, {len(trace.cluster.queues)} VC queues, "
        f"{capacity} GPUs (node scale {args.node_scale}); window={args.window or 'all'} "
        f"limit={args.limit or 'none'} status_depth={args.status_depth}; loaded in {load_s:.1f}s"
    )
    options = SimOptions(tick_s=parse_duration(args.tick), status_depth=args.status_depth)
    policies = args.policy or ["fifo", "muster"]
    reports = []
    profile_text = ""
    for i, name in enumerate(policies):
        profiler = cProfile.Profile() if args.profile and i == len(policies) - 1 else None
        if profiler:
            profiler.enable()
        result = simulate(workload, trace.cluster, policy_config(name), options=options, policy_name=name)
        if profiler:
            profiler.disable()
            buf = io.StringIO()
            pstats.Stats(profiler, stream=buf).sort_stats("cumulative").print_stats(25)
            profile_text = buf.getvalue()
        reports.append(build_report(result))
        print(f"  ran {name} in {result.wall_s:.1f}s ({result.cycle_wall_s:.1f}s inside schedule())", flush=True)
    print()
    _print_table(reports)
    by_name = {r["policy"]: r for r in reports}
    if "fifo" in by_name:
        base = by_name["fifo"]
        for r in reports:
            if r["policy"] == "fifo":
                continue
            jct = base["avg_jct_s"] / r["avg_jct_s"] if r["avg_jct_s"] else float("inf")
            wait = base["avg_queue_s"] / r["avg_queue_s"] if r["avg_queue_s"] else float("inf")
            print(
                f"\nfifo / {r['policy']}: average JCT {jct:.2f}x lower, average queueing delay {wait:.2f}x lower"
                f" (goal: JCT >= 2.5x)"
            )
    if args.json:
        args.json.write_text(json.dumps({"window": args.window, "limit": args.limit, "runs": by_name}, indent=2))
    if profile_text:
        print("\nprofile of the last run (cumulative):")
        print(profile_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
