"""Elastic jobs: start with as many pods as fit unless a job ahead waits, grow in the queue's order, shrink first."""

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


def test_starts_with_what_is_left_when_only_jobs_behind_it_wait() -> None:
    st = state([queue("q", 32)], [node("n1"), node("n2")])
    st.submit(job("e", gpus_per_pod=4, replicas=4, min_replicas=1, priority=5))
    st.submit(job("big", gpus_per_pod=8, replicas=2, submit=1, priority=9))
    st.submit(job("small", gpus_per_pod=4, submit=2))
    cycle(st, 0, CFG)  # big takes both nodes
    st.submit(job("other", gpus_per_pod=4, submit=3, priority=9))
    st.job_finished("big", 10)
    result = cycle(st, 10, CFG)  # "other" goes first; then e, behind nothing that waits, starts with all 3 pods left
    assert {d.job_id: d.replicas for d in result.decisions if isinstance(d, Admit)} == {"other": 1, "e": 3}
    assert result.pending["small"].reason is PendingReason.CAPACITY
    check_invariants(st)


def test_starts_at_min_behind_a_waiting_job_and_grows_when_it_is_gone() -> None:
    st = state([queue("q", 32)], [node("n1"), node("n2")])
    st.submit(job("held", gpus_per_pod=4, priority=9))
    cycle(st, 0, CFG)  # 4 of n1's 8 GPUs
    st.submit(job("big", gpus_per_pod=8, replicas=2, submit=1, priority=9))  # ahead of e, cannot fit
    st.submit(job("e", gpus_per_pod=4, replicas=4, min_replicas=1, priority=5, submit=2))
    result = cycle(st, 1, CFG)
    (d,) = result.decisions
    assert isinstance(d, Admit) and d.job_id == "e" and d.replicas == 1  # big wants the GPUs: only its minimum
    assert result.pending["big"].reason is PendingReason.CAPACITY
    st.cancel("big")
    (grow,) = cycle(st, 2, CFG).decisions
    assert isinstance(grow, Scale) and grow.replicas == 3 and grow.placement.pods == 3
    assert st.running_jobs()["e"].replicas == 3
    assert cycle(st, 3, CFG).decisions == ()  # idempotent: no room for its fourth pod
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


def test_a_job_behind_in_the_order_does_not_shrink_one_ahead() -> None:
    """Shrinking costs the shrunk job a restart: within a queue and priority, only a job far ahead in the
    queue's order (``reorder_ratio``, as for preempting for order) takes an elastic job's extra pods."""
    st = state([queue("q", 16)], [node("n1"), node("n2")])
    st.submit(job("e", gpus_per_pod=4, replicas=4, min_replicas=1, runtime_estimate=600.0))
    cycle(st, 0, CFG)
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=36_000.0, submit=1))
    result = cycle(st, 10, CFG)
    assert result.decisions == ()  # long is far behind e: e keeps its 4 pods
    assert st.running_jobs()["e"].replicas == 4
    st2 = state([queue("q", 16)], [node("n1"), node("n2")])
    st2.submit(job("e", gpus_per_pod=4, replicas=4, min_replicas=1, runtime_estimate=36_000.0))
    cycle(st2, 0, CFG)
    st2.submit(job("short", gpus_per_pod=8, runtime_estimate=600.0, submit=1))
    (d,) = cycle(st2, 10, CFG).decisions  # short is far ahead of e: e gives back the two pods it needs
    assert isinstance(d, Scale) and d.job_id == "e" and d.replicas == 2
    check_invariants(st2)


