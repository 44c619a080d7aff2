"""Property: a queue under its nominal quota always gets it back, whatever mix of preemptible and
non-preemptible work the other queues of its cohort run, within the victims' minimum runtime and grace
periods."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from services.core import (
    Admit,
    CohortSpec,
    Job,
    Node,
    PendingReason,
    Preempt,
    QueueSpec,
    ResourceQuota,
    SchedulerConfig,
    SchedulerState,
    schedule,
)

from .builders import check_invariants

GPU = "a100"
MIN_RUNTIME = 100.0
SETUP = SchedulerConfig(preemption=False, min_runtime_s=MIN_RUNTIME)


@dataclass
class Setup:
    queues: list[QueueSpec]
    cohorts: list[CohortSpec]
    nodes: list[Node]
    rounds: list[tuple[float, list[Job]]]  # (time, jobs submitted then) for the running work
    target: str  # the queue that wants its quota back
    want: int  # GPUs the target queue's job asks for (at most its free nominal quota)
    preemptible: bool
    now: float
    config: SchedulerConfig


@st.composite
def setups(draw: st.DrawFn) -> Setup:
    nested = draw(st.booleans())
    cohorts = [CohortSpec("root")] + ([CohortSpec("sub", parent="root")] if nested else [])
    queues = []
    for i in range(draw(st.integers(2, 4))):
        nominal = draw(st.integers(0, 8))
        quota = ResourceQuota(
            nominal,
            borrowing_limit=draw(st.one_of(st.none(), st.integers(0, 8))),
            lending_limit=draw(st.one_of(st.none(), st.integers(0, nominal))),
        )
        cohort = "sub" if nested and i % 2 else "root"
        queues.append(QueueSpec(f"q{i}", cohort=cohort, quotas=MappingProxyType({f"gpu:{GPU}": quota})))
    total = sum(q.quotas[f"gpu:{GPU}"].nominal for q in queues) + draw(st.integers(0, 4))
    nodes: list[Node] = []
    while sum(n.gpus for n in nodes) < total:  # the cluster holds every queue's nominal quota
        size = draw(st.sampled_from((1, 2, 4, 8)))
        nodes.append(Node(f"n{len(nodes)}", "c1", GPU, size, topology=MappingProxyType({"rack": "r"})))
    rounds = []
    count = 0
    for r in range(draw(st.integers(1, 3))):
        jobs = []
        for _ in range(draw(st.integers(1, 8))):
            jobs.append(
                Job(
                    job_id=f"j{count}",
                    queue=f"q{draw(st.integers(0, len(queues) - 1))}",
                    submit_time=40.0 * r,
                    replicas=draw(st.integers(1, 8)),
                    priority=draw(st.integers(0, 3)),
                    preemptible=draw(st.booleans()),
                    checkpointable=draw(st.booleans()),
                    grace_period_s=float(draw(st.sampled_from((0, 10, 30, 60)))),
                    runtime_estimate=draw(st.one_of(st.none(), st.floats(10.0, 10_000.0))),
                )
            )
            count += 1
        rounds.append((40.0 * r, jobs))
    config = SchedulerConfig(
        min_runtime_s=MIN_RUNTIME,
        backfill=draw(st.booleans()),
        fair_share=draw(st.booleans()),
        max_preemption_attempts=draw(st.sampled_from((1, 16))),
    )
    return Setup(
        queues=queues,
        cohorts=cohorts,
        nodes=nodes,
        rounds=rounds,
        target=f"q{draw(st.integers(0, len(queues) - 1))}",
        want=draw(st.integers(1, 8)),
        preemptible=draw(st.booleans()),
        now=rounds[-1][0] + draw(st.integers(0, 150)),
        config=config,
    )


def _run_setup(s: Setup) -> SchedulerState:
    state = SchedulerState(queues=s.queues, cohorts=s.cohorts, nodes=s.nodes)
    for t, jobs in s.rounds:
        for job in jobs:
            state.submit(job)
        for d in schedule(state, t, SETUP).decisions:
            state.apply(d, t)
        for job_id in list(state.pending):  # only running work stays
            state.cancel(job_id)
    check_invariants(state)
    return state


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups())
def test_a_queue_under_nominal_gets_its_quota_back(s: Setup) -> None:
    state = _run_setup(s)
    spec = next(q for q in s.queues if q.name == s.target)
    free_nominal = spec.quotas[f"gpu:{GPU}"].nominal - state.queue_gpus(s.target)
    assume(free_nominal > 0)
    assert all(rj.job.preemptible for rj in state.running_jobs().values() if rj.borrowed)
    want = min(s.want, free_nominal)
    target = Job("target", s.target, submit_time=s.now, replicas=want, preemptible=s.preemptible, priority=0)
    state.submit(target)
    now = s.now
    others = [rj for rj in state.running_jobs().values() if rj.job.queue != s.target]
    max_grace = max((rj.job.grace_period_s for rj in others), default=0.0)
    youngest = max((rj.start_time for rj in others if rj.borrowed), default=0.0)
    protected_for = max(0.0, youngest + MIN_RUNTIME - now)

    result = schedule(state, now, s.config)
    victims = [d for d in result.decisions if isinstance(d, Preempt)]
    if any(isinstance(d, Admit) and d.job_id == "target" for d in result.decisions):
        event("admitted at once")
    else:
        info = result.pending["target"]
        assert info.reason in (PendingReason.PREEMPTING, PendingReason.PROTECTED), info
        assert info.estimated_start is not None and info.estimated_start <= now + protected_for + max_grace, info
        if info.reason is PendingReason.PREEMPTING:
            assert victims and all(d.preemptor == "target" for d in victims)
            event("victims preempted")
        else:
            assert not victims
            event("protected by minimum runtime")

    # drive it: victims stop after their grace period, nothing else ends; the target starts in time
    stops: dict[str, float] = {}
    deadline = now + protected_for + max_grace
    while True:
        for d in result.decisions:
            if isinstance(d, Preempt):
                stops[d.job_id] = now + d.grace_period_s
            state.apply(d, now)
        check_invariants(state)
        if "target" in state.running_jobs():
            break
        assert now <= deadline, (now, deadline)
        if not any(t <= now for t in stops.values()):
            unprotected = [rj.start_time + MIN_RUNTIME for rj in others if rj.borrowed]
            now = min([t for t in [*stops.values(), *unprotected] if t > now] + [now + 10.0])
        for job_id in [j for j, t in stops.items() if t <= now]:
            state.job_stopped(job_id, now)  # requeued: it competes again, behind work within nominal
            del stops[job_id]
        result = schedule(state, now, s.config)
    assert now <= deadline
