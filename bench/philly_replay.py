"""Philly replay: fifo, tiresias and muster on the 15 Philly VCs, in two set-ups; prints tables.

    .venv/bin/python bench/philly_replay.py --window 28d:56d --target-allocation 0.739
    .venv/bin/python bench/philly_replay.py --setup cohort --node-scale 0.25 --policy fifo --policy muster
    .venv/bin/python bench/philly_replay.py --setup partitioned --node-scale 0.2178 --window 29d:32d \
        --policy tiresias --policy muster --explain-size '>8'

Set-ups (``--setup``, default both, see services/simulator/traces/philly.py):

- ``partitioned``: static partitions, each VC only on its own nodes, no borrowing (as Philly and the
  Helios simulator ran it);
- ``cohort``: the same nodes in one pool, every VC in one cohort, idle quota borrowed and reclaimed.

Sizing: ``--node-scale S`` replays at that scale. ``--target-allocation A`` instead searches the node
scale at which the ``fifo`` baseline's GPU allocation while the jobs arrive (``gpu_allocation_arrivals``:
GPU-seconds held between the first and the last submission over the cluster's GPU-seconds in that span,
without the drain after the last arrival) is closest to A, e.g. Philly's measured mean occupancy of
0.739 (``helios/philly_node_sequence.csv``). The search starts from the scale the window's GPU demand
suggests, then narrows a bracket (a proportional step, bisection when that step leaves the bracket),
prints each probe, and stops within ``--tolerance`` or after ``--probes`` probes; the fifo run of the
chosen probe is the fifo row.

``--size-on cohort`` (the default) sizes on the cohort set-up's fifo and replays both set-ups on those
same nodes; ``--size-on each`` sizes every set-up on its own fifo. The default is the cohort because
with static partitions fifo's allocation levels off below Philly's 0.739 as the cluster shrinks (on days
28-56: 0.51 at 808 GPUs, 0.57 at 616, 0.62 at 520, 0.63 at 480, while its average JCT grows from 16 h to
7 days): each VC's blocked head keeps its own nodes idle and no other VC may use them, so "fifo at
Philly's occupancy" does not exist there. The partitioned row then shows what static partitions strand
on the same hardware.

``--explain-size '>8'`` breaks the queueing of the jobs of that size down by the reason the core gave each
cycle (quota, capacity, behind another job's reservation, its own reservation, waiting for victims to stop
or for their minimum runtime, queued behind jobs ahead in order, or too far back in its queue for the core
to report on it), with the GPUs of later jobs of its queue that started meanwhile (``wait_breakdown`` in
the JSON; it computes statuses, 100 per queue unless ``--status-depth`` says otherwise).

Runtime estimates come only from jobs completed earlier in the same replay. All runs are in this process
on the same workload, so compare policies within one run, not absolute wall times across runs.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schemas.config import MusterConfig
from services.simulator.engine import SimOptions, simulate
from services.simulator.policies import POLICIES, policy_config
from services.simulator.report import SIZE_CLASSES, build_report
from services.simulator.sources import parse_duration, parse_size_range, parse_window
from services.simulator.traces.common import default_traces_dir
from services.simulator.traces.philly import SETUPS, load_philly, with_burst
from services.simulator.workload import Workload, subset

DEFAULT_POLICIES = ("fifo", "tiresias", "muster")
ALLOCATION_KEY = "gpu_allocation_arrivals"


def cluster_gpus(cluster: MusterConfig) -> int:
    return sum(g.count * g.gpus_per_node for c in cluster.clusters for g in c.node_groups)


def _s(value: float) -> str:
    return f"{value:,.0f}"


def overall_table(reports: list[dict[str, Any]]) -> list[str]:
    """Markdown rows: one per policy, JCT and queueing in seconds."""
    lines = [
        "| policy | completed | avg JCT s | p50 JCT s | p99 JCT s | avg queueing s | p50 queueing s | p99 queueing s "
        "| GPU alloc. (arrivals) | GPU alloc. (makespan) | preemptions | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        lines.append(
            f"| {r['policy']} | {r['jobs_completed']:,}/{r['jobs']:,} | {_s(r['avg_jct_s'])} | {_s(r['p50_jct_s'])} "
            f"| {_s(r['p99_jct_s'])} | {_s(r['avg_queue_s'])} | {_s(r['p50_queue_s'])} | {_s(r['p99_queue_s'])} "
            f"| {r[ALLOCATION_KEY]:.3f} | {r['gpu_allocation']:.3f} | {r['preemptions']:,} | {r['wall_s']:.0f} |"
        )
    return lines


def class_table(reports: list[dict[str, Any]]) -> list[str]:
    """Markdown rows: one per size class and policy."""
    lines = [
        "| GPUs | jobs | policy | avg JCT s | p50 JCT s | p99 JCT s "
        "| avg queueing s | p50 queueing s | p99 queueing s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, _, _ in SIZE_CLASSES:
        for r in reports:
            c = r["per_size_class"].get(name)
            if c is None:
                continue
            lines.append(
                f"| {name} | {c['jobs']:,} | {r['policy']} | {_s(c['avg_jct_s'])} | {_s(c['p50_jct_s'])} "
                f"| {_s(c['p99_jct_s'])} | {_s(c['avg_queue_s'])} | {_s(c['p50_queue_s'])} | {_s(c['p99_queue_s'])} |"
            )
    return lines


def demand_scale(workload: Workload, full_gpus: int, target: float) -> float:
    """The node scale at which the window's average GPU demand is ``target`` of the cluster."""
    if not workload.jobs:
        return 1.0
    span = max(j.submit_time for j in workload.jobs) - min(j.submit_time for j in workload.jobs)
    demand = sum(j.duration * j.num_gpus for j in workload.jobs) / max(span, 1.0)
    return max(0.01, demand / (target * full_gpus))


