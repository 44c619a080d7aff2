"""Ordering: priority, fair share with weights and history, starvation, and the FIFO baseline."""

from __future__ import annotations

from services.core import Admit, CycleResult, PendingReason, SchedulerConfig, SchedulerState, schedule

from .builders import admitted, cycle, job, node, queue, state


def order(result: CycleResult) -> list[str]:
    return [d.job_id for d in result.decisions if isinstance(d, Admit)]


def two_queues(weight_b: float = 1.0) -> SchedulerState:
    qs = [queue("a", 4, cohort="c"), queue("b", 4, cohort="c", weight=weight_b)]
    return state(qs, [node("n", 4)])


def test_priority_first_across_queues() -> None:
    st = two_queues()
    st.submit(job("a-low", "a", gpus_per_pod=4, submit=0))
    st.submit(job("b-high", "b", gpus_per_pod=4, priority=5, submit=1))
    assert order(cycle(st, 10)) == ["b-high"]


def test_fair_share_prefers_queue_with_less_usage() -> None:
    st = two_queues()
    st.set_usage("a", 4 * 3600.0 * 24, as_of=0.0)  # a used a lot recently
    st.submit(job("a1", "a", gpus_per_pod=4, submit=0))
    st.submit(job("b1", "b", gpus_per_pod=4, submit=1))
    assert order(cycle(st, 10)) == ["b1"]
    no_fs = two_queues()
    no_fs.set_usage("a", 4 * 3600.0 * 24, as_of=0.0)
    no_fs.submit(job("a1", "a", gpus_per_pod=4, submit=0))
    no_fs.submit(job("b1", "b", gpus_per_pod=4, submit=1))
    assert order(cycle(no_fs, 10, SchedulerConfig(policy="priority"))) == ["a1"]


def test_weights_scale_shares() -> None:
    st = state([queue("a", 8, cohort="c"), queue("b", 8, cohort="c", weight=4.0)], [node("n", 8)])
    st.submit(job("a0", "a", gpus_per_pod=2, submit=0))
    st.submit(job("b0", "b", gpus_per_pod=2, submit=0.5))
    cycle(st, 1)  # both queues now hold 2 GPUs
    st.submit(job("a1", "a", gpus_per_pod=4, submit=2))
    st.submit(job("b1", "b", gpus_per_pod=4, submit=3))
    assert order(cycle(st, 10)) == ["b1"]  # same usage, b weighs 4x: lower weighted share


def test_fair_share_interleaves_queues_within_one_cycle() -> None:
    st = state([queue("a", 8, cohort="c"), queue("b", 8, cohort="c")], [node("n", 8)])
    for i in range(4):
        st.submit(job(f"a{i}", "a", gpus_per_pod=1, submit=i))
        st.submit(job(f"b{i}", "b", gpus_per_pod=1, submit=10 + i))
    assert order(cycle(st, 20))[:4] == ["a0", "b0", "a1", "b1"]


def test_starving_job_goes_ahead_of_fair_share() -> None:
    st = two_queues()
    st.set_usage("a", 4 * 3600.0 * 24 * 30, as_of=0.0)
    st.submit(job("a-old", "a", gpus_per_pod=4, submit=0))
    st.submit(job("b-new", "b", gpus_per_pod=4, submit=100))
    cfg = SchedulerConfig(starvation_age_s=50.0)
    assert order(cycle(st, 101, cfg)) == ["a-old"]


def test_decayed_usage_is_integrated_and_halves() -> None:
    st = state([queue("a", 8)], [node("n", 8)], half_life_s=100.0)
    st.submit(job("x", "a", gpus_per_pod=8))
    cycle(st, 0)
    st.job_finished("x", 100.0)
    expected = 8 * (100.0 / 0.6931471805599453) * 0.5
    assert abs(st.decayed_usage("a", 100.0) - expected) < 1e-6
    assert abs(st.decayed_usage("a", 200.0) - expected / 2) < 1e-6


def test_inside_a_queue_priority_then_submit_time() -> None:
    st = state([queue("q", 1)], [node("n", 8)])
    st.submit(job("first", submit=0))
    st.submit(job("urgent", priority=3, submit=5))
    result = cycle(st, 10)
    assert order(result) == ["urgent"]
    assert result.pending["first"].position == 0


