"""Elastic jobs: start at min (more if idle), grow when nothing else could use the capacity, shrink first."""

from __future__ import annotations

from services.core import (
    Admit,
    PendingReason,
    Preempt,
    Scale,
    SchedulerConfig,
    TopologyMode,
    TopologyRequest,
    schedule,
)

from .builders import check_invariants, cycle, job, node, queue, state

CFG = SchedulerConfig(min_runtime_s=0.0, backfill=False)


def test_starts_with_all_replicas_when_idle() -> None:
    st = state([queue("q", 16)], [node("n1"), node("n2")], [job("e", gpus_per_pod=4, replicas=4, min_replicas=1)])
    (d,) = cycle(st, 0, CFG).decisions
    assert isinstance(d, Admit) and d.replicas == 4 and d.placement.pods == 4
    check_invariants(st)


def test_starts_at_min_when_others_wait_and_grows_later() -> None:
    st = state([queue("q", 32)], [node("n1"), node("n2")])
    st.submit(job("e", gpus_per_pod=4, replicas=4, min_replicas=1, priority=5))
    st.submit(job("big", gpus_per_pod=8, replicas=2, submit=1))  # cannot fit next to e
    result = cycle(st, 0, CFG)
    (d,) = result.decisions
    assert isinstance(d, Admit) and d.replicas == 1  # big wants the GPUs: no growth
    assert result.pending["big"].reason is PendingReason.CAPACITY
    st.cancel("big")
    (grow,) = cycle(st, 1, CFG).decisions
    assert isinstance(grow, Scale) and grow.replicas == 4 and grow.placement.pods == 4
    assert st.running_jobs()["e"].replicas == 4
    assert cycle(st, 2, CFG).decisions == ()  # idempotent: already at full size
    check_invariants(st)


def test_growth_respects_quota() -> None:
    st = state([queue("q", 8)], [node("n1"), node("n2")], [job("e", gpus_per_pod=2, replicas=8, min_replicas=2)])
    (d,) = cycle(st, 0, CFG).decisions
    assert isinstance(d, Admit) and d.replicas == 4
    check_invariants(st)


def test_shrinks_before_preempting() -> None:
    st = state([queue("q", 16)], [node("n1"), node("n2")])
    st.submit(job("e", gpus_per_pod=4, replicas=4, min_replicas=1))
    st.submit(job("other", gpus_per_pod=4, priority=0, submit=0.5))
    cycle(st, 0, CFG)
    assert st.running_jobs()["e"].replicas == 3
    st.submit(job("high", gpus_per_pod=8, priority=9, submit=1))
    result = cycle(st, 10, CFG)
    assert not any(isinstance(d, Preempt) for d in result.decisions)
    (d,) = result.decisions
    assert isinstance(d, Scale) and d.replicas == 1 and d.placement.pods == 1
    assert result.pending["high"].reason is PendingReason.PREEMPTING
    result = cycle(st, 11, CFG)
    assert any(isinstance(x, Admit) and x.job_id == "high" for x in result.decisions)
    check_invariants(st)


def test_elastic_disabled_never_grows() -> None:
    st = state([queue("q", 16)], [node("n1"), node("n2")], [job("e", gpus_per_pod=4, replicas=4, min_replicas=1)])
    (d,) = cycle(st, 0, SchedulerConfig(elastic=False)).decisions
    assert isinstance(d, Admit) and d.replicas == 1
    assert cycle(st, 1, SchedulerConfig(elastic=False)).decisions == ()


def test_growth_stays_inside_required_topology_domain() -> None:
    nodes = [node("a1", 4, rack="r1"), node("a2", 4, rack="r1"), node("b1", 8, rack="r2")]
    rack = TopologyRequest("rack", TopologyMode.REQUIRED)
    st = state([queue("q", 64)], nodes)
    st.submit(job("filler", gpus_per_pod=6))  # best fit puts it on b1, leaving 2 GPUs there
    cycle(st, 0, CFG)
    st.submit(job("e", gpus_per_pod=2, replicas=6, min_replicas=1, topology=rack, submit=1))
    (d,) = cycle(st, 1, CFG).decisions
    assert isinstance(d, Admit)
    used = {a.node for a in d.placement.nodes}
    assert used <= {"a1", "a2"} or used <= {"b1"}
    assert d.replicas == (4 if used <= {"a1", "a2"} else 1)
    check_invariants(st)


def test_a_cycle_that_skips_statuses_still_keeps_growth_away_from_waiting_jobs() -> None:
    """Queue ``r`` stops deciding after its blocked head (backfill depth 1); the job behind it is walked
    only for its status, yet what it wants must still hold elastic growth back when statuses are skipped."""
    cfg = SchedulerConfig(min_runtime_s=0.0, backfill=False, backfill_depth=1, queue_order="submit")
    st = state([queue("q", 32), queue("r", 8)], [node("n1"), node("n2")])
    st.submit(job("e", gpus_per_pod=4, replicas=4, min_replicas=1, priority=5))
    st.submit(job("big", gpus_per_pod=8, replicas=2, submit=1))
    cycle(st, 0, cfg)
    st.cancel("big")
    st.submit(job("r-head", "r", gpus_per_pod=8, replicas=2, submit=2))  # above r's quota
    st.submit(job("r-next", "r", gpus_per_pod=8, submit=3))  # not tried: r's backfill depth is spent
    quiet = schedule(st, 1, cfg, report=False)
    full = schedule(st, 1, cfg)
    assert quiet.decisions == full.decisions == ()  # r-next wants the idle GPUs: e does not grow into them
    assert full.pending["r-next"].reason is PendingReason.QUEUED and quiet.pending == {}