def find_scale(
    probe: Callable[[float], float],
    start: float,
    target: float,
    *,
    tolerance: float,
    probes: int,
) -> tuple[float, list[tuple[float, float]]]:
    """The scale whose measured allocation is closest to ``target``; allocation falls as scale grows.

    ``probe(scale)`` returns the allocation. Keeps a bracket (lo: allocation above target, hi: below),
    steps proportionally (scale x allocation / target) and bisects when the step leaves the bracket.
    Returns the best scale and every (scale, allocation) probed, in order.
    """
    seen: list[tuple[float, float]] = []
    lo, hi = 0.0, float("inf")
    scale = start
    for _ in range(probes):
        alloc = probe(scale)
        seen.append((scale, alloc))
        if abs(alloc - target) <= tolerance:
            break
        if alloc > target:
            lo = max(lo, scale)
        else:
            hi = min(hi, scale)
        step = scale * alloc / target if alloc > 0 else scale / 2
        if not lo < step < hi or abs(step - scale) < 1e-3:
            step = (lo + hi) / 2 if hi < float("inf") else max(lo * 1.5, step)
        if any(abs(step - s) < 1e-3 for s, _ in seen):
            break
        scale = round(step, 4)
    best = min(seen, key=lambda p: abs(p[1] - target))
    return best[0], seen


def _workload(args: argparse.Namespace, setup: str) -> tuple[Workload, MusterConfig]:
    """The replayed jobs and the full-size cluster of ``setup``."""
    full = load_philly(args.traces_dir or default_traces_dir(), setup=setup)
    window = parse_window(args.window) if args.window else None
    return subset(full.workload, window=window, limit=args.limit, sample=args.sample, seed=args.seed), full.cluster


def _cluster_at(args: argparse.Namespace, setup: str, scale: float) -> MusterConfig:
    cluster = load_philly(args.traces_dir or default_traces_dir(), node_scale=scale, setup=setup).cluster
    if args.burst_nodes:
        cluster = with_burst(cluster, args.burst_nodes, parse_duration(args.burst_delay), args.burst_price,
                             args.burst_gpu_hours)
    return cluster


Sized = tuple[float, list[dict[str, Any]], dict[str, Any]]  # scale, probes, fifo report at that scale


def size_setup(args: argparse.Namespace, setup: str, options: SimOptions) -> Sized:
    """Search the node scale at which fifo's allocation in ``setup`` is closest to the target.

    Returns the scale, every probe, and the fifo report at the chosen scale."""
    workload, full = _workload(args, setup)
    start = args.start_scale or demand_scale(workload, cluster_gpus(full), args.target_allocation)
    print(f"[{setup}] sizing: fifo {ALLOCATION_KEY} -> {args.target_allocation} (start at scale {start:.3f})")
    fifo_runs: dict[float, dict[str, Any]] = {}
    by_nodes: dict[tuple[tuple[str, int], ...], dict[str, Any]] = {}  # scales that round to the same nodes
    probes: list[dict[str, Any]] = []

    def probe(scale: float) -> float:
        cluster = _cluster_at(args, setup, scale)
        nodes = tuple((g.name, g.count) for c in cluster.clusters for g in c.node_groups)
        if nodes not in by_nodes:
            by_nodes[nodes] = build_report(
                simulate(workload, cluster, policy_config("fifo"), options=options, policy_name="fifo")
            )
        report = fifo_runs[scale] = by_nodes[nodes]
        gpus = cluster_gpus(cluster)
        probes.append(
            {
                "node_scale": scale,
                "gpus": gpus,
                ALLOCATION_KEY: report[ALLOCATION_KEY],
                "gpu_allocation": report["gpu_allocation"],
                "avg_jct_s": report["avg_jct_s"],
                "wall_s": report["wall_s"],
            }
        )
        print(
            f"  probe scale {scale:.4f}: {gpus:,} GPUs, fifo allocation {report[ALLOCATION_KEY]:.3f} while arriving"
            f" ({report['gpu_allocation']:.3f} over the makespan), avg JCT {report['avg_jct_s']:,.0f} s,"
            f" {report['wall_s']:.0f} s wall",
            flush=True,
        )
        return float(report[ALLOCATION_KEY])

    scale, _ = find_scale(probe, round(start, 4), args.target_allocation, tolerance=args.tolerance, probes=args.probes)
    print(f"[{setup}] sized: node scale {scale}", flush=True)
    return scale, probes, fifo_runs[scale]


