"""Benchmark 1: submissions at fixed rates and as a burst -> admissions per second and latencies.

Each scenario first measures the raw broker round trip of the very same encoded submissions at the
same pace (the baseline), then produces them onto ``muster.intents`` and waits until every job is
admitted. Latencies use this process's clock: submit -> decision is the ``JobAdmitted`` envelope's
``occurred_at`` minus the ``SubmitJob``'s ``submitted_at``; submit -> Job created is the moment the
fake cluster consumed the ``JobAdmitted``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from bench.system.baseline import round_trip
from bench.system.machine import spent
from bench.system.measure import Spread, Table, rate
from bench.system.observe import OBSERVER, Series, counting
from bench.system.pacing import paced
from bench.system.stack import SUBMITTER, Broker, Stack, running_stack
from bench.system.workload import Fleet, QueueLayout, queue_name, submission
from schemas.codec import encode
from schemas.envelope import make_envelope
from services.core import SchedulerConfig

RUNTIME_S = 0.5  # every job runs this long on the fake cluster
QUEUES = 10
QUIET_S = 1.0  # pause between scenarios, after the last job of one has finished


@dataclass(frozen=True)
class Scenario:
    name: str
    count: int
    rate: float | None  # None: a burst, all produced as fast as possible


FULL = (Scenario("100/s", 1_000, 100), Scenario("500/s", 5_000, 500), Scenario("2000/s", 20_000, 2_000),
        Scenario("burst", 50_000, None))
QUICK = (Scenario("100/s", 100, 100), Scenario("500/s", 500, 500), Scenario("2000/s", 1_000, 2_000),
         Scenario("burst", 1_000, None))


@dataclass(frozen=True)
class Outcome:
    scenario: Scenario
    admitted: int
    seconds: float  # first submission to last decision
    decision: Spread
    created: Spread
    baseline_per_s: float
    baseline: Spread
    #: CPU seconds each queue-manager process used for the scenario, from its first submission until its
    #: last job finished and was taken in (None where it could not be read)
    manager_cpu_s: tuple[float | None, ...] = ()

    def cpu_ms_per_job(self) -> float | None:
        """The busiest queue manager's CPU per submitted job, in milliseconds."""
        used = [s for s in self.manager_cpu_s if s is not None]
        if not used or len(used) < len(self.manager_cpu_s) or self.scenario.count == 0:
            return None
        return max(used) * 1000 / self.scenario.count

    def cpu_cell(self) -> str:
        ms = self.cpu_ms_per_job()
        return "-" if ms is None else f"{ms:.2f}"


async def run_scenario(stack: Stack, scenario: Scenario, index: int, *, within_s: float,
                       queues: Sequence[str] | None = None) -> Outcome:
    """Submit ``scenario`` round-robin over ``queues`` (the first cohort's ten by default)."""
    names = list(queues or [queue_name(0, q) for q in range(QUEUES)])
    jobs = [submission(f"t{index}-{i}", names[i % len(names)], runtime_s=RUNTIME_S) for i in range(scenario.count)]
    payloads = [encode(make_envelope(j, SUBMITTER)) for j in jobs]
    base = await round_trip(stack.settings, payloads, scenario.rate)
    ids = {j.job_id for j in jobs}
    cpu_before = stack.cpu_seconds()
    started = time.time()
    futures = []
    async for due in paced(scenario.count, scenario.rate):
        for i in due:
            job = jobs[i].model_copy(update={"submitted_at": datetime.now(UTC)})
            futures.append(await stack.submit(job))
        OBSERVER.progress(f"{scenario.name}: submitted", len(futures), scenario.count)
    await asyncio.gather(*futures)
    timeline = stack.timeline

    def decided() -> set[str]:
        return ids & (timeline.decided.keys() | stack.cluster.rejected.keys())

    await stack.cluster.wait_until(counting(f"{scenario.name}: decided", lambda: len(decided()), len(ids),
                                            lambda: len(decided()) == len(ids)), within=within_s)
    admitted = [j for j in ids if j in timeline.decided]
    OBSERVER.series.append(Series.of(scenario.name, timeline, ids, scenario.rate))
    await settle(stack, ids)
    cpu = spent(cpu_before, stack.cpu_seconds())
    last = max((timeline.decided[j] for j in admitted), default=started)
    return Outcome(scenario, len(admitted), last - started,
                   Spread.of(timeline.delays(timeline.submitted, timeline.decided, admitted)),
                   Spread.of(timeline.delays(timeline.submitted, timeline.created, admitted)),
                   base.per_second, base.latency, cpu)