def test_fifo_global_is_strict_by_submit_time() -> None:
    st = state([queue("a", 8, cohort="c"), queue("b", 8, cohort="c")], [node("n", 8)])
    st.submit(job("j0", "a", gpus_per_pod=4, submit=0))
    st.submit(job("j1", "b", gpus_per_pod=8, submit=1, priority=100))
    st.submit(job("j2", "a", gpus_per_pod=2, submit=2))
    result = cycle(st, 10, SchedulerConfig(policy="fifo-global"))
    assert order(result) == ["j0"]  # j1 blocks everyone behind it, priority ignored, no backfill
    assert result.pending["j1"].reason is PendingReason.CAPACITY
    assert result.pending["j2"].reason is PendingReason.QUEUED
    st.job_finished("j0", 20)
    assert admitted(cycle(st, 20, SchedulerConfig(policy="fifo-global"))) == {"j1"}


def test_fifo_blocks_only_the_queue_of_its_blocked_head() -> None:
    st = state([queue("a", 8, cohort="c"), queue("b", 8, cohort="c")], [node("n", 8)])
    st.submit(job("j0", "a", gpus_per_pod=4, submit=0))
    st.submit(job("j1", "b", gpus_per_pod=8, submit=1))
    st.submit(job("j2", "a", gpus_per_pod=2, submit=2))
    st.submit(job("j3", "b", gpus_per_pod=1, submit=3))
    st.submit(job("j4", "a", gpus_per_pod=4, submit=4))
    result = cycle(st, 10, SchedulerConfig(policy="fifo"))
    assert order(result) == ["j0", "j2"]  # b's head j1 blocks j3 only; a goes on until j4 does not fit
    assert result.pending["j1"].reason is PendingReason.CAPACITY and result.pending["j1"].position == 0
    assert result.pending["j3"].reason is PendingReason.QUEUED and result.pending["j3"].position == 1
    assert result.pending["j4"].reason is PendingReason.CAPACITY
    quiet = schedule(st, 10, SchedulerConfig(policy="fifo"), report=False)
    assert quiet.decisions == ()


def test_fifo_never_preempts_or_grows() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    st.submit(job("e", gpus_per_pod=2, replicas=4, min_replicas=1))
    fifo = SchedulerConfig(policy="fifo", min_runtime_s=0)
    (d,) = cycle(st, 0, fifo).decisions
    assert isinstance(d, Admit) and d.replicas == 1
    st.submit(job("high", gpus_per_pod=8, priority=9, submit=1))
    assert cycle(st, 100, fifo).decisions == ()


def test_max_admissions_per_cycle() -> None:
    st = state([queue("q", 8)], [node("n", 8)], [job(f"j{i}", submit=i) for i in range(5)])
    result = cycle(st, 10, SchedulerConfig(max_admissions_per_cycle=2))
    assert order(result) == ["j0", "j1"]
    assert result.pending["j2"].reason is PendingReason.QUEUED and result.pending["j2"].position == 0
    assert order(cycle(st, 11, SchedulerConfig(max_admissions_per_cycle=2))) == ["j2", "j3"]


def test_a_cycle_without_statuses_stops_walking_only_when_nothing_later_could_be_admitted() -> None:
    """Every GPU is taken and a GPU job is blocked, yet a job asking for no GPU waits further down:
    a cycle that skips statuses must still walk to it and admit it, exactly as a reporting cycle does."""
    cfg = SchedulerConfig(min_runtime_s=0.0, backfill=False, preemption=False)
    st = state([queue("q", 16)], [node("n", 8)], [job("fill", gpus_per_pod=8, priority=5)])
    assert admitted(cycle(st, 0, cfg)) == {"fill"}
    st.submit(job("gpu", gpus_per_pod=1, priority=3, submit=1))
    st.submit(job("cpu-only", gpus_per_pod=0, cpu_m=500, submit=2))
    quiet = schedule(st, 1, cfg, report=False)
    full = schedule(st, 1, cfg)
    assert admitted(quiet) == admitted(full) == {"cpu-only"}
    st.cancel("cpu-only")
    assert schedule(st, 2, cfg, report=False).decisions == ()  # the walk may end at the blocked GPU job
