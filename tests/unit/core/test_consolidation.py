"""Consolidation: a gang held back only by fragmentation gets whole nodes by moving a few small
checkpointable jobs, which fit again elsewhere; never young, unmovable or about-to-end jobs, and never
more moves than the bound."""

from __future__ import annotations

from dataclasses import replace

from services.core import Admit, CycleResult, PendingReason, Preempt, PreemptReason, SchedulerConfig, SchedulerState

from .builders import admitted, check_invariants, cycle, job, node, queue, state

CFG = SchedulerConfig(min_runtime_s=100.0, backfill=False)


def preempts(result: CycleResult) -> dict[str, Preempt]:
    return {d.job_id: d for d in result.decisions if isinstance(d, Preempt)}


def fragmented(
    *, checkpointable: bool = True, estimate: float | None = None, sizes: tuple[int, ...] = (4, 4)
) -> SchedulerState:
    """Nodes n0, n1, ... of ``sizes`` GPUs; 2-GPU jobs a, b on n0 and c, d on n1, then b and c end:
    2 GPUs free on each of n0 and n1, none of them usable by a 4-GPU pod."""
    st = state([queue("q", sum(sizes))], [node(f"n{i}", g) for i, g in enumerate(sizes)])
    for name in "abcd":
        st.submit(job(name, gpus_per_pod=2, checkpointable=checkpointable, runtime_estimate=estimate))
    cycle(st, 0, CFG)
    nodes = {j: rj.placement.nodes[0].node for j, rj in st.running_jobs().items()}
    assert nodes == {"a": "n0", "b": "n0", "c": "n1", "d": "n1"}, nodes
    st.job_finished("b", 50)
    st.job_finished("c", 50)
    return st


def test_a_small_job_moves_so_the_gang_gets_a_whole_node_and_both_run() -> None:
    st = fragmented()
    st.submit(job("gang", gpus_per_pod=4, submit=200))
    result = cycle(st, 200, CFG)
    assert preempts(result) == {
        "a": Preempt("a", 0, PreemptReason.CONSOLIDATION.value, 30.0, preemptor="gang", requeue=True)
    }
    assert result.pending["gang"].reason is PendingReason.PREEMPTING
    assert admitted(result) == set()
    st.job_stopped("a", 230)
    after = cycle(st, 230, CFG)
    assert admitted(after) == {"gang", "a"}  # the moved job fits again at once
    placed = {d.job_id: [a.node for a in d.placement.nodes] for d in after.decisions if isinstance(d, Admit)}
    assert placed == {"gang": ["n0"], "a": ["n1"]}
    moved = st.job("a")
    assert moved is not None and moved.attempt == 1
    check_invariants(st)


def test_nothing_moves_without_fragmentation_or_when_it_is_switched_off() -> None:
    st = fragmented()
    st.submit(job("gang", gpus_per_pod=4, submit=200))
    assert preempts(cycle(st, 200, replace(CFG, consolidation=False))) == {}
    big = fragmented()
    big.submit(job("too-big", gpus_per_pod=4, replicas=2, submit=200))  # 8 GPUs, 4 free in all
    assert preempts(cycle(big, 200, CFG)) == {}


def test_only_checkpointable_preemptible_jobs_past_their_minimum_runtime_move() -> None:
    st = fragmented(checkpointable=False)
    st.submit(job("gang", gpus_per_pod=4, submit=200))
    assert preempts(cycle(st, 200, CFG)) == {}
    young = fragmented()
    young.submit(job("gang", gpus_per_pod=4, submit=60))
    result = cycle(young, 60, CFG)  # a and d started at 0: protected until 100
    assert preempts(result) == {} and result.pending["gang"].reason is PendingReason.CAPACITY


def test_no_move_when_the_moved_job_ends_soon_anyway() -> None:
    # estimate 250 s: at 200 each 2-GPU job has about 50 s left; 4 GPUs x 50 s < 2 GPUs x 300 s a move costs
    st = fragmented(estimate=250.0)
    st.submit(job("gang", gpus_per_pod=4, submit=200))
    assert preempts(cycle(st, 200, CFG)) == {}


def test_no_move_when_the_moved_jobs_would_not_fit_again() -> None:
    # n0 holds a 3-GPU job, n1 a 2-GPU one, n2 a 3-GPU one: 4 GPUs free in all, 1 + 2 + 1. A 4-GPU pod
    # fits only if one of them moves, and none of them fits anywhere else once the pod is placed
    st = state([queue("q", 12)], [node("n0", 4), node("n1", 4), node("n2", 4)])
    for name, gpus in (("a", 3), ("d", 2), ("e", 3)):
        st.submit(job(name, gpus_per_pod=gpus, checkpointable=True))
    cycle(st, 0, CFG)
    assert sorted(rj.gpus for rj in st.running_jobs().values()) == [2, 3, 3]
    st.submit(job("gang", gpus_per_pod=4, submit=200))
    result = cycle(st, 200, CFG)
    assert preempts(result) == {} and result.pending["gang"].reason is PendingReason.CAPACITY


def test_moves_per_cycle_are_bounded() -> None:
    # each 4-GPU node of four holds one 2-GPU job: a 2 x 4-GPU gang needs two of them to move
    st = state([queue("q", 16)], [node(f"n{i}", 4) for i in range(4)])
    for i in range(8):
        st.submit(job(f"j{i}", gpus_per_pod=2, checkpointable=True))
    cycle(st, 0, CFG)
    for i in (1, 3, 5, 7):
        st.job_finished(f"j{i}", 50)
    st.submit(job("gang", gpus_per_pod=4, replicas=2, submit=200))
    assert preempts(cycle(st, 200, replace(CFG, consolidation_max_moves=1))) == {}
    moved = preempts(cycle(st, 200, CFG))
    assert len(moved) == 2 and {d.reason for d in moved.values()} == {PreemptReason.CONSOLIDATION.value}
    check_invariants(st)