async def settle(stack: Stack, ids: set[str], *, within_s: float = 60.0) -> None:
    """Let the jobs of a scenario finish and the queue manager take that in, so the next one starts quiet."""
    timeline = stack.timeline
    await stack.cluster.wait_until(lambda: ids <= timeline.finished.keys() | stack.cluster.rejected.keys(),
                                   within=within_s)
    await asyncio.sleep(QUIET_S)


@dataclass(frozen=True)
class Measured:
    """The outcomes of scenarios run one after the other on one stack."""

    outcomes: list[Outcome]
    fleet: Fleet
    setup_s: dict[str, float]
    debounce_s: float


async def measure(broker: Broker, scenarios: Sequence[Scenario], *, quick: bool,
                  debounce_s: float | None = None) -> Measured:
    """Run ``scenarios`` on one stack (10,000 nodes; 1,000 with ``quick``)."""
    fleet = Fleet(nodes=1_000 if quick else 10_000)
    layout = QueueLayout(cohorts=1, queues_per_cohort=QUEUES, nominal=fleet.gpus)
    scheduler = SchedulerConfig(min_runtime_s=0.0)
    async with running_stack(broker, fleet, layout, lambda _: RUNTIME_S, scheduler=scheduler,
                             debounce_s=debounce_s) as stack:
        outcomes = []
        for index, scenario in enumerate(scenarios):
            outcomes.append(await run_scenario(stack, scenario, index, within_s=60 + scenario.count / 200))
        return Measured(outcomes, fleet, dict(stack.setup_s), stack.manager.debounce_s)


def per_second(o: Outcome) -> float:
    return o.admitted / o.seconds if o.seconds > 0 else 0.0


def vs_raw(o: Outcome) -> float:
    """Admissions per second over the raw broker's messages per second of the same submissions."""
    return per_second(o) / o.baseline_per_s if o.baseline_per_s else 0.0


async def throughput(broker: Broker, *, quick: bool, debounce_s: float | None = None) -> Table:
    """Run every scenario on one stack (10,000 nodes; 1,000 with ``quick``) and tabulate them."""
    measured = await measure(broker, QUICK if quick else FULL, quick=quick, debounce_s=debounce_s)
    fleet, outcomes, setup = measured.fleet, measured.outcomes, measured.setup_s
    table = Table(
        f"throughput: {fleet.nodes:,} nodes x {fleet.gpus_per_node} GPUs, {QUEUES} queues, 1-GPU jobs of "
        f"{RUNTIME_S:g} s, 1 queue-manager shard",
        ["scenario", "jobs", "admitted", "admissions/s", "submit->decision p50/p95/p99 ms",
         "submit->Job created p50/p95/p99 ms", "raw broker msgs/s", "raw round trip p50/p95/p99 ms",
         "vs raw", "QM CPU ms/job"])
    for o in outcomes:
        table.add(o.scenario.name, f"{o.scenario.count:,}", f"{o.admitted:,}", rate(o.admitted, o.seconds),
                  o.decision.ms(), o.created.ms(), f"{o.baseline_per_s:,.0f}/s", o.baseline.ms(), f"{vs_raw(o):.2f}",
                  o.cpu_cell())
    debounce = measured.debounce_s
    table.notes += [
        "capacity is published straight onto muster.capacity.v1 and a fake cluster answers JobAdmitted with "
        "RunStarted / RunSucceeded (kubesim is not built for 10,000 nodes); 'Job created' = the fake cluster "
        "consumed JobAdmitted",
        f"the queue manager cycles {debounce:g} s after a change (debounce): that bounds submit->decision "
        "from below",
        "QM CPU ms/job: the queue-manager process's CPU time over the scenario (its jobs submitted, admitted, "
        "run and finished) per job",
        "setup: " + ", ".join(f"{k} {v:.1f} s" for k, v in setup.items()),
        f"Kafka: {broker.brokers} broker{'s' if broker.brokers != 1 else ''}, topics at {broker.replication}",
    ]
    return table
