"""Priority preemption, quota reclaim, victim choice, protection rules, max runtime and max wait."""

from __future__ import annotations

from dataclasses import replace

from services.core import (
    Admit,
    CycleResult,
    PendingReason,
    Preempt,
    PreemptReason,
    Reject,
    SchedulerConfig,
    SchedulerState,
)

from .builders import admitted, check_invariants, cycle, job, node, queue, state

CFG = SchedulerConfig(min_runtime_s=100.0, backfill=False)


def preempts(result: CycleResult) -> dict[str, Preempt]:
    return {d.job_id: d for d in result.decisions if isinstance(d, Preempt)}


def test_higher_priority_preempts_lower_in_same_queue_then_starts() -> None:
    st = state([queue("q", 8)], [node("n", 8)], [job("low", gpus_per_pod=8, priority=0, grace_period_s=45)])
    cycle(st, 0, CFG)
    st.submit(job("high", gpus_per_pod=8, priority=10, submit=1))
    result = cycle(st, 200, CFG)
    assert preempts(result) == {
        "low": Preempt("low", 0, PreemptReason.PRIORITY.value, 45, preemptor="high", requeue=True)
    }
    info = result.pending["high"]
    assert info.reason is PendingReason.PREEMPTING and info.estimated_start == 245
    assert st.running_jobs()["low"].terminating
    again = cycle(st, 210, CFG)  # victim still stopping: nothing new
    assert preempts(again) == {} and again.pending["high"].reason is PendingReason.PREEMPTING
    st.job_stopped("low", 240)
    assert admitted(cycle(st, 241, CFG)) == {"high"}
    low = st.job("low")
    assert low is not None and low.attempt == 1 and low.submit_time == 0.0
    check_invariants(st)


def test_no_preemption_of_equal_priority_other_queue_or_protected_jobs() -> None:
    nodes = [node("n", 8)]
    st = state(
        [queue("q", 8, cohort="c"), queue("other", 8, cohort="c")],
        nodes,
        [
            job("same", gpus_per_pod=2, priority=5),
            job("fixed", gpus_per_pod=2, priority=0, preemptible=False),
            job("young", gpus_per_pod=2, priority=0, submit=1),
            job("foreign", "other", gpus_per_pod=2, priority=0),
        ],
    )
    cycle(st, 0, CFG)
    st.job_finished("young", 150)
    st.submit(job("young2", gpus_per_pod=2, priority=0, submit=150))
    cycle(st, 150, CFG)  # young2 starts at 150: protected by min runtime until 250
    st.submit(job("high", gpus_per_pod=4, priority=5, submit=160))
    result = cycle(st, 200, CFG)
    assert preempts(result) == {}
    assert result.pending["high"].reason in (PendingReason.QUEUE_QUOTA, PendingReason.CAPACITY)
    late = cycle(st, 260, CFG)  # now young2 is old enough, but alone it is not enough (needs 4)
    assert preempts(late) == {}


def test_victims_are_fewest_and_cheapest() -> None:
    jobs = [
        job("p1-old", gpus_per_pod=2, priority=1, submit=0),
        job("p1-new", gpus_per_pod=2, priority=1, submit=1),
        job("p0-ckpt", gpus_per_pod=2, priority=0, submit=2, checkpointable=True),
        job("p0-big", gpus_per_pod=2, replicas=1, priority=0, submit=3),
    ]
    st = state([queue("q", 8)], [node("n", 8)], jobs)
    cycle(st, 0, CFG)
    st.submit(job("high", gpus_per_pod=4, priority=9, submit=10))
    assert set(preempts(cycle(st, 500, CFG))) == {"p0-ckpt", "p0-big"}


def test_only_enough_victims_are_taken() -> None:
    jobs = [job("small", gpus_per_pod=2, priority=0), job("large", gpus_per_pod=6, priority=1, submit=1)]
    st = state([queue("q", 8)], [node("n", 8)], jobs)
    cycle(st, 0, CFG)
    st.submit(job("high", gpus_per_pod=6, priority=9, submit=10))
    # greedy order takes "small" first, but it alone is not enough; pruning drops it again
    assert set(preempts(cycle(st, 500, CFG))) == {"large"}


