"""Capacity freed by preemption is held for its preemptor until it starts, across cycles.

The situation: queue ``qa`` reclaims its nominal quota for ``P`` (4 GPUs) from two borrowing jobs of
``qb``: ``V`` (2 GPUs, grace 0, priority 3) and ``Y`` (3 GPUs, grace 30). ``V`` is requeued at once; once
``Y`` is gone too, ``qb`` runs nothing, so ``V`` fits within ``qb``'s nominal quota and, with its
higher priority, comes before ``P`` in the walk. Were the freed GPUs not held, ``V`` would take two of
them (best fit: the 1-GPU node and one GPU of the big one) and ``P`` would have to preempt ``Z`` too.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from services.core import (
    Admit,
    CycleResult,
    Job,
    NodeAssignment,
    PendingReason,
    Placement,
    Preempt,
    PreemptReason,
    SchedulerConfig,
    SchedulerState,
)

from .builders import admitted, check_invariants, cycle, job, node, queue, state

CFG = SchedulerConfig(min_runtime_s=100.0)
T = 1000.0  # P arrives and preempts; V (grace 0) is gone at once, Y (grace 30) at T + 30


def _run(st: SchedulerState, j: Job, nodes: dict[str, int], at: float) -> None:
    """``j`` running on ``nodes`` since ``at``, on borrowed quota."""
    st.submit(j)
    placement = Placement("c1", tuple(NodeAssignment(n, pods) for n, pods in nodes.items()))
    st.apply(Admit(j.job_id, j.attempt, placement, j.replicas, borrowed=True), at)


def _preempts(result: CycleResult) -> dict[str, Preempt]:
    return {d.job_id: d for d in result.decisions if isinstance(d, Preempt)}


def _situation(extra_queue: bool = False) -> SchedulerState:
    """9 GPUs (``n0`` 1, ``n1`` 8), all taken by borrowed work; ``P`` has just preempted ``V`` and ``Y``
    and ``V`` is requeued. With ``extra_queue``, a queue ``qd`` (nominal 2) and its 2-GPU node ``n2``
    held by more borrowed work of ``qc``."""
    queues = [queue("qa", 4, cohort="c"), queue("qb", 2, cohort="c"), queue("qc", 3, cohort="c")]
    nodes = [node("n0", 1), node("n1", 8)]
    if extra_queue:
        queues.append(queue("qd", 2, cohort="c"))
        nodes.append(node("n2", 2))
    st = state(queues, nodes)
    _run(st, job("Z", "qc", replicas=4, priority=5), {"n1": 4}, 0)
    if extra_queue:
        _run(st, job("Z2", "qc", replicas=2, priority=5), {"n2": 2}, 0)
    _run(st, job("Y", "qb", replicas=3, priority=3, grace_period_s=30), {"n0": 1, "n1": 2}, 50)
    _run(st, job("V", "qb", replicas=2, priority=3, grace_period_s=0), {"n1": 2}, 100)
    check_invariants(st)
    st.submit(job("P", "qa", T, replicas=4))
    first = cycle(st, T, CFG)
    assert {j: (d.reason, d.preemptor) for j, d in _preempts(first).items()} == {
        "V": (PreemptReason.RECLAIM.value, "P"),
        "Y": (PreemptReason.RECLAIM.value, "P"),
    }
    st.job_stopped("V", T)  # grace 0: requeued at once, borrowing again while Y still holds qb's quota
    return st


def _nothing(st: SchedulerState) -> None:
    pass


def _cancel(st: SchedulerState) -> None:
    st.cancel("P")


def _suspend(st: SchedulerState) -> None:
    st.suspend("P")


def _raise_priority(st: SchedulerState) -> None:
    st.set_priority("P", 1)


@pytest.mark.parametrize(
    ("before_next_cycle", "p_starts", "v_starts"),
    [
        (_nothing, True, False),  # held: P starts in the GPUs it freed, V does not take them
        (_cancel, False, True),  # the hold goes with its preemptor
        (_suspend, False, True),
        (_raise_priority, True, False),  # still waiting: still held
    ],
    ids=["held", "cancelled", "suspended", "priority changed"],
)
def test_a_requeued_victim_does_not_take_the_gpus_freed_for_its_preemptor(
    before_next_cycle: Callable[[SchedulerState], None], p_starts: bool, v_starts: bool
) -> None:
    st = _situation()
    stopping = cycle(st, T, CFG)  # Y still stopping: nothing starts, nothing more is preempted
    assert admitted(stopping) == set() and _preempts(stopping) == {}
    assert stopping.pending["P"].reason is PendingReason.PREEMPTING
    st.job_stopped("Y", T + 30)
    assert sum(g for g, _, _ in st.freed_for["P"].values()) == 5  # V's 2 GPUs and Y's 3
    before_next_cycle(st)
    nxt = cycle(st, T + 30, CFG)
    check_invariants(st)
    assert ("P" in admitted(nxt)) is p_starts
    assert ("V" in admitted(nxt)) is v_starts
    assert all(d.preemptor != "P" for d in _preempts(nxt).values())  # no further preemption for P
    if p_starts:
        placed = {a.node: a.pods for a in st.running_jobs()["P"].placement.nodes}
        assert sum(placed.values()) == 4 and set(placed) <= {"n0", "n1"}
        # V, now within qb's nominal quota, reclaims its GPUs elsewhere (Z borrows from qc)
        assert {j: d.preemptor for j, d in _preempts(nxt).items()} == {"Z": "V"}
    else:
        assert "Z" not in _preempts(nxt)  # V went into the freed GPUs; nothing else moved
    assert "P" not in st.freed_for  # started or gone: nothing is held for it any more


def test_a_newcomer_ahead_in_order_does_not_take_gpus_freed_for_a_preemptor_whose_victims_still_stop() -> None:
    """``H`` (priority 1, within its queue's nominal quota) arrives while ``Y`` still stops: it would come
    before ``P`` in the walk and take the two GPUs ``V`` freed. It reclaims its own instead, and ``P``
    starts when ``Y`` is gone, without a further victim."""
    st = _situation(extra_queue=True)
    st.submit(job("H", "qd", T, replicas=2, priority=1))
    stopping = cycle(st, T, CFG)
    assert "H" not in admitted(stopping)
    assert {j: d.preemptor for j, d in _preempts(stopping).items()} == {"Z": "H"}
    assert stopping.pending["P"].reason is PendingReason.PREEMPTING
    assert stopping.pending["P"].estimated_start == T + 30
    st.job_stopped("Y", T + 30)
    nxt = cycle(st, T + 30, CFG)  # Z, H's victim, is still stopping
    check_invariants(st)
    assert admitted(nxt) == {"P"}
    assert all(d.preemptor != "P" for d in _preempts(nxt).values())
    assert nxt.pending["H"].reason is PendingReason.PREEMPTING
    st.job_stopped("Z", T + 30)
    assert "H" in admitted(cycle(st, T + 30, CFG))
    check_invariants(st)


def test_what_a_preemptor_no_longer_fits_in_is_not_held() -> None:
    """One victim is gone, the node of the other fails before the preemptor could start: it no longer
    fits, so it holds nothing, and the requeued victim, behind it in order, gets its GPUs back."""
    st = state([queue("q", 16)], [node("a", 4), node("b", 4)],
               [job("low1", gpus_per_pod=4, grace_period_s=0), job("low2", gpus_per_pod=4, grace_period_s=30)])
    cycle(st, 0, CFG)
    st.submit(job("high", "q", 200, replicas=2, gpus_per_pod=4, priority=5))
    assert _preempts(cycle(st, 200, CFG)).keys() == {"low1", "low2"}
    st.job_stopped("low1", 200)
    assert st.freed_for["high"] == {"a": (4, 0, 0)}
    held = cycle(st, 201, CFG)
    assert admitted(held) == set() and held.pending["high"].reason is PendingReason.PREEMPTING
    st.upsert_node(node("b", 4, healthy=False, unhealthy_since=202.0))
    st.job_stopped("low2", 202)
    result = cycle(st, 202, CFG)
    assert admitted(result) == {"low1"}
    assert result.pending["high"].reason is PendingReason.CAPACITY
    check_invariants(st)
