"""Cost of one ``schedule()`` call as pending jobs and nodes grow (a program, not a test).

Usage: python bench/schedule_cost.py [--quick] [--profile] [--multi-role FRACTION]

For every size the cluster is first filled with running jobs (setup, timed separately), then the
pending backlog is submitted and one cycle is timed (median of a few calls; ``schedule`` does not
change the state, so repeated calls see the same input). A strict-FIFO row is the baseline.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.core import (
    CohortSpec,
    Job,
    Node,
    QueueSpec,
    ResourceQuota,
    Role,
    SchedulerConfig,
    SchedulerState,
    TopologyMode,
    TopologyRequest,
    schedule,
)

GPU_TYPES = ("a100", "h100")
QUEUES = 10
NODES_PER_RACK = 32


def build_nodes(n: int) -> list[Node]:
    nodes = []
    for i in range(n):
        gpu_type = GPU_TYPES[i % len(GPU_TYPES)]
        rack = i // NODES_PER_RACK
        topo = MappingProxyType({"zone": f"z{rack // 16}", "block": f"b{rack // 4}", "rack": f"r{rack}"})
        nodes.append(
            Node(
                name=f"n{i:05d}",
                cluster=f"c{i % 2}",
                gpu_type=gpu_type,
                gpus=8,
                cpu_m=128_000,
                memory_mb=1_024_000,
                topology=topo,
                nvlink_groups=(4, 4),
            )
        )
    return nodes


def build_queues(n_nodes: int, bound: str) -> tuple[list[QueueSpec], list[CohortSpec]]:
    """Quotas that add up to the cluster ("quota": quota is what blocks) or far above it ("capacity")."""
    per_type = n_nodes * 8 // len(GPU_TYPES)
    share = per_type // QUEUES if bound == "quota" else per_type * 4
    cohorts = [CohortSpec("research"), CohortSpec("prod")]
    queues = []
    for i in range(QUEUES):
        quotas = {f"gpu:{t}": ResourceQuota(share) for t in GPU_TYPES}
        quotas["cpu"] = ResourceQuota(n_nodes * 128_000 // QUEUES)
        quotas["memory"] = ResourceQuota(n_nodes * 1_024_000 // QUEUES)
        queues.append(
            QueueSpec(f"q{i}", cohort=cohorts[i % 2].name, weight=1.0 + i % 3, quotas=MappingProxyType(quotas))
        )
    return queues, cohorts


def make_job(rng: random.Random, i: int, submit: float) -> Job:
    gpus = rng.choice((1, 1, 2, 4, 8))
    replicas = rng.choice((1, 1, 1, 2, 4)) if gpus >= 4 else 1
    topo = TopologyRequest("rack", TopologyMode.PREFERRED) if replicas > 1 else None
    elastic = replicas > 1 and rng.random() < 0.2
    return Job(
        job_id=f"j{i:07d}",
        queue=f"q{rng.randrange(QUEUES)}",
        submit_time=submit,
        replicas=replicas,
        min_replicas=1 if elastic else None,
        gpus_per_pod=gpus,
        gpu_type=rng.choice((*GPU_TYPES, "")),
        cpu_m=4000 * gpus,
        memory_mb=32_000 * gpus,
        priority=rng.choice((0, 0, 0, 100)),
        user=f"u{rng.randrange(50)}",
        runtime_estimate=rng.choice((600.0, 3600.0, 4 * 3600.0, None)),
        topology=topo,
    )


#: the companion roles a job of several roles gets (``--multi-role``): an MPI launcher, or a Ray head with a GPU
COMPANIONS = ((Role("launcher", 1, 0, cpu_m=2000, memory_mb=8000),),
              (Role("head", 1, 1, cpu_m=4000, memory_mb=32_000, topology=TopologyRequest("rack",
                                                                                        TopologyMode.PREFERRED)),))


def with_roles(job: Job, roles_rng: random.Random, fraction: float) -> Job:
    """``job`` with companion roles, for ``fraction`` of the jobs (drawn from a generator of their own, so
    the jobs themselves are the same whatever the fraction)."""
    if fraction <= 0 or roles_rng.random() >= fraction:
        return job
    return replace(job, role="worker", companions=roles_rng.choice(COMPANIONS))


def setup(n_nodes: int, n_pending: int, bound: str, seed: int = 1,
          multi_role: float = 0.0) -> tuple[SchedulerState, float]:
    rng = random.Random(seed)
    roles_rng = random.Random(seed + 1)
    queues, cohorts = build_queues(n_nodes, bound)
    st = SchedulerState(queues=queues, cohorts=cohorts, nodes=build_nodes(n_nodes))
    fill = SchedulerConfig(max_admissions_per_cycle=10**9, backfill=False, preemption=False, elastic=False)
    counter, now = 0, 0.0
    while True:  # fill the cluster with running work
        batch = max(n_nodes * 2, 200)
        for _ in range(batch):
            st.submit(with_roles(make_job(rng, counter, now), roles_rng, multi_role))
            counter += 1
        result = schedule(st, now, fill)
        for d in result.decisions:
            st.apply(d, now)
        if sum(1 for d in result.decisions if d.kind.value == "admit") < batch // 20:
            break
        now += 1.0
    for job_id in list(st.pending):  # drop the overflow, then submit the measured backlog
        st.cancel(job_id)
    for _ in range(n_pending):
        now += 0.01
        st.submit(with_roles(make_job(rng, counter, now), roles_rng, multi_role))
        counter += 1
    return st, now + 600.0  # past min_runtime_s: preemption is in play


def time_cycle(st: SchedulerState, now: float, config: SchedulerConfig, repeat: int) -> tuple[float, float, int]:
    """(median CPU seconds, median wall seconds, decisions) of one cycle.

    CPU time is the figure to read: the machine is shared, and wall time includes waiting for a core.
    """
    cpu, wall = [], []
    decisions = 0
    for _ in range(repeat):
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        result = schedule(st, now, config)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        decisions = len(result.decisions)
    return statistics.median(cpu), statistics.median(wall), decisions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest cycle")
    parser.add_argument("--bound", choices=("quota", "capacity", "both"), default="both")
    parser.add_argument("--multi-role", type=float, default=0.0, metavar="FRACTION",
                        help="this fraction of the jobs has a companion role (a launcher or a Ray head)")
    args = parser.parse_args()
    pendings = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    node_counts = (100, 1_000) if args.quick else (100, 1_000, 10_000)
    repeat = 5
    bounds = ("quota", "capacity") if args.bound == "both" else (args.bound,)
    print(
        f"{'bound':9} {'policy':7} {'pending':>8} {'nodes':>6} {'running':>8} {'setup s':>8} "
        f"{'cpu ms':>8} {'wall ms':>8} {'decisions':>9}"
    )
    last: tuple[SchedulerState, float] | None = None
    for bound in bounds:
        for n_nodes in node_counts:
            for n_pending in pendings:
                t0 = time.perf_counter()
                st, now = setup(n_nodes, n_pending, bound, multi_role=args.multi_role)
                setup_s = time.perf_counter() - t0
                for policy in ("muster", "fifo"):
                    if policy == "fifo" and n_pending != pendings[-1]:
                        continue
                    cpu, wall, decisions = time_cycle(st, now, SchedulerConfig(policy=policy), repeat)
                    print(
                        f"{bound:9} {policy:7} {n_pending:>8} {n_nodes:>6} {len(st.running):>8} "
                        f"{setup_s:>8.2f} {cpu * 1000:>8.1f} {wall * 1000:>8.1f} {decisions:>9}",
                        flush=True,
                    )
                last = (st, now)
    if args.profile and last is not None:
        prof = cProfile.Profile()
        prof.enable()
        schedule(last[0], last[1], SchedulerConfig())
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
