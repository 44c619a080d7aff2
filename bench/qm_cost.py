"""The queue manager's cost per workload, counted exactly: no broker, no clock, no machine speed.

``muster bench largescale`` measures the queue manager's CPU through Kafka, which a shared machine makes
noisy. This program replays the same shape (Kueue's large-scale scenario: cohorts of queues with
nominal 20 and borrowing limit 100 GPUs, workloads small / medium / large in the proportion 20 : 7 : 3,
submitted round-robin over the queues) straight through the queue manager's handlers (``on_input`` for
every submission and run event, ``run_cycle`` for every cycle) on virtual time, with each input decoded
and each output wrapped and encoded as the service does, and counts the Python function calls that
makes with ``cProfile``. The count is the same on every machine for the same code,
so CI checks it against a committed figure (``tests/bench/test_queue_manager_cost.py``).

    python -m bench.qm_cost                      # the CI scenario: 2 cohorts x 10 queues x 50 workloads
    python -m bench.qm_cost --cohorts 10 --queues 100 --workloads 50 --top 25   # the full shape, with a profile

Submissions arrive ``arrivals_per_cycle`` at a time (a batch the consumer hands over before a cycle);
every cycle advances virtual time by ``cycle_s``; an admitted job reports ``RunStarted`` in the next
cycle and ``RunSucceeded`` once its runtime has passed.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import heapq
import pstats
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from bench.system.sizes import BORROWING_LIMIT, NOMINAL, SIZES, per_queue
from bench.system.workload import CLUSTER, Fleet, QueueLayout, submission
from schemas.codec import decode, encode
from schemas.decisions import JobAdmitted
from schemas.envelope import Envelope, Message, caused_by, make_envelope
from schemas.runs import DISPATCHES, RUNS, RunStarted, RunSucceeded
from schemas.topics import INTENTS_TOPIC, RUNS_TOPIC
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import Out, QueueState
from services.queue_manager.service import PRODUCER
from services.runtime.collector import configure_collector

SUBMITTER = "bench_pipeline"
_RUN_TYPES = frozenset(m.TYPE for m in (*RUNS, *DISPATCHES))

T0 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class Scenario:
    cohorts: int = 2
    queues: int = 10  # per cohort
    workloads: int = 50  # per queue
    arrivals_per_cycle: int = 2000  # submissions that reach the inbox between two cycles
    inputs_per_cycle: int = 500  # inputs folded between two cycles (the rest wait in the inbox)
    cycle_s: float = 0.05
    report_every: int = 20  # cycles between status reports (the service reports at most once a second)

    @property
    def jobs(self) -> int:
        return self.cohorts * self.queues * self.workloads


#: The scenarios CI counts (``tests/bench/test_queue_manager_cost.py``). ``deep``: few queues with long
#: backlogs that wait past their promotion time, cycle after cycle (the shape that made the queue order's
#: promotions cost the whole backlog every cycle). ``wide``: a hundred queues in four cohorts.
GUARDS = {
    "deep": Scenario(cohorts=1, queues=5, workloads=200, arrivals_per_cycle=1000, inputs_per_cycle=50, cycle_s=0.5),
    "wide": Scenario(cohorts=4, queues=25, workloads=20, arrivals_per_cycle=1000, inputs_per_cycle=100, cycle_s=0.5),
}


@dataclass
class Outcome:
    calls: int  # Python function calls inside the queue manager's handlers and cycles
    jobs: int
    finished: int
    cycles: int
    seconds: float  # CPU time of the replay, setup excluded (informative only: depends on the machine)

    @property
    def calls_per_job(self) -> float:
        return self.calls / max(self.jobs, 1)


def _stamp(message: Message, now: float) -> Message:
    return message.model_copy(update={"submitted_at": datetime.fromtimestamp(now, UTC)})


def _events(sc: Scenario) -> tuple[QueueState, list[Message], dict[str, float]]:
    layout = QueueLayout(cohorts=sc.cohorts, queues_per_cohort=sc.queues, nominal=NOMINAL,
                         borrowing_limit=BORROWING_LIMIT)
    fleet = Fleet(nodes=sc.cohorts * sc.queues * NOMINAL // 8)
    qs = QueueState.for_shard(QueueState().shard, SchedulerConfig(min_runtime_s=0.0))
    for msg in layout.messages():
        qs.fold_config(msg.key(), msg)
    for node in fleet.node_states():
        qs.fold_capacity(node.key(), node)
    names = layout.queue_names()
    per = [[(f"w-{q}-{i}", size) for i, size in enumerate(per_queue(sc.workloads))] for q in range(len(names))]
    submissions: list[Message] = []
    runtimes: dict[str, float] = {}
    for i in range(sc.workloads):  # round robin over the queues, as the benchmark submits
        for q, queue in enumerate(names):
            job_id, size = per[q][i]
            submissions.append(submission(job_id, queue, replicas=size.pods, priority_class=size.name,
                                          runtime_s=size.runtime_s))
            runtimes[job_id] = size.runtime_s
    return qs, submissions, runtimes


def publish(cause: Envelope | None, outs: list[Out]) -> int:
    """What the service does with its outputs before the producer: wrap each in its envelope and encode it."""
    chain = caused_by(cause) if cause is not None else {}
    return sum(len(encode(make_envelope(o.message, PRODUCER, correlation_id=chain.get("correlation_id"),
                                        causation_id=chain.get("causation_id")))) for o in outs)


def _ids() -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"e{n}"


def replay(sc: Scenario, profile: cProfile.Profile | None = None) -> Outcome:
    """Run the scenario to the end; ``profile`` (enabled only around the queue manager's own work)."""
    qs, submissions, runtimes = _events(sc)
    config = SchedulerConfig(min_runtime_s=0.0)
    ids = _ids()
    now = T0
    started: list[tuple[str, int]] = []  # admitted in the last cycle: RunStarted next
    ends: list[tuple[float, str, int]] = []  # heap of (end, job, attempt)
    finished = cycles = 0
    k = 0
    clock = time.process_time()

    def feed(message: Message) -> None:
        raw = encode(make_envelope(message, SUBMITTER, event_id=next(ids)))  # as the producer wrote it
        if profile is not None:
            profile.enable()
        envelope = decode(raw, topic=RUNS_TOPIC if message.TYPE in _RUN_TYPES else INTENTS_TOPIC)
        publish(envelope, on_input(qs, envelope.payload, envelope.event_id, now))
        if profile is not None:
            profile.disable()

    inbox: deque[Message] = deque()
    while finished < len(runtimes):
        inbox.extend(_stamp(msg, now) for msg in submissions[k:k + sc.arrivals_per_cycle])
        k += sc.arrivals_per_cycle
        for job_id, attempt in started:
            inbox.append(RunStarted(job_id=job_id, attempt=attempt, cluster=CLUSTER,
                                    observed_at=datetime.fromtimestamp(now, UTC), pods_running=1, pods_total=1))
        started = []
        while ends and ends[0][0] <= now:
            _, job_id, attempt = heapq.heappop(ends)
            inbox.append(RunSucceeded(job_id=job_id, attempt=attempt, cluster=CLUSTER,
                                      observed_at=datetime.fromtimestamp(now, UTC)))
        for _ in range(min(sc.inputs_per_cycle, len(inbox))):
            msg = inbox.popleft()
            feed(msg)
            finished += isinstance(msg, RunSucceeded)
        if profile is not None:
            profile.enable()
        outcome = run_cycle(qs, now, config, report=cycles % sc.report_every == 0)
        publish(None, [*outcome.records, *outcome.decisions, *outcome.statuses])
        if profile is not None:
            profile.disable()
        cycles += 1
        for out in outcome.decisions:
            msg = out.message
            if isinstance(msg, JobAdmitted):
                started.append((msg.job_id, msg.attempt))
                heapq.heappush(ends, (now + runtimes[msg.job_id], msg.job_id, msg.attempt))
        now += sc.cycle_s
        if cycles > 1_000_000:
            raise RuntimeError(f"did not finish: {finished} of {len(runtimes)} after {cycles} cycles")
    return Outcome(0, len(runtimes), finished, cycles, time.process_time() - clock)


def count_calls(sc: Scenario, top: int = 0) -> Outcome:
    """The scenario replayed under ``cProfile``: its call count (and, with ``top``, the profile printed).

    It is replayed once unprofiled first, so that the process's caches (the quantities parsed, pydantic's
    own) hold what the scenario needs whatever ran before in the process: the count is then the same in a
    test run after other tests as in a fresh process. The garbage collector is run before and held off
    during the profiled replay: a collection inside it would run the finalizers (``__del__``) of whatever
    earlier work in the process left behind and count their calls as the queue manager's."""
    replay(sc)
    prof = cProfile.Profile()
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        outcome = replay(sc, prof)
    finally:
        if collecting:
            gc.enable()
    stats = pstats.Stats(prof)
    outcome.calls = int(stats.total_calls)  # type: ignore[attr-defined]
    if top:
        stats.sort_stats("tottime").print_stats(top)
    return outcome


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cohorts", type=int, default=Scenario.cohorts)
    p.add_argument("--queues", type=int, default=Scenario.queues, help="queues per cohort")
    p.add_argument("--workloads", type=int, default=Scenario.workloads, help="workloads per queue")
    p.add_argument("--arrivals", type=int, default=Scenario.arrivals_per_cycle, help="submissions per cycle")
    p.add_argument("--inputs", type=int, default=Scenario.inputs_per_cycle, help="inputs folded per cycle")
    p.add_argument("--cycle-s", type=float, default=Scenario.cycle_s, help="virtual seconds between cycles")
    p.add_argument("--top", type=int, default=0, help="print the profile's most expensive functions")
    p.add_argument("--cpu", type=int, default=0, metavar="N",
                   help="instead of counting calls, replay N times without the profiler and print CPU per workload")
    a = p.parse_args(argv)
    sc = Scenario(cohorts=a.cohorts, queues=a.queues, workloads=a.workloads, arrivals_per_cycle=a.arrivals,
                  inputs_per_cycle=a.inputs, cycle_s=a.cycle_s)
    sizes = ", ".join(f"{s.name} {s.pods}x1 GPU" for s in SIZES)
    if a.cpu:
        configure_collector()  # the collector's thresholds of a service process
        runs = [replay(sc) for _ in range(a.cpu)]
        per = sorted(r.seconds * 1e6 / r.jobs for r in runs)
        print(f"queue manager, {sc.cohorts} cohorts x {sc.queues} queues x {sc.workloads} workloads ({sizes}): "
              f"CPU per workload {per[len(per) // 2]:,.0f} us (median of {a.cpu}; "
              f"min {per[0]:,.0f}, max {per[-1]:,.0f})")
        return
    out = count_calls(sc, a.top)
    print(f"queue manager, {sc.cohorts} cohorts x {sc.queues} queues x {sc.workloads} workloads ({sizes}): "
          f"{out.jobs:,} jobs finished in {out.cycles:,} cycles")
    print(f"function calls: {out.calls:,} ({out.calls_per_job:,.0f} per workload); "
          f"{out.seconds:.1f} s of CPU under the profiler (informative)")


if __name__ == "__main__":
    main()
