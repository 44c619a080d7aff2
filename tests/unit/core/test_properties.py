"""Property tests: random small clusters and workloads driven through schedule/apply/finish to the end."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from services.core import (
    Admit,
    CohortSpec,
    Job,
    Node,
    Preempt,
    PreemptReason,
    QueueSpec,
    ResourceQuota,
    Role,
    Scale,
    SchedulerConfig,
    SchedulerState,
    TopologyMode,
    TopologyRequest,
    schedule,
)
from services.core.capacity import CapacityIndex
from services.core.placement import Placer

from .builders import check_invariants, snapshot

GPU = "a100"
#: examples of the multi-role property test: MUSTER_PROPERTY_EXAMPLES raises it (CI runs 3,000)
MULTI_ROLE_EXAMPLES = int(os.environ.get("MUSTER_PROPERTY_EXAMPLES", "200"))


@dataclass
class World:
    nodes: list[Node]
    queues: list[QueueSpec]
    jobs: list[tuple[float, Job, float]]  # (arrival, job, true duration)
    config: SchedulerConfig
    flaps: list[tuple[float, str]] = field(default_factory=list)  # node made unhealthy at t for 10s


@st.composite
def worlds(draw: st.DrawFn, roles: bool = False) -> World:
    """``roles``: about half the jobs have one or two companion roles (a CPU launcher, a GPU head, a second
    worker group), and nodes track CPU so the launchers compete for it."""
    node_count = draw(st.integers(1, 4))
    nodes = []
    for i in range(node_count):
        gpus = draw(st.sampled_from((2, 4, 8)))
        groups = draw(st.sampled_from(((), (gpus // 2, gpus // 2))))
        nodes.append(
            Node(
                name=f"n{i}",
                cluster=f"c{draw(st.integers(0, 1))}",
                gpu_type=GPU,
                gpus=gpus,
                cpu_m=draw(st.sampled_from((0, 4000, 16000))) if roles else 0,
                topology=MappingProxyType({"zone": "z", "block": "b", "rack": f"r{i % 2}"}),
                nvlink_groups=groups,
            )
        )
    smallest_node = min(n.gpus for n in nodes)
    job_count = draw(st.integers(1, 16))
    queue_count = draw(st.integers(1, 3))
    jobs: list[tuple[float, Job, float]] = []
    max_need = 1
    for i in range(job_count):
        gpus = draw(st.integers(1, smallest_node))
        replicas = draw(st.integers(1, max(1, min(3, _pods_fit(nodes, gpus)))))
        elastic = replicas > 1 and draw(st.booleans())
        max_need = max(max_need, gpus * replicas)
        job = Job(
            job_id=f"j{i}",
            queue=f"q{draw(st.integers(0, queue_count - 1))}",
            submit_time=0.0,
            replicas=replicas,
            min_replicas=draw(st.integers(1, replicas - 1)) if elastic else None,
            gpus_per_pod=gpus,
            priority=draw(st.integers(0, 2)),
            user=draw(st.sampled_from(("u1", "u2"))),
            runtime_estimate=draw(st.one_of(st.none(), st.floats(1.0, 30.0))),
            preemptible=draw(st.booleans()),
            checkpointable=draw(st.booleans()),
            grace_period_s=draw(st.sampled_from((0.0, 2.0))),
            topology=draw(st.sampled_from((None, TopologyRequest("rack", TopologyMode.PREFERRED)))),
            max_runtime_s=draw(st.sampled_from((None, None, 15.0))),
        )
        if roles and draw(st.booleans()):
            whole = replace(job, role="worker", companions=draw(companions(smallest_node)))
            if _fits_empty(nodes, whole):  # a gang that can never be placed would wait for ever
                job = whole
                max_need = max(max_need, job.total_gpus)
        arrival = float(draw(st.integers(0, 20)))
        jobs.append((arrival, job, float(draw(st.integers(1, 20)))))
    queues = []
    for q in range(queue_count):
        in_cohort = draw(st.booleans())
        nominal = draw(st.integers(max_need, 2 * max_need))
        quota = ResourceQuota(
            nominal,
            borrowing_limit=draw(st.one_of(st.none(), st.integers(0, 8))) if in_cohort else None,
            lending_limit=draw(st.one_of(st.none(), st.integers(0, nominal))) if in_cohort else None,
        )
        queues.append(
            QueueSpec(
                name=f"q{q}",
                cohort="c" if in_cohort else None,
                weight=draw(st.sampled_from((1.0, 2.0))),
                quotas=MappingProxyType({f"gpu:{GPU}": quota}),
                user_limit_gpus=draw(st.one_of(st.none(), st.just(max_need))),
            )
        )
    config = SchedulerConfig(
        policy=draw(st.sampled_from(("muster", "muster", "fifo", "priority"))),
        min_runtime_s=5.0,
        default_runtime_estimate_s=10.0,
        fair_share_half_life_s=100.0,
        status_depth=draw(st.sampled_from((2, 100))),
        backfill_depth=draw(st.sampled_from((1, 200))),
        max_admissions_per_cycle=draw(st.sampled_from((1, 1000))),
        max_preemption_attempts=draw(st.sampled_from((0, 1, 16))),
    )
    flaps = (
        [(float(draw(st.integers(0, 40))), f"n{draw(st.integers(0, node_count - 1))}")] if draw(st.booleans()) else []
    )
    return World(nodes, queues, jobs, config, flaps)


RACK_REQUIRED = TopologyRequest("rack", TopologyMode.REQUIRED)
RACK_PREFERRED = TopologyRequest("rack", TopologyMode.PREFERRED)


@st.composite
def companions(draw: st.DrawFn, smallest_node: int) -> tuple[Role, ...]:
    """One or two companion roles: a launcher without GPUs, a head with a GPU or two, a second worker group."""
    kinds = draw(st.lists(st.sampled_from(("launcher", "head", "group")), min_size=1, max_size=2, unique=True))
    out = []
    for kind in kinds:
        topology = draw(st.sampled_from((None, RACK_REQUIRED, RACK_PREFERRED)))
        if kind == "launcher":
            out.append(Role("launcher", 1, 0, cpu_m=draw(st.sampled_from((500, 2000))), topology=topology))
        elif kind == "head":
            out.append(Role("head", 1, draw(st.integers(1, min(2, smallest_node))), cpu_m=1000, topology=topology))
        else:
            out.append(Role("group", draw(st.integers(1, 2)), draw(st.integers(1, smallest_node)), topology=topology))
    return tuple(out)


def _fits_empty(nodes: list[Node], job: Job) -> bool:
    """Whether the whole job, every role, fits on the empty cluster, at its full size and at its minimum (the
    core starts an elastic job from its minimum, and judges whether it can ever run there)."""
    index = CapacityIndex()
    for n in nodes:
        index.add_node(n, ())
    sizes = {job.replicas, job.min_size}
    return all(Placer(index, job).place(GPU, pods, pods) is not None for pods in sizes)


def _pods_fit(nodes: list[Node], gpus: int) -> int:
    """Most pods of ``gpus`` GPUs one cluster can hold when empty (NVLink groups respected)."""

    def per_node(n: Node) -> int:
        if n.nvlink_groups and gpus <= max(n.nvlink_groups):
            return sum(size // gpus for size in n.nvlink_groups)
        return n.gpus // gpus

    return max(sum(per_node(n) for n in nodes if n.cluster == c) for c in {n.cluster for n in nodes})


def check_preemption(state: SchedulerState, d: Preempt) -> None:
    victim = state.running_jobs()[d.job_id]
    assert not victim.terminating
    if d.reason == PreemptReason.PRIORITY.value:
        assert d.preemptor is not None
        preemptor = state.job(d.preemptor)
        assert preemptor is not None and d.preemptor not in state.running_jobs()
        assert preemptor.queue == victim.job.queue and preemptor.priority > victim.job.priority
        assert victim.job.preemptible
    elif d.reason == PreemptReason.RECLAIM.value:
        assert d.preemptor is not None
        preemptor = state.job(d.preemptor)
        assert preemptor is not None and victim.borrowed and preemptor.queue != victim.job.queue
        assert victim.job.preemptible
    elif d.reason == PreemptReason.QUEUE_ORDER.value:
        assert d.preemptor is not None
        preemptor = state.job(d.preemptor)
        assert preemptor is not None and d.preemptor not in state.running_jobs()
        assert preemptor.queue == victim.job.queue and preemptor.priority == victim.job.priority
        assert victim.job.preemptible and victim.job.checkpointable  # nothing is lost but the restart
    elif d.reason == PreemptReason.FAIR_SHARE.value:
        assert d.preemptor is not None
        preemptor = state.job(d.preemptor)
        assert preemptor is not None and victim.borrowed and preemptor.queue != victim.job.queue
        assert victim.job.preemptible and victim.job.priority <= preemptor.priority
    else:
        assert d.reason in (PreemptReason.MAX_RUNTIME.value, PreemptReason.NODE_UNHEALTHY.value)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_random_workloads_respect_invariants_and_complete(world: World) -> None:
    drive(world)


@settings(max_examples=MULTI_ROLE_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(roles=True))
def test_random_multi_role_workloads_respect_invariants_and_complete(world: World) -> None:
    """Jobs of several roles among one-role ones: quota never exceeded, every gang placed whole across its
    roles, no job preempted twice in a cycle, and everything ends."""
    drive(world)


def drive(world: World) -> None:
    state = SchedulerState(queues=world.queues, cohorts=[CohortSpec("c")], nodes=world.nodes, half_life_s=100.0)
    arrivals = sorted(world.jobs, key=lambda e: (e[0], e[1].job_id))
    durations = {job.job_id: d for _, job, d in world.jobs}
    ends: dict[str, float] = {}  # running job -> true end
    stops: dict[str, tuple[float, bool]] = {}  # terminating job -> (stop time, requeue)
    flaps = {t: name for t, name in world.flaps}
    by_name = {n.name: n for n in world.nodes}
    now = 0.0
    preemptions = scales = gangs = 0
    for cycles in range(400):
        while arrivals and arrivals[0][0] <= now:
            _, job, _ = arrivals.pop(0)
            state.submit(replace(job, submit_time=now))
        if now in flaps:
            state.upsert_node(replace(by_name[flaps[now]], healthy=False))
        if now - 10.0 in flaps:
            state.upsert_node(by_name[flaps[now - 10.0]])
        before = snapshot(state) if cycles % 20 == 0 else None
        result = schedule(state, now, world.config)
        quiet = schedule(state, now, world.config, report=False)  # statuses skipped, decisions the same
        if before is not None:  # a cycle only reads the state (it may fill in the node facts: ``NodeFacts``)
            assert snapshot(state) == before
        assert quiet.decisions == result.decisions and not quiet.pending
        preempted = [d.job_id for d in result.decisions if isinstance(d, Preempt)]
        assert len(preempted) == len(set(preempted)), preempted  # no job preempted twice in one cycle
        for d in result.decisions:
            scales += isinstance(d, Scale)
            preemptions += isinstance(d, Preempt)
            if isinstance(d, Preempt):
                check_preemption(state, d)
                stops[d.job_id] = (now + d.grace_period_s, d.requeue)
            state.apply(d, now)
            if isinstance(d, Admit):
                ends[d.job_id] = now + durations[d.job_id]
                gangs += any(a.role for a in d.placement.nodes)
        check_invariants(state)
        now += 1.0
        for job_id, (t, requeue) in list(stops.items()):
            if t <= now:
                state.job_stopped(job_id, now, requeue=requeue)
                ends.pop(job_id, None)
                del stops[job_id]
        for job_id, t in list(ends.items()):
            if t <= now and job_id not in stops:
                state.job_finished(job_id, now)
                del ends[job_id]
        if not arrivals and state.pending_count == 0 and not state.running_jobs() and now > 60:
            break
    assert state.pending_count == 0 and not state.running_jobs(), (state.pending_count, now)
    event(f"preemptions: {min(preemptions, 3)}+")
    event(f"scales: {min(scales, 3)}+")
    event(f"multi-role admissions: {min(gangs, 3)}+")