def test_victim_choice_prefers_checkpointable_then_most_recent() -> None:
    st = state([queue("q", 8)], [node("n", 8)])
    for i, (name, ckpt) in enumerate([("a", False), ("b", False), ("c", True), ("d", False)]):
        st.submit(job(name, gpus_per_pod=2, submit=i, checkpointable=ckpt))
        cycle(st, float(i), CFG)
    st.submit(job("high", gpus_per_pod=2, priority=3, submit=10))
    assert set(preempts(cycle(st, 500, CFG))) == {"c"}
    st.submit(job("high2", gpus_per_pod=2, priority=3, submit=11))
    assert set(preempts(cycle(st, 501, CFG))) == {"d"}  # most recently started of the rest


def test_reclaim_borrowed_capacity_for_queue_below_nominal() -> None:
    qs = [queue("lender", 4, cohort="c"), queue("borrower", 4, cohort="c")]
    st = state(qs, [node("n", 8)], [job("b1", "borrower", gpus_per_pod=4), job("b2", "borrower", gpus_per_pod=4)])
    result = cycle(st, 0, CFG)
    assert admitted(result) == {"b1", "b2"}
    borrowed = [rj.job.job_id for rj in st.running_jobs().values() if rj.borrowed]
    assert len(borrowed) == 1
    st.submit(job("mine", "lender", gpus_per_pod=4, priority=-5, submit=1))  # priority does not matter
    result = cycle(st, 500, CFG)
    assert {k: v.reason for k, v in preempts(result).items()} == {borrowed[0]: PreemptReason.RECLAIM.value}
    st.job_stopped(borrowed[0], 510)
    assert admitted(cycle(st, 511, CFG)) == {"mine"}
    check_invariants(st)


def test_no_reclaim_when_queue_would_exceed_nominal() -> None:
    qs = [queue("lender", 4, cohort="c"), queue("borrower", 4, cohort="c")]
    st = state(qs, [node("n", 8)], [job("b1", "borrower", gpus_per_pod=4), job("b2", "borrower", gpus_per_pod=4)])
    cycle(st, 0, CFG)
    st.submit(job("big", "lender", gpus_per_pod=8, submit=1))
    assert preempts(cycle(st, 500, CFG)) == {}


def _lending_beside_own_low_priority_work() -> SchedulerState:
    """lender (nominal 4) runs "own" (2 GPUs, priority 0) and lends its other 2 to borrower, which runs b0-b2."""
    qs = [queue("lender", 4, cohort="c"), queue("borrower", 4, cohort="c")]
    st = state(qs, [node("n", 8)], [job("own", "lender", gpus_per_pod=2, priority=0)])
    cycle(st, 0, CFG)
    for i in range(3):
        st.submit(job(f"b{i}", "borrower", gpus_per_pod=2, submit=1 + i))
    assert admitted(cycle(st, 1, CFG)) == {"b0", "b1", "b2"}
    return st


def test_a_queue_reclaims_beside_preempting_its_own_lower_priority_work() -> None:
    # lender holds 2 of its 4 nominal GPUs with low-priority work and lends the other 2 to borrower; its
    # high-priority job of 4 fits within nominal only once that work is gone, and the 2 lent GPUs are
    # taken back for it at the same time (before, reclaim needed the job to fit within nominal on top of
    # its queue's own work, so it waited for the borrower to finish)
    st = _lending_beside_own_low_priority_work()
    [lent] = [rj.job.job_id for rj in st.running_jobs().values() if rj.borrowed]
    st.submit(job("high", "lender", gpus_per_pod=4, priority=10, submit=5))
    result = cycle(st, 500, CFG)
    assert {k: v.reason for k, v in preempts(result).items()} == {
        "own": PreemptReason.PRIORITY.value, lent: PreemptReason.RECLAIM.value}
    st.job_stopped("own", 510)
    st.job_stopped(lent, 510)
    assert admitted(cycle(st, 511, CFG)) == {"high"}
    check_invariants(st)


def test_reclaiming_beside_its_own_victims_never_takes_a_queue_above_nominal() -> None:
    # the job of 6 is above lender's nominal of 4 even with its own work gone: nothing is reclaimed for it
    st = _lending_beside_own_low_priority_work()
    st.submit(job("big", "lender", gpus_per_pod=6, priority=10, submit=5))
    assert all(p.reason != PreemptReason.RECLAIM.value for p in preempts(cycle(st, 500, CFG)).values())


