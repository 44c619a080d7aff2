"""Fair-share preemption: a queue under its fair share takes GPUs back from a queue over it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from services.core import CohortSpec, Preempt, PreemptReason, SchedulerConfig, SchedulerState

from .builders import admitted, check_invariants, cycle, job, node, queue

CFG = SchedulerConfig(min_runtime_s=100.0, backfill=False, queue_order="submit")
SHARED = [CohortSpec("c")]


def teams(a_weight: float = 1.0, b_weight: float = 1.0) -> SchedulerState:
    """team-a and team-b own no quota; the cohort's 16 GPUs belong to an idle lender queue."""
    queues = [
        queue("pool", 16, cohort="c"),
        queue("team-a", 0, cohort="c", weight=a_weight),
        queue("team-b", 0, cohort="c", weight=b_weight),
    ]
    return SchedulerState(queues=queues, cohorts=SHARED, nodes=[node("n1"), node("n2")], half_life_s=3600.0)


def fill_with_team_a(st: SchedulerState, checkpointable: tuple[bool, bool] = (False, True)) -> None:
    for i, ckpt in enumerate(checkpointable):
        st.submit(job(f"a{i}", "team-a", gpus_per_pod=8, submit=i, checkpointable=ckpt))
    assert admitted(cycle(st, 0, CFG)) == {"a0", "a1"}


def preempts(st: SchedulerState, now: float, cfg: SchedulerConfig = CFG) -> dict[str, Preempt]:
    return {d.job_id: d for d in cycle(st, now, cfg).decisions if isinstance(d, Preempt)}


def test_an_under_share_queue_takes_back_a_whole_gang_checkpointable_first() -> None:
    st = teams()
    fill_with_team_a(st)
    st.submit(job("b0", "team-b", gpus_per_pod=8, submit=10))
    (victim,) = preempts(st, 200).values()
    assert victim.job_id == "a1" and victim.reason == PreemptReason.FAIR_SHARE.value and victim.preemptor == "b0"
    st.job_stopped("a1", 230)
    assert admitted(cycle(st, 231, CFG)) == {"b0"}
    check_invariants(st)


def test_the_gpus_do_not_go_straight_back() -> None:
    st = teams()
    fill_with_team_a(st)
    st.submit(job("b0", "team-b", gpus_per_pod=8, submit=10))
    preempts(st, 200)
    st.job_stopped("a1", 230)
    cycle(st, 231, CFG)
    # a1 waits again; team-a (8 GPUs) is not under team-b's share (8 GPUs): no preemption either way
    assert preempts(st, 1000) == {}


@pytest.mark.parametrize(
    ("why", "cfg", "young", "b_priority"),
    [
        ("fair-share preemption is off", replace(CFG, fair_share_preemption=False), False, 0),
        ("fair share is off", replace(CFG, fair_share=False), False, 0),
        ("the victims are younger than the minimum runtime", CFG, True, 0),
        ("the victims have higher priority", CFG, False, -1),
    ],
)
def test_no_fair_share_preemption(why: str, cfg: SchedulerConfig, young: bool, b_priority: int) -> None:
    st = teams()
    fill_with_team_a(st)
    st.submit(job("b0", "team-b", gpus_per_pod=8, submit=10, priority=b_priority))
    assert preempts(st, 50 if young else 200, cfg) == {}, why


def test_within_tolerance_nothing_moves() -> None:
    """team-b already holds 8 of 16: one more gang would take it past team-a, so nothing is preempted."""
    st = teams()
    st.submit(job("a0", "team-a", gpus_per_pod=8))
    st.submit(job("b0", "team-b", gpus_per_pod=8, submit=1))
    cycle(st, 0, CFG)
    st.submit(job("b1", "team-b", gpus_per_pod=4, submit=2))
    assert preempts(st, 500) == {}


def test_weights_set_the_fair_share() -> None:
    """With weight 3 against 1, team-a's 12 of 16 GPUs are its fair share: team-b cannot take more."""
    st = teams(a_weight=3.0)
    for i in range(3):
        st.submit(job(f"a{i}", "team-a", gpus_per_pod=4, submit=i, checkpointable=True))
    st.submit(job("b0", "team-b", gpus_per_pod=4, submit=3))
    assert admitted(cycle(st, 0, CFG)) == {"a0", "a1", "a2", "b0"}
    st.submit(job("b1", "team-b", gpus_per_pod=4, submit=4))
    assert preempts(st, 500) == {}
    st2 = teams(a_weight=1.0)  # equal weights: team-b gets one of team-a's gangs back
    for i in range(3):
        st2.submit(job(f"a{i}", "team-a", gpus_per_pod=4, submit=i, checkpointable=True))
    st2.submit(job("b0", "team-b", gpus_per_pod=4, submit=3))
    cycle(st2, 0, CFG)
    st2.submit(job("b1", "team-b", gpus_per_pod=4, submit=4))
    assert [p.reason for p in preempts(st2, 500).values()] == [PreemptReason.FAIR_SHARE.value]


@settings(max_examples=40, deadline=None)
@given(
    a_jobs=st_.lists(st_.sampled_from([2, 4, 8]), min_size=1, max_size=6),
    b_jobs=st_.lists(st_.sampled_from([2, 4, 8]), min_size=1, max_size=6),
)
def test_fair_share_preemption_settles(a_jobs: list[int], b_jobs: list[int]) -> None:
    """Whatever the mix, repeated cycles stop preempting for fairness: no job is preempted twice, and the
    loop goes quiet (no ping-pong). Besides fair share, a job may be moved once to make room for a gang
    that fragmentation alone keeps out (consolidation, e.g. a 2-GPU job of each team on both nodes)."""
    st = teams()
    for i, g in enumerate(a_jobs):
        st.submit(job(f"a{i}", "team-a", gpus_per_pod=g, submit=i, checkpointable=True))
    cycle(st, 0, CFG)
    for i, g in enumerate(b_jobs):
        st.submit(job(f"b{i}", "team-b", gpus_per_pod=g, submit=100 + i, checkpointable=True))
    preempted: dict[str, int] = {}
    now = 200.0
    for _ in range(12):
        result = cycle(st, now, CFG)
        for d in result.decisions:
            if isinstance(d, Preempt):
                assert d.reason in (PreemptReason.FAIR_SHARE.value, PreemptReason.CONSOLIDATION.value)
                preempted[d.job_id] = preempted.get(d.job_id, 0) + 1
        for jid, rj in list(st.running.items()):
            if rj.terminating:
                st.job_stopped(jid, now + 1)
        now += 150.0
        check_invariants(st)
    assert all(n == 1 for n in preempted.values()), preempted
