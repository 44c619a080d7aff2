"""Benchmark 4 (``muster bench reclaim``): with 4,000 single-GPU low-priority jobs filling the cluster,
the time from a higher-priority submission to the preemption request and to the admission that takes
the freed GPU. Grace periods are zero (no checkpoint) and ``min_runtime_s`` is 0, so what is measured
is Muster's own reaction: submit -> JobPreemptionRequested, the fake cluster reports JobStopped at
once, then -> JobAdmitted."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.system.baseline import round_trip
from bench.system.measure import Spread, Table
from bench.system.observe import OBSERVER, counting
from bench.system.pacing import paced
from bench.system.stack import SUBMITTER, private_broker, running_stack
from bench.system.workload import Fleet, QueueLayout, submission
from schemas.codec import encode
from schemas.envelope import make_envelope
from services.core import SchedulerConfig

WITHIN_S = 60.0


async def main(*, quick: bool, bootstrap: str | None, brokers: int = 1) -> str:
    running, trials = (400, 5) if quick else (4_000, 20)
    fleet = Fleet(nodes=running // 8)
    layout = QueueLayout(cohorts=1, queues_per_cohort=1, nominal=fleet.gpus)
    fillers = [submission(f"low-{i}", "q-0-0", priority_class="low", runtime_s=3600) for i in range(running)]
    urgent = [submission(f"high-{t}", "q-0-0", priority_class="high", runtime_s=3600) for t in range(trials)]
    async with private_broker(bootstrap, brokers=brokers) as broker:
        base = await round_trip(broker.settings, [encode(make_envelope(j, SUBMITTER)) for j in urgent], 1.0)
        async with running_stack(broker, fleet, layout, lambda _: None,
                                 scheduler=SchedulerConfig(min_runtime_s=0.0)) as stack:
            timeline = stack.timeline
            cluster = stack.cluster
            async for due in paced(len(fillers), None):
                for i in due:
                    await stack.submit(fillers[i].model_copy(update={"submitted_at": datetime.now(UTC)}))
            filled = await cluster.wait_until(counting("low-priority jobs running", lambda: len(cluster.running),
                                                       running, lambda: len(cluster.running) >= running),
                                              within=300)
            if not filled:
                raise RuntimeError(f"only {len(cluster.running)} of {running} low-priority jobs started")
            rows = []
            for trial, job in enumerate(urgent):
                OBSERVER.progress("reclaim trials", trial, len(urgent))
                before = set(timeline.preempt_requested)
                await (await stack.submit(job.model_copy(update={"submitted_at": datetime.now(UTC)})))
                await cluster.wait_until(lambda j=job.job_id: j in timeline.decided, within=WITHIN_S)  # type: ignore[misc]
                submitted = timeline.submitted[job.job_id]
                chosen = sorted(set(timeline.preempt_requested) - before)
                requested = min((timeline.preempt_requested[v] for v in chosen), default=float("nan"))
                decided = timeline.decided.get(job.job_id, float("nan"))
                rows.append((job.job_id, requested - submitted, decided - submitted, len(chosen)))
            OBSERVER.progress("reclaim trials", len(urgent), len(urgent))
            setup = dict(stack.setup_s)
    table = Table(
        f"reclaim: {running:,} running 1-GPU low-priority jobs on {fleet.nodes:,} nodes x 8 GPUs (all GPUs in "
        "use), a 1-GPU high-priority job submitted; grace period 0, min_runtime_s 0, 1 queue-manager shard",
        ["trial", "submit->JobPreemptionRequested", "submit->JobAdmitted", "victims"])
    for name, requested, decided, victims in rows:
        table.add(name, f"{requested * 1000:.0f} ms", f"{decided * 1000:.0f} ms", victims)
    asked = Spread.of([r[1] for r in rows if r[1] == r[1]])
    admitted = Spread.of([r[2] for r in rows if r[2] == r[2]])
    table.notes += [
        f"submit->JobPreemptionRequested p50 / p95 / max: {asked.p50 * 1000:.0f} / {asked.p95 * 1000:.0f} / "
        f"{asked.worst * 1000:.0f} ms",
        f"submit->JobAdmitted (after the victim stopped) p50 / p95 / max: {admitted.p50 * 1000:.0f} / "
        f"{admitted.p95 * 1000:.0f} / {admitted.worst * 1000:.0f} ms",
        f"baseline, raw broker round trip of the same submissions: p50/p95/p99 {base.latency.ms()} ms",
        "the fake cluster answers JobPreemptionRequested with JobStopped at once (the victim's grace period "
        "is excluded); capacity is published straight onto muster.capacity.v1",
        "setup: " + ", ".join(f"{k} {v:.1f} s" for k, v in setup.items()),
    ]
    return table.render()
