"""``muster bench throughput --brokers N``: the cost of replication. The same submissions at 500/s and
2,000/s on one broker (replication factor 1) and on N brokers (replication factor 3, min.insync.replicas
2 from three brokers on), one after the other in the same run, each next to the raw broker round trip of
the same submissions on the same cluster and replication (acks=all, idempotent, as Muster's producers)."""

from __future__ import annotations

from bench.system.baseline import round_trip
from bench.system.measure import Table, rate
from bench.system.stack import SUBMITTER, Broker, private_broker
from bench.system.throughput import QUEUES, RUNTIME_S, Measured, Scenario, measure, per_second, vs_raw
from bench.system.workload import queue_name, submission
from schemas.codec import encode
from schemas.envelope import make_envelope

FULL = (Scenario("500/s", 5_000, 500), Scenario("2000/s", 20_000, 2_000))
QUICK = (Scenario("500/s", 500, 500), Scenario("2000/s", 1_000, 2_000))
WARM_UP = 5_000  # raw round trips on a fresh cluster before measuring, so no size pays the JVMs' warm-up


async def main(*, quick: bool, brokers: int, debounce_s: float | None = None) -> str:
    if brokers < 2:
        raise ValueError("the cost of replication compares one broker with a cluster of two or more")
    scenarios = QUICK if quick else FULL
    results: dict[int, tuple[str, Measured]] = {}
    broker_cpu: dict[int, float | None] = {}
    for size in (1, brokers):
        async with private_broker(None, brokers=size) as broker:
            await warm_up(broker, 1_000 if quick else WARM_UP)
            before = broker.cpu_seconds()
            measured = await measure(broker, scenarios, quick=quick, debounce_s=debounce_s)
            after = broker.cpu_seconds()
            broker_cpu[size] = None if before is None or after is None else after - before
            results[size] = (str(broker.replication), measured)
    nodes = results[1][1].fleet.nodes
    table = Table(
        f"throughput by replication: {nodes:,} nodes, {QUEUES} queues, 1-GPU jobs of {RUNTIME_S:g} s, "
        f"1 queue-manager shard; 1 broker, then {brokers} brokers",
        ["brokers", "topics", "scenario", "jobs", "admitted", "admissions/s", "vs 1 broker",
         "submit->decision p50/p95/p99 ms", "p99 vs 1 broker", "raw broker msgs/s",
         "raw round trip p50/p95/p99 ms", "raw p99 vs 1 broker", "vs raw", "QM CPU ms/job"])
    single = {o.scenario.name: o for o in results[1][1].outcomes}
    for size, (replication, measured) in results.items():
        for o in measured.outcomes:
            one = single[o.scenario.name]
            table.add(str(size), replication, o.scenario.name, f"{o.scenario.count:,}", f"{o.admitted:,}",
                      rate(o.admitted, o.seconds), _ratio(per_second(o), per_second(one)), o.decision.ms(),
                      _ratio(o.decision.p99, one.decision.p99), f"{o.baseline_per_s:,.0f}/s", o.baseline.ms(),
                      _ratio(o.baseline.p99, one.baseline.p99), f"{vs_raw(o):.2f}", o.cpu_cell())
    table.notes += [
        "each size runs on a fresh cluster with the same stack (queue manager in a child process, fake cluster, "
        "load generator), one after the other; the brokers' JVMs share this machine's cores with them",
        "before measuring, each cluster takes a burst of raw round trips (its JVMs warmed up)",
        "raw: aiokafka produce (acks=all, idempotent) -> consume of the same submissions at the same pace, on a "
        "topic with the cluster's replication; 'vs raw' compares with the raw run on the same cluster",
        "CPU of the broker JVMs over both scenarios (raw round trips included): "
        + ", ".join(f"{size} broker(s) {'-' if cpu is None else f'{cpu:.1f} s'}" for size, cpu in broker_cpu.items()),
        "setup: " + "; ".join(f"{size} broker(s): " + ", ".join(f"{k} {v:.1f} s" for k, v in m.setup_s.items())
                              for size, (_, m) in results.items()),
    ]
    return table.render()


async def warm_up(broker: Broker, count: int) -> None:
    """A burst of raw round trips (the brokers' code paths compiled, their connections open)."""
    jobs = [submission(f"warm-{i}", queue_name(0, i % QUEUES)) for i in range(count)]
    await round_trip(broker.settings, [encode(make_envelope(j, SUBMITTER)) for j in jobs], None)


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}" if base else "-"