def test_a_running_elastic_job_grows_ahead_of_jobs_behind_it_in_its_queue() -> None:
    """A job below its full size is ahead of the jobs of its queue that rank behind it: it grows into free
    GPUs they wait for, as it would have started with them had they been free when it started."""
    st = state([queue("q", 32)], [node("n1"), node("n2")])
    st.submit(job("held", gpus_per_pod=4, runtime_estimate=600.0))
    st.submit(job("blocker", gpus_per_pod=8, replicas=2, runtime_estimate=600.0, submit=1))
    st.submit(job("e", gpus_per_pod=4, replicas=3, min_replicas=1, runtime_estimate=1_200.0, submit=2))
    first = cycle(st, 0, CFG)
    assert {d.job_id: d.replicas for d in first.decisions if isinstance(d, Admit)} == {"held": 1, "e": 1}
    st.cancel("blocker")
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=36_000.0, submit=3))  # behind e, fits in what is free
    (grow,) = cycle(st, 1, CFG).decisions
    assert isinstance(grow, Scale) and grow.job_id == "e" and grow.replicas == 3
    check_invariants(st)


def test_a_job_about_to_finish_does_not_grow() -> None:
    """Growing costs the job a restart (``resize_cost_s``): not worth it for a job with little left to do."""
    for estimate, grows in ((60.0, False), (7_200.0, True)):  # 230 s left at one pod, or 7 h
        st = state([queue("q", 32)], [node("n1"), node("n2")])
        st.submit(job("blocker", gpus_per_pod=8, replicas=2, priority=9))
        cycle(st, 0, CFG)
        st.submit(job("e", gpus_per_pod=4, replicas=4, min_replicas=1, runtime_estimate=estimate, submit=1))
        st.job_finished("blocker", 10)
        st.submit(job("small", gpus_per_pod=4, priority=9, submit=2))
        st.submit(job("filler", gpus_per_pod=8, priority=9, submit=3))
        first = cycle(st, 10, CFG)  # small and filler go first: e starts with the one pod that is left
        assert {d.job_id: d.replicas for d in first.decisions if isinstance(d, Admit)} == {
            "small": 1, "filler": 1, "e": 1}
        st.job_finished("filler", 20)
        grow = [d for d in cycle(st, 20, CFG).decisions if isinstance(d, Scale)]
        assert bool(grow) is grows, estimate
        check_invariants(st)


def test_an_elastic_job_takes_its_full_size_from_work_far_behind_it_rather_than_starting_small() -> None:
    st = state([queue("q", 32)], [node("n1"), node("n2")])
    st.submit(job("held", gpus_per_pod=4, runtime_estimate=600.0))
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=36_000.0, checkpointable=True, submit=1))
    cycle(st, 0, CFG)
    st.submit(job("e", gpus_per_pod=4, replicas=3, min_replicas=1, runtime_estimate=600.0, submit=2))
    result = cycle(st, 100, CFG)  # one pod would fit now; its full size needs long's GPUs
    (d,) = result.decisions
    assert isinstance(d, Preempt) and d.job_id == "long" and d.reason == "queue_order"
    assert result.pending["e"].reason is PendingReason.PREEMPTING
    st.job_stopped("long", 110)
    (admit,) = cycle(st, 110, CFG).decisions
    assert isinstance(admit, Admit) and admit.job_id == "e" and admit.replicas == 3
    check_invariants(st)


def test_a_cycle_that_skips_statuses_sizes_an_elastic_start_the_same() -> None:
    """Queue ``q``'s second job is not tried (backfill depth 1): a reporting cycle walks it for its status
    after ``e``, a quiet cycle notes what it wants at once. Only jobs tried ahead of ``e`` make it start
    with its minimum, so both start it whole."""
    cfg = SchedulerConfig(min_runtime_s=0.0, backfill=False, backfill_depth=1, queue_order="submit",
                          fair_share=False)
    st = state([queue("q", 32), queue("r", 32)], [node("n1", 4)])
    st.submit(job("head", gpus_per_pod=8, priority=1))  # never fits a 4-GPU node
    st.submit(job("next", gpus_per_pod=1, submit=2))
    st.submit(job("e", "r", gpus_per_pod=1, replicas=2, min_replicas=1, submit=1))
    quiet = schedule(st, 0, cfg, report=False)
    full = schedule(st, 0, cfg)
    assert quiet.decisions == full.decisions
    (d,) = full.decisions
    assert isinstance(d, Admit) and d.job_id == "e" and d.replicas == 2