def test_preemption_disabled() -> None:
    st = state([queue("q", 8)], [node("n", 8)], [job("low", gpus_per_pod=8)])
    cycle(st, 0, CFG)
    st.submit(job("high", gpus_per_pod=8, priority=10, submit=1))
    off = SchedulerConfig(preemption=False, min_runtime_s=0)
    assert preempts(cycle(st, 500, off)) == {}


def test_max_runtime_preempts_without_requeue() -> None:
    st = state([queue("q", 8)], [node("n", 8)], [job("a", max_runtime_s=100.0), job("b", submit=1)])
    cycle(st, 0)
    assert preempts(cycle(st, 99)) == {}
    result = cycle(st, 101)
    assert preempts(result) == {"a": Preempt("a", 0, PreemptReason.MAX_RUNTIME.value, 30.0, requeue=False)}
    assert preempts(cycle(st, 102)) == {}  # already terminating
    st.job_stopped("a", 110, requeue=False)
    assert st.job("a") is None and "b" in st.running_jobs()


def test_max_wait_rejects_pending_job() -> None:
    st = state([queue("q", 0)], [node("n", 8)], [job("w", max_wait_s=50.0)])
    assert cycle(st, 49).decisions == ()
    result = cycle(st, 51)
    assert result.decisions == (
        Reject("w", PendingReason.MAX_WAIT_EXCEEDED.value, "pending for more than max_wait_s=50s"),
    )
    assert st.job("w") is None and st.pending_count == 0


def test_unhealthy_node_preempts_its_jobs_with_requeue() -> None:
    n = node("n", 8)
    st = state([queue("q", 8)], [n], [job("a")])
    cycle(st, 0)
    st.upsert_node(replace(n, healthy=False))
    result = cycle(st, 5)
    (d,) = result.decisions
    assert isinstance(d, Preempt) and d.reason == PreemptReason.NODE_UNHEALTHY.value and d.requeue
    assert not any(isinstance(x, Admit) for x in result.decisions)


def test_a_short_not_ready_flap_preempts_nothing_and_a_long_one_stops_the_jobs_after_the_grace() -> None:
    cfg = SchedulerConfig(node_unhealthy_grace_s=300.0)
    n, spare = node("n", 8), node("spare", 8)
    st = state([queue("q", 16)], [n, spare], [job("a")])
    (admit,) = cycle(st, 0, cfg).decisions
    assert isinstance(admit, Admit) and admit.placement.nodes[0].node == "n"
    st.upsert_node(replace(n, healthy=False, unhealthy_since=10.0))
    st.submit(job("b", submit=10.0))
    during = cycle(st, 11, cfg).decisions
    assert not any(isinstance(d, Preempt) for d in during)
    (b,) = [d for d in during if isinstance(d, Admit)]
    assert b.placement.nodes[0].node == "spare"  # no new work on the unhealthy node meanwhile
    st.upsert_node(n)  # Ready again within the grace: nothing happened to "a"
    assert not any(isinstance(d, Preempt) for d in cycle(st, 400, cfg).decisions)
    st.upsert_node(replace(n, healthy=False, unhealthy_since=500.0))
    assert not any(isinstance(d, Preempt) for d in cycle(st, 799, cfg).decisions)
    (d,) = [d for d in cycle(st, 800, cfg).decisions if isinstance(d, Preempt)]
    assert (d.job_id, d.reason, d.requeue) == ("a", PreemptReason.NODE_UNHEALTHY.value, True)


def test_a_removed_node_stops_its_jobs_at_once() -> None:
    n = node("n", 8)
    st = state([queue("q", 8)], [n], [job("a")])
    cycle(st, 0)
    st.remove_node("n")
    (d,) = cycle(st, 1).decisions
    assert isinstance(d, Preempt) and d.reason == PreemptReason.NODE_UNHEALTHY.value


def test_young_victims_make_the_preemptor_wait_with_a_precise_reason_and_estimate() -> None:
    from services.core import SchedulerConfig, SchedulerState, schedule
    from services.core.model import Job, Node, PendingReason, Preempt, QueueSpec, ResourceQuota

    state = SchedulerState(queues=[QueueSpec("a", quotas={"gpu:a100": ResourceQuota(8)})],
                           nodes=[Node("n0", "c1", "a100", 8)])
    cfg = SchedulerConfig(min_runtime_s=300.0)
    state.submit(Job("low", "a", 0.0, gpus_per_pod=8, gpu_type="a100", priority=1, grace_period_s=30.0))
    for d in schedule(state, 100.0, cfg).decisions:
        state.apply(d, 100.0)
    state.submit(Job("high", "a", 110.0, gpus_per_pod=8, gpu_type="a100", priority=10))
    result = schedule(state, 120.0, cfg)
    assert not result.decisions
    info = result.pending["high"]
    assert info.reason is PendingReason.PROTECTED
    assert info.estimated_start == 100.0 + 300.0 + 30.0  # protection ends, then the victim's grace
    later = schedule(state, 401.0, cfg)
    assert [type(d) for d in later.decisions] == [Preempt]


