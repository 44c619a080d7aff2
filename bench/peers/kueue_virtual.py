"""Kueue's scenario through the queue manager's own handlers on virtual time: Muster's decisions alone.

No broker, no processes, no clock: each submission is folded (``on_input``) at its creation time, a cycle
(``run_cycle``) runs every ``cycle_s`` of virtual time, an admitted job is started at once and succeeds
``runtimeMs`` later, and a preempted one stops at once. What this gives is what Muster's scheduling decides for
the scenario when the system around it adds no delay; the gap to the run through Kafka is the system's cost.
The result is the same on every machine.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from datetime import UTC, datetime

from bench.peers.kueue_figures import Figures, muster_figures
from bench.peers.kueue_scenario import Arrival, Scenario, ScenarioLayout, submission
from bench.system.measure import Timeline
from bench.system.workload import CLUSTER, Fleet
from schemas.decisions import JobAdmitted, JobPreemptionRequested
from schemas.envelope import Message
from schemas.intents import SubmitJob
from schemas.runs import JobStopped, RunStarted, RunSucceeded
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import QueueState

#: a workload's submission made at a moment (``kueue_scenario.submission`` or one shaped as on Kubernetes)
Submit = Callable[[Arrival, datetime], SubmitJob]

T0 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
#: a scenario that has not ended after this much virtual time is reported as it stands
HORIZON_S = 24 * 3600.0


def replay(scenario: Scenario, *, cycle_s: float = 0.05, report_every: int = 20, fleet: Fleet | None = None,
           submit: Submit = submission, start_delay_s: float = 0.0, finish_delay_s: float = 0.0) -> Figures:
    """Run ``scenario`` to its end on virtual time; its figures as ``kueue_figures`` computes them.

    ``fleet`` and ``submit``: the nodes and each workload's submission (the scenario's own by default: gangs of
    one-GPU pods on 8-GPU nodes). ``start_delay_s``: an admitted job is seen running this long after its
    admission; ``finish_delay_s``: its finish is seen this long after ``runtimeMs`` of running (the latency of
    the system around the decisions, which holds quota for it)."""
    config = SchedulerConfig(min_runtime_s=0.0)
    qs = QueueState.for_shard(QueueState().shard, config)
    for item in ScenarioLayout(scenario).messages():
        qs.fold_config(item.key(), item)
    for node in (fleet or scenario.fleet()).node_states():
        qs.fold_capacity(node.key(), node)
    arrivals = scenario.arrivals()
    runtime = {a.job_id: a.template.runtime_s for a in arrivals}
    timeline = Timeline()
    events: list[tuple[float, int, Message]] = []  # (due, sequence, run event)
    attempt_of: dict[str, int] = {}  # the admitted attempt each job runs
    sequence = itertools.count()
    ids = (f"v{n}" for n in itertools.count())
    now, k, cycles = T0, 0, 0
    while len(timeline.finished) < len(arrivals) and now - T0 < HORIZON_S:
        while k < len(arrivals) and T0 + arrivals[k].at_s <= now:
            a = arrivals[k]
            k += 1
            timeline.submitted[a.job_id] = T0 + a.at_s
            on_input(qs, submit(a, datetime.fromtimestamp(T0 + a.at_s, UTC)), next(ids), now)
        while events and events[0][0] <= now:
            _, _, event = heapq.heappop(events)
            if isinstance(event, RunSucceeded):
                if attempt_of.get(event.job_id) != event.attempt:
                    continue  # the attempt was preempted before it could finish
                timeline.finished[event.job_id] = now
                timeline.release(event.job_id, now)
            on_input(qs, event, next(ids), now)
        outcome = run_cycle(qs, now, config, report=cycles % report_every == 0)
        cycles += 1
        stamp = datetime.fromtimestamp(now, UTC)
        for out in outcome.decisions:
            msg = out.message
            if isinstance(msg, JobAdmitted):
                timeline.hold(msg.job_id, now)
                attempt_of[msg.job_id] = msg.attempt
                started = now + start_delay_s
                heapq.heappush(events, (started, next(sequence), RunStarted(
                    job_id=msg.job_id, attempt=msg.attempt, cluster=CLUSTER, observed_at=stamp,
                    pods_running=msg.replicas, pods_total=msg.replicas)))
                finished = started + runtime[msg.job_id] + finish_delay_s
                heapq.heappush(events, (finished, next(sequence), RunSucceeded(
                    job_id=msg.job_id, attempt=msg.attempt, cluster=CLUSTER, observed_at=stamp)))
            elif isinstance(msg, JobPreemptionRequested):
                timeline.release(msg.job_id, now, evicted=True)
                attempt_of.pop(msg.job_id, None)
                heapq.heappush(events, (now, next(sequence), JobStopped(
                    job_id=msg.job_id, attempt=msg.attempt, cluster=msg.cluster, observed_at=stamp,
                    reason=msg.reason, requeue=msg.requeue)))
        now += cycle_s
    return muster_figures(scenario, arrivals, timeline, started=T0)
