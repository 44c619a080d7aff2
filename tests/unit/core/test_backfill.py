"""Reservations, backfill that never delays the reserved job, and estimated start times."""

from __future__ import annotations

from services.core import PendingReason, SchedulerConfig, SchedulerState

from .builders import FCFS, admitted, cycle, job, node, queue, state

BIG = 1000


def busy_cluster() -> SchedulerState:
    """Two 8-GPU nodes; n1 busy until t=100 (estimate), n2 busy until t=500."""
    st = state([queue("q", BIG)], [node("n1"), node("n2")])
    st.submit(job("r1", gpus_per_pod=8, runtime_estimate=100.0))
    st.submit(job("r2", gpus_per_pod=8, runtime_estimate=500.0, submit=0.5))
    cycle(st, 0)
    st.job_finished("r2", 0)  # free n2 again, then occupy 6 of its GPUs until t=500
    st.submit(job("r3", gpus_per_pod=6, runtime_estimate=500.0, submit=0.7))
    cycle(st, 0)
    return st


def test_head_gets_reservation_with_estimated_start() -> None:
    st = busy_cluster()
    st.submit(job("head", gpus_per_pod=8, replicas=2, submit=1))  # needs both nodes
    result = cycle(st, 10)
    info = result.pending["head"]
    assert info.reason is PendingReason.RESERVATION
    assert info.estimated_start == 500.0


def test_backfill_only_when_it_does_not_delay_the_reservation() -> None:
    st = busy_cluster()
    st.submit(job("head", gpus_per_pod=8, submit=1))  # fits when r1 ends (t=100) on n1
    st.submit(job("long", gpus_per_pod=2, runtime_estimate=1000.0, submit=2))
    st.submit(job("short", gpus_per_pod=2, runtime_estimate=50.0, submit=3))
    result = cycle(st, 10, FCFS)
    assert result.pending["head"].reason is PendingReason.RESERVATION
    assert result.pending["head"].estimated_start == 100.0
    # n2 has 2 free GPUs and is not needed by the reservation (n1 is): both may use it, first come first
    assert admitted(result) == {"long"}
    assert result.pending["short"].reason is PendingReason.CAPACITY


def test_job_that_would_delay_reservation_waits() -> None:
    st = state([queue("q", BIG)], [node("n1")])
    st.submit(job("r1", gpus_per_pod=4, runtime_estimate=100.0))
    cycle(st, 0)
    st.submit(job("head", gpus_per_pod=8, submit=1))
    st.submit(job("long", gpus_per_pod=2, runtime_estimate=1000.0, submit=2))
    st.submit(job("short", gpus_per_pod=2, runtime_estimate=50.0, submit=3))
    result = cycle(st, 10, FCFS)
    assert result.pending["head"].reason is PendingReason.RESERVATION
    assert result.pending["head"].estimated_start == 100.0
    assert result.pending["long"].reason is PendingReason.BEHIND_RESERVATION
    assert admitted(result) == {"short"}  # ends at 60, before the reservation


def test_without_backfill_later_jobs_pass_greedily() -> None:
    st = state([queue("q", BIG)], [node("n1")])
    st.submit(job("r1", gpus_per_pod=4, runtime_estimate=100.0))
    cycle(st, 0)
    st.submit(job("head", gpus_per_pod=8, submit=1))
    st.submit(job("long", gpus_per_pod=2, runtime_estimate=1000.0, submit=2))
    result = cycle(st, 10, SchedulerConfig(backfill=False))
    assert admitted(result) == {"long"}
    assert result.pending["head"].reason is PendingReason.CAPACITY


def test_estimated_starts_follow_order_and_default_estimate() -> None:
    st = state([queue("q", BIG)], [node("n1")])
    st.submit(job("r1", gpus_per_pod=8))  # no estimate: default 3600
    cycle(st, 0)
    for i in range(3):
        st.submit(job(f"p{i}", gpus_per_pod=8, runtime_estimate=100.0, submit=1 + i))
    result = cycle(st, 10)
    starts = [result.pending[f"p{i}"].estimated_start for i in range(3)]
    assert starts == [3600.0, 3700.0, 3800.0]
    assert [result.pending[f"p{i}"].position for i in range(3)] == [0, 1, 2]
    assert result.pending["p0"].reason is PendingReason.RESERVATION
    assert result.pending["p1"].reason is PendingReason.CAPACITY
    assert "p0" in result.pending["p0"].job_id and result.pending["p1"].message


def test_status_depth_bounds_reported_jobs() -> None:
    st = state([queue("q", 0)], [node("n1")], [job(f"j{i}", submit=i) for i in range(20)])
    result = cycle(st, 1, SchedulerConfig(status_depth=5, backfill_depth=3))
    assert sorted(result.pending) == [f"j{i}" for i in range(5)]
    assert [result.pending[f"j{i}"].reason for i in range(5)] == [PendingReason.QUEUE_QUOTA] * 3 + [
        PendingReason.QUEUED
    ] * 2