# ---------------------------------------------------------------------- reclaiming nominal quota


def _reclaim_setup() -> tuple[SchedulerState, SchedulerConfig]:
    """One 4-GPU node, a cohort of three queues: q0 (nominal 0) borrows 1 GPU with a young job; q1
    (nominal 1) runs 3 GPUs, 2 of them borrowed (``low``, 2 GPUs, priority 0, and ``high``, 1 GPU,
    priority 1); q2 (nominal 3) then wants its 3 GPUs back for a job that may not borrow."""
    cfg = SchedulerConfig(min_runtime_s=100.0, backfill=False, fair_share=False)
    qs = [queue("q0", 0, cohort="c"), queue("q1", 1, cohort="c"), queue("q2", 3, cohort="c")]
    st = state(qs, [node("n0", 4)], [job("low", "q1", gpus_per_pod=2)])
    cycle(st, 0, cfg)
    st.submit(job("high", "q1", gpus_per_pod=1, priority=1, submit=10))
    cycle(st, 10, cfg)  # admitted on borrowed quota: its queue already used 2 of its nominal 1
    st.submit(job("young", "q0", gpus_per_pod=1, submit=150))
    cycle(st, 150, cfg)
    st.submit(job("target", "q2", gpus_per_pod=3, preemptible=False, submit=160))
    return st, cfg


def test_reclaim_victims_are_only_jobs_still_borrowing_once_the_earlier_victims_go() -> None:
    """Without ``low`` its queue is back within its nominal quota, so ``high`` borrows nothing and is
    no victim (it would come straight back, ahead of the reclaimer); the reclaim waits for ``young``."""
    st, cfg = _reclaim_setup()
    waiting = cycle(st, 200, cfg)
    assert preempts(waiting) == {}
    assert waiting.pending["target"].reason is PendingReason.PROTECTED
    assert waiting.pending["target"].estimated_start == 280.0  # young's minimum runtime ends, then its grace
    due = cycle(st, 250, cfg)
    assert set(preempts(due)) == {"low", "young"}
    st.job_stopped("low", 250)
    st.job_stopped("young", 250)
    assert admitted(cycle(st, 251, cfg)) == {"target"}
    check_invariants(st)


def test_a_reclaimer_waiting_for_minimum_runtimes_keeps_its_quota_from_new_borrowers() -> None:
    """While the reclaimer waits for its victims' minimum runtime, a borrower of another queue is not
    admitted into the quota it reclaims: it would start a new minimum runtime and push the reclaim back."""
    cfg = SchedulerConfig(min_runtime_s=100.0, backfill=False, fair_share=False)
    qs = [queue("q0", 0, cohort="c"), queue("q1", 1, cohort="c"), queue("q2", 3, cohort="c")]
    st = state(qs, [node("n0", 4)], [job("young-a", "q0", gpus_per_pod=1), job("young-b", "q1", gpus_per_pod=2)])
    cycle(st, 150, cfg)  # 3 of the cohort's 4 GPUs run, 2 of them borrowed, all protected until 250
    st.submit(job("target", "q2", gpus_per_pod=3, preemptible=False, submit=160))
    st.submit(job("borrower", "q0", gpus_per_pod=1, submit=170))
    waiting = cycle(st, 200, cfg)
    assert waiting.pending["target"].reason is PendingReason.PROTECTED
    assert "borrower" not in admitted(waiting)  # the free GPU is part of the quota target reclaims
    assert waiting.pending["borrower"].reason is PendingReason.COHORT_QUOTA
    due = cycle(st, 250, cfg)
    assert set(preempts(due)) == {"young-b"}  # with the free GPU that makes 3
    st.job_stopped("young-b", 250)
    assert "target" in admitted(cycle(st, 251, cfg))
    check_invariants(st)