def breakdown_table(reports: list[dict[str, Any]]) -> list[str]:
    """Markdown rows: the explained jobs' average queueing by the core's reason, per size class and policy."""
    lines: list[str] = []
    for r in reports:
        for name, c in r.get("wait_breakdown", {}).items():
            if not lines:
                lines = ["| GPUs | policy | jobs | avg queueing s | reason | avg s per job | share |",
                         "|---|---|---|---|---|---|---|"]
            lines.append(f"| {name} | {r['policy']} | {c['jobs']:,} | {_s(c['avg_queue_s'])} | | | |")
            for reason, seconds in c["by_reason_s"].items():
                lines.append(f"| | | | | {reason} | {_s(seconds)} | {c['by_reason_share'][reason]:.0%} |")
            lines.append(f"| | | | | (waited again after preemption) | {_s(c['avg_requeued_wait_s'])} | |")
            for reason, seconds in c["requeued_by_reason_s"].items():
                lines.append(f"| | | | | after preemption: {reason} | {_s(seconds)} | |")
            lines.append(f"| | | | | (GPUs of later jobs of its queue started meanwhile) "
                         f"| {c['avg_overtaken_gpus']:,.0f} | |")
    return lines


def replay_setup(
    args: argparse.Namespace,
    setup: str,
    scale: float,
    options: SimOptions,
    fifo_report: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Replay every policy in ``setup`` at ``scale``; prints the tables. ``fifo_report``: reuse this fifo run."""
    workload, _ = _workload(args, setup)
    cluster = _cluster_at(args, setup, scale)
    gpus = cluster_gpus(cluster)
    print(
        f"[{setup}] {len(workload.jobs):,} jobs, {len(cluster.queues)} VC queues, {gpus:,} GPUs at node scale {scale}",
        flush=True,
    )
    policies = args.policy or list(DEFAULT_POLICIES)
    reports = []
    profile_text = ""
    for i, name in enumerate(policies):
        if name == "fifo" and fifo_report is not None:
            reports.append(fifo_report)
            print(f"  fifo: the sizing probe's run ({fifo_report['wall_s']:.1f}s)", flush=True)
            continue
        profiler = cProfile.Profile() if args.profile and i == len(policies) - 1 else None
        if profiler:
            profiler.enable()
        result = simulate(workload, cluster, policy_config(name), options=options, policy_name=name)
        if profiler:
            profiler.disable()
            buf = io.StringIO()
            pstats.Stats(profiler, stream=buf).sort_stats("cumulative").print_stats(25)
            profile_text = buf.getvalue()
        reports.append(build_report(result))
        print(f"  ran {name} in {result.wall_s:.1f}s ({result.cycle_wall_s:.1f}s inside schedule())", flush=True)
    print(f"\n### {setup}: node scale {scale}, {gpus:,} GPUs, {len(workload.jobs):,} jobs\n")
    print("\n".join(overall_table(reports)))
    print()
    print("\n".join(class_table(reports)))
    print()
    for r in reports:
        b = r.get("bought")
        if b:
            print(f"{r['policy']}: bought {b['nodes']:,} nodes for {b['requests']:,} jobs, "
                  f"{b['gpu_hours']:,.0f} GPU-hours, {b['money']:,.0f} spent")
    explained = breakdown_table(reports)
    if explained:
        print("\n".join(explained))
        print()
    if profile_text:
        print("profile of the last run (cumulative):")
        print(profile_text)
    return {"node_scale": scale, "gpus": gpus, "jobs": len(workload.jobs), "runs": {r["policy"]: r for r in reports}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces-dir", type=Path, default=None, help="folder with philly-pollux/ and helios/")
    parser.add_argument("--setup", choices=[*SETUPS, "both"], default="both", help="default: both")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--node-scale", type=float, default=1.0, help="multiply every VC's nodes (default 1)")
    size.add_argument(
        "--target-allocation",
        type=float,
        help="size each set-up so fifo's GPU allocation while jobs arrive is this (e.g. 0.739)",
    )
    parser.add_argument(
        "--size-on",
        choices=[*SETUPS, "each"],
        default="cohort",
        help="sizing: search the scale on this set-up's fifo and replay every set-up at it, or size each set-up "
        "on its own fifo (default cohort)",
    )
    parser.add_argument("--tolerance", type=float, default=0.01, help="sizing: stop within this (default 0.01)")
    parser.add_argument("--probes", type=int, default=6, help="sizing: at most this many fifo runs (default 6)")
    parser.add_argument("--start-scale", type=float, help="sizing: first probe (default: from the window's demand)")
    parser.add_argument("--window", help="START:END after the first arrival, e.g. 14d:42d (default: whole trace)")
    parser.add_argument("--limit", type=int, help="only the first N jobs")
    parser.add_argument("--sample", type=float, help="keep each job with this probability (seeded)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES), help="default: fifo, tiresias, muster")
    parser.add_argument("--tick", default="60", help="cycle period while jobs are pending (default 60 s)")
    parser.add_argument(
        "--status-depth",
        type=int,
        default=None,
        help="pending-status depth per queue the core computes each cycle (default 0, or 100 with --explain-size: "
        "status only, no effect on decisions; the core's default 100 is much slower on long replays)",
    )
    parser.add_argument(
        "--explain-size",
        metavar="SIZE",
        help="break the queueing of the jobs of this size (N, A-B, >N or N+ GPUs) down by the reason the core "
        "gave each cycle (e.g. '>8')",
    )
    parser.add_argument("--burst-nodes", type=int, default=0,
                        help="partitioned: each VC may have up to this many 8-GPU cloud nodes bought (default 0)")
    parser.add_argument("--burst-delay", default="10m", help="their provisioning delay (default 10m)")
    parser.add_argument("--burst-price", type=float, default=2.0, help="price per GPU-hour (default 2.0)")
    parser.add_argument("--burst-gpu-hours", type=float, default=2000.0,
                        help="each VC's burst budget in GPU-hours a month (default 2000)")
    parser.add_argument("--json", type=Path, help="also write the full reports here")
    parser.add_argument("--profile", action="store_true", help="profile the last policy and print the top functions")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    setups = list(SETUPS) if args.setup == "both" else [args.setup]
    setups.sort(key=lambda s: s != "partitioned")  # partitioned first: the set-up Philly ran
    explain = parse_size_range(args.explain_size) if args.explain_size else None
    if args.status_depth is None:
        args.status_depth = 100 if explain is not None else 0  # the reasons are the statuses the core computes
    options = SimOptions(tick_s=parse_duration(args.tick), status_depth=args.status_depth, explain_gpus=explain)
    sizing = (
        f"target fifo allocation {args.target_allocation}"
        if args.target_allocation is not None
        else f"node scale {args.node_scale}"
    )
    print(
        f"Philly replay: set-ups {', '.join(setups)}; window={args.window or 'all'} limit={args.limit or 'none'} "
        f"sample={args.sample or 'none'} status_depth={args.status_depth}; {sizing}",
        flush=True,
    )
    out: dict[str, Any] = {
        "window": args.window,
        "limit": args.limit,
        "sample": args.sample,
        "target_allocation": args.target_allocation,
        "allocation_measure": ALLOCATION_KEY,
        "size_on": args.size_on if args.target_allocation is not None else None,
        "setups": {},
    }
    sized: dict[str, Sized] = {}
    if args.target_allocation is not None:
        for setup in setups if args.size_on == "each" else [args.size_on]:
            sized[setup] = size_setup(args, setup, options)
    for setup in setups:
        probes: list[dict[str, Any]]
        fifo: dict[str, Any] | None
        if args.target_allocation is None:
            scale, probes, fifo = args.node_scale, [], None
        elif setup in sized:
            scale, probes, fifo = sized[setup]
        else:  # replayed at the scale found for the set-up it was sized on
            scale, probes, fifo = sized[args.size_on][0], [], None
        out["setups"][setup] = replay_setup(args, setup, scale, options, fifo) | {
            "probes": probes,
            "sized_on": setup if setup in sized else (args.size_on if sized else None),
        }
    print(f"total wall {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
