"""Benchmark 3 (``muster bench gang``): admit and place one 512-pod gang that requires a single rack,
on a 10,000-node cluster, through Kafka (submit -> JobAdmitted). Repeated a few times; each gang keeps
running, so later trials search a fuller cluster."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.system.baseline import round_trip
from bench.system.measure import Spread, Table
from bench.system.observe import OBSERVER
from bench.system.stack import SUBMITTER, Stack, private_broker, running_stack
from bench.system.workload import Fleet, QueueLayout, submission
from schemas.codec import encode
from schemas.envelope import make_envelope
from services.core import SchedulerConfig

PODS = 512
WITHIN_S = 60.0


async def main(*, quick: bool, bootstrap: str | None, brokers: int = 1) -> str:
    fleet = Fleet(nodes=1_000 if quick else 10_000, nodes_per_rack=80, racks_per_block=5)  # 640 GPUs a rack
    trials = 3 if quick else 10
    layout = QueueLayout(cohorts=1, queues_per_cohort=1, nominal=fleet.gpus)
    jobs = [submission(f"gang-{t}", "q-0-0", replicas=PODS, runtime_s=3600, rack=True) for t in range(trials)]
    rows: list[tuple[str, float, float, str]] = []
    async with private_broker(bootstrap, brokers=brokers) as broker:
        base = await round_trip(broker.settings, [encode(make_envelope(j, SUBMITTER)) for j in jobs], 1.0)
        async with running_stack(broker, fleet, layout, lambda _: None,
                                 scheduler=SchedulerConfig(min_runtime_s=0.0)) as stack:
            timeline = stack.timeline
            for trial, job in enumerate(jobs):
                OBSERVER.progress("gang trials", trial, len(jobs))
                await (await stack.submit(job.model_copy(update={"submitted_at": datetime.now(UTC)})))
                await stack.cluster.wait_until(lambda j=job.job_id: j in timeline.decided  # type: ignore[misc]
                                               or j in stack.cluster.rejected, within=WITHIN_S)
                if job.job_id not in timeline.decided:
                    rows.append((job.job_id, float("nan"), float("nan"), "not admitted"))
                    continue
                submitted = timeline.submitted[job.job_id]
                rows.append((job.job_id, timeline.decided[job.job_id] - submitted,
                             timeline.created[job.job_id] - submitted, _racks(stack, job.job_id, fleet)))
            OBSERVER.progress("gang trials", len(jobs), len(jobs))
            setup = dict(stack.setup_s)
    table = Table(
        f"gang: {PODS} pods x 1 GPU, topology rack required, {fleet.nodes:,} nodes x 8 GPUs "
        f"({fleet.nodes // fleet.nodes_per_rack} racks of {fleet.nodes_per_rack} nodes), 1 queue-manager shard",
        ["trial", "submit->JobAdmitted", "submit->Job created", "placement"])
    for name, decided, created, where in rows:
        table.add(name, f"{decided * 1000:.0f} ms", f"{created * 1000:.0f} ms", where)
    spread = Spread.of([r[1] for r in rows if r[1] == r[1]])
    table.notes += [
        f"submit->JobAdmitted p50 / p95 / max: {spread.p50 * 1000:.0f} / {spread.p95 * 1000:.0f} / "
        f"{spread.worst * 1000:.0f} ms",
        f"baseline, raw broker round trip of the same submissions: p50/p95/p99 {base.latency.ms()} ms",
        "capacity is published straight onto muster.capacity.v1; a fake cluster consumes the decisions",
        "setup: " + ", ".join(f"{k} {v:.1f} s" for k, v in setup.items()),
    ]
    return table.render()


def _racks(stack: Stack, job_id: str, fleet: Fleet) -> str:
    """Where the gang was placed: its nodes and the racks they are in."""
    plan = stack.cluster.placements.get(job_id)
    if plan is None:
        return "-"
    racks = {fleet.rack_of(n.node) for n in plan.nodes}
    pods = sum(n.pods for n in plan.nodes)
    return f"{pods} pods on {len(plan.nodes)} nodes in rack(s) {', '.join(sorted(racks))}"
