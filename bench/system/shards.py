"""Benchmark 5 (``muster bench shards``): the throughput run with 1, 2 and 4 queue-manager shards.

For n shards the fleet's nodes are split over n pools (``pool=p<k>`` labels, round-robin), the 12 queues
over the same pools, and one queue-manager process runs per pool with ``--pool p<k>``, as an operator
would deploy them. Each shard count gets a fresh broker and the same two scenarios: the 2,000/s
overload and a burst. Every shard reads every submission (each has its own consumer group) and passes
over the other pools' jobs without decoding them. Besides admissions per second, which on a small
machine the shards must share with the broker, the fake cluster and the load generator, the table gives
the busiest shard's CPU per job: with a core per shard, that is what bounds the admissions per second.
"""

from __future__ import annotations

from bench.system.measure import Table, rate
from bench.system.stack import private_broker, running_stack
from bench.system.throughput import RUNTIME_S, Outcome, Scenario, run_scenario
from bench.system.workload import Fleet, QueueLayout, pool_name, queue_name
from services.core import SchedulerConfig

SHARDS = (1, 2, 4)
QUEUES = 12  # divisible by every shard count: each pool gets the same share of the submissions
FULL = (Scenario("2000/s", 20_000, 2_000), Scenario("burst", 20_000, None))
QUICK = (Scenario("2000/s", 1_000, 2_000), Scenario("burst", 1_000, None))


async def measure(shards: int, *, quick: bool, bootstrap: str | None, brokers: int = 1) -> list[Outcome]:
    fleet = Fleet(nodes=1_000 if quick else 10_000, pools=shards)
    layout = QueueLayout(cohorts=1, queues_per_cohort=QUEUES, nominal=fleet.gpus, pools=shards)
    queues = [queue_name(0, q) for q in range(QUEUES)]
    owners = [(pool_name(k),) for k in range(shards)]
    async with private_broker(bootstrap, brokers=brokers) as broker, running_stack(
            broker, fleet, layout, lambda _: RUNTIME_S, scheduler=SchedulerConfig(min_runtime_s=0.0),
            shards=owners) as stack:
        return [await run_scenario(stack, scenario, index, within_s=60 + scenario.count / 200, queues=queues)
                for index, scenario in enumerate(QUICK if quick else FULL)]


def _ceiling(ms_per_job: float | None) -> str:
    return "-" if not ms_per_job else f"{1000 / ms_per_job:,.0f}/s"


async def main(*, quick: bool, bootstrap: str | None, brokers: int = 1) -> str:
    results = {n: await measure(n, quick=quick, bootstrap=bootstrap, brokers=brokers) for n in SHARDS}
    nodes = 1_000 if quick else 10_000
    table = Table(f"shards: {nodes:,} nodes split over n pools, {QUEUES} queues, 1-GPU jobs of {RUNTIME_S:g} s, "
                  "one queue-manager process per pool",
                  ["shards", "scenario", "jobs", "admitted", "admissions/s", "vs 1 shard",
                   "submit->decision p50/p95/p99 ms", "raw broker msgs/s", "busiest shard CPU ms/job",
                   "ceiling with a core per shard"])
    single = {o.scenario.name: o.admitted / o.seconds if o.seconds > 0 else 0.0 for o in results[1]}
    for n, outcomes in results.items():
        for o in outcomes:
            per_s = o.admitted / o.seconds if o.seconds > 0 else 0.0
            base = single.get(o.scenario.name) or 0.0
            table.add(str(n), o.scenario.name, f"{o.scenario.count:,}", f"{o.admitted:,}", rate(o.admitted, o.seconds),
                      f"{per_s / base:.2f}" if base else "-", o.decision.ms(), f"{o.baseline_per_s:,.0f}/s",
                      o.cpu_cell(), _ceiling(o.cpu_ms_per_job()))
    table.notes += [
        "each shard count runs on a fresh broker; the shards, the broker, the fake cluster and the load generator "
        "share this machine's cores",
        "every shard consumes every submission in its own consumer group and passes over the other pools' jobs "
        "(their submissions and run events) without decoding them",
        "busiest shard CPU ms/job: the CPU time of the busiest queue-manager process over the scenario, per job "
        "of the scenario; ceiling with a core per shard: the admissions/s at which that shard would use a whole "
        "core (1000 / that figure), i.e. what the shards could reach if each had a core of its own",
    ]
    return table.render()
