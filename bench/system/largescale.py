"""Benchmark 2 (``muster bench largescale``): Kueue's large-scale shape, 10 cohorts x 100 queues and
50,000 workloads of three sizes with short runtimes, through Kafka. Reports the wall time until every
workload has completed and the average time to admission per size."""

from __future__ import annotations

import asyncio
import statistics
import time
from datetime import UTC, datetime

from bench.system.baseline import round_trip
from bench.system.machine import spent
from bench.system.measure import Spread, Table, rate
from bench.system.observe import OBSERVER, Series, counting
from bench.system.pacing import paced
from bench.system.sizes import BORROWING_LIMIT, NOMINAL, SIZES, per_queue
from bench.system.stack import SUBMITTER, private_broker, running_stack
from bench.system.workload import Fleet, QueueLayout, submission
from schemas.codec import encode
from schemas.envelope import make_envelope
from services.core import SchedulerConfig

LIMIT_S = 240.0  # a run that has not completed by then reports how far it got


async def main(*, quick: bool, bootstrap: str | None, brokers: int = 1) -> str:
    cohorts, queues, workloads = (2, 10, 10) if quick else (10, 100, 50)
    layout = QueueLayout(cohorts=cohorts, queues_per_cohort=queues, nominal=NOMINAL, borrowing_limit=BORROWING_LIMIT)
    fleet = Fleet(nodes=cohorts * queues * NOMINAL // 8)  # the cluster holds exactly the nominal quotas
    jobs = []
    for q, queue in enumerate(layout.queue_names()):
        for i, size in enumerate(per_queue(workloads)):
            jobs.append((submission(f"w-{q}-{i}", queue, replicas=size.pods, priority_class=size.name,
                                    runtime_s=size.runtime_s), size))
    jobs = [jobs[k] for k in _round_robin(len(layout.queue_names()), workloads)]
    runtimes = {job.job_id: size.runtime_s for job, size in jobs}
    size_of = {job.job_id: size.name for job, size in jobs}
    async with private_broker(bootstrap, brokers=brokers) as broker:
        base = await round_trip(broker.settings, [encode(make_envelope(j, SUBMITTER)) for j, _ in jobs], None)
        async with running_stack(broker, fleet, layout, runtimes.__getitem__,
                                 scheduler=SchedulerConfig(min_runtime_s=0.0)) as stack:
            cpu_before = stack.cpu_seconds()
            started = time.time()
            futures = []
            async for due in paced(len(jobs), None):
                for k in due:
                    job = jobs[k][0].model_copy(update={"submitted_at": datetime.now(UTC)})
                    futures.append(await stack.submit(job))
            await asyncio.gather(*futures)
            produced = time.time() - started
            ids = set(runtimes)
            timeline = stack.timeline
            done = await stack.cluster.wait_until(counting(
                "workloads finished", lambda: len(ids & (timeline.finished.keys() | stack.cluster.rejected.keys())),
                len(ids), lambda: ids <= timeline.finished.keys() | stack.cluster.rejected.keys()), within=LIMIT_S)
            OBSERVER.series.append(Series.of("largescale", timeline, ids))
            wall = max(timeline.finished.values(), default=started) - started
            (cpu,) = spent(cpu_before, stack.cpu_seconds())
            setup = dict(stack.setup_s)
    table = Table(
        f"largescale: {cohorts} cohorts x {queues} queues (nominal {NOMINAL}, borrowing limit {BORROWING_LIMIT} "
        f"GPUs), {len(jobs):,} workloads, {fleet.nodes:,} nodes x 8 GPUs, 1 queue-manager shard",
        ["size", "pods x GPUs", "runtime", "workloads", "completed", "avg time to admission", "p50 / p95 / p99 ms"])
    for size in SIZES:
        chosen = [j for j in ids if size_of[j] == size.name]
        waits = timeline.delays(timeline.submitted, timeline.decided, chosen)
        finished = sum(1 for j in chosen if j in timeline.finished)
        avg = f"{statistics.fmean(waits):.2f} s" if waits else "-"
        table.add(size.name, f"{size.pods} x 1", f"{size.runtime_s * 1000:.0f} ms", f"{len(chosen):,}",
                  f"{finished:,}", avg, Spread.of(waits).ms())
    completed = sum(1 for j in ids if j in timeline.finished)
    table.notes += [
        f"wall time until all complete: {wall:.1f} s" if done else
        f"NOT all complete within {LIMIT_S:.0f} s: {completed:,} of {len(jobs):,} completed",
        f"completions/s: {rate(completed, wall)}; submissions produced in {produced:.1f} s",
        *([f"queue-manager CPU: {cpu:.1f} s over the run ({cpu * 1000 / len(jobs):.2f} ms per workload)"]
          if cpu is not None else []),
        f"baseline, raw broker round trip of the same {len(jobs):,} submissions: {base.seconds:.1f} s "
        f"({base.per_second:,.0f} msgs/s, p50/p95/p99 {base.latency.ms()} ms)",
        "shape and sizes from Kueue's test/performance/scheduler large-scale generator; a size's request is "
        "a gang of 1-GPU pods; a fake cluster runs the jobs (capacity fed straight onto muster.capacity.v1)",
        "setup: " + ", ".join(f"{k} {v:.1f} s" for k, v in setup.items()),
    ]
    return table.render()


def _round_robin(queues: int, per_queue_count: int) -> list[int]:
    """Indexes that take the queues' workloads in turn (queue 0's first, queue 1's first, ...)."""
    return [q * per_queue_count + i for i in range(per_queue_count) for q in range(queues)]
