"""Quota, borrowing, lending limits, user limits and cohort trees."""

from __future__ import annotations

import pytest

from services.core import CohortSpec, PendingReason, Reject, SchedulerConfig, SchedulerState
from services.core.quota import QuotaBook

from .builders import FCFS, admitted, check_invariants, cycle, job, node, queue, quotas, state

NODES = [node(f"n{i}") for i in range(4)]  # 32 a100 GPUs


@pytest.mark.parametrize(
    ("nominal", "jobs", "expected"),
    [
        (8, [4, 4], {"j0", "j1"}),
        (8, [4, 4, 4], {"j0", "j1"}),
        (8, [4, 8], {"j0"}),
        (0, [1], set()),
    ],
)
def test_queue_without_cohort_stays_within_nominal(nominal: int, jobs: list[int], expected: set[str]) -> None:
    st = state([queue("q", nominal)], NODES, [job(f"j{i}", gpus_per_pod=g, submit=i) for i, g in enumerate(jobs)])
    result = cycle(st, 10)
    assert admitted(result) == expected
    blocked = set(result.pending)
    assert all(result.pending[j].reason is PendingReason.QUEUE_QUOTA for j in blocked)
    check_invariants(st)


@pytest.mark.parametrize(
    ("borrowing_limit", "lending_limit", "want", "ok", "reason"),
    [
        (None, None, 12, True, None),  # borrows 4 idle GPUs from b
        (2, None, 12, False, PendingReason.QUEUE_QUOTA),  # may borrow only 2
        (None, 2, 12, False, PendingReason.COHORT_QUOTA),  # b lends only 2
        (None, 4, 12, True, None),
        (None, None, 17, False, PendingReason.COHORT_QUOTA),  # more than the whole cohort
    ],
)
def test_borrowing_and_lending(
    borrowing_limit: int | None, lending_limit: int | None, want: int, ok: bool, reason: PendingReason | None
) -> None:
    qa = queue("a", (8, borrowing_limit, None), cohort="c")
    qb = queue("b", (8, None, lending_limit), cohort="c")
    st = state([qa, qb], NODES, [job("x", "a", gpus_per_pod=1, replicas=want)])
    result = cycle(st, 10)
    if ok:
        (d,) = result.decisions
        assert d.job_id == "x" and d.borrowed  # type: ignore[union-attr]
        assert st.running_jobs()["x"].borrowed
    else:
        assert result.pending["x"].reason is reason
    check_invariants(st)


def test_missing_resource_has_zero_nominal_but_can_borrow() -> None:
    qa = queue("a", quotas=quotas(gpu_h100=8), cohort="c")  # no a100 quota at all
    qb = queue("b", 8, cohort="c")
    lonely = queue("solo", quotas=quotas(gpu_h100=8))
    st = state([qa, qb, lonely], NODES, [job("x", "a", gpus_per_pod=4), job("y", "solo", gpus_per_pod=1)])
    result = cycle(st, 10)
    assert admitted(result) == {"x"}
    assert result.pending["y"].reason is PendingReason.QUEUE_QUOTA


def test_cpu_and_memory_quota() -> None:
    q = queue("q", quotas=quotas(gpu_a100=32, cpu=8000, memory=1000))
    jobs = [job("a", gpus_per_pod=1, cpu_m=6000), job("b", gpus_per_pod=1, cpu_m=4000, submit=1)]
    st = state([q], NODES, jobs)
    result = cycle(st, 10)
    assert admitted(result) == {"a"}
    assert result.pending["b"].reason is PendingReason.QUEUE_QUOTA
    assert st.queue_usage("q") == {"gpu:a100": 1, "cpu": 6000}


def test_user_limit() -> None:
    q = queue("q", 32, user_limit_gpus=4)
    jobs = [
        job("a1", user="alice", gpus_per_pod=2),
        job("a2", user="alice", gpus_per_pod=2, submit=1),
        job("a3", user="alice", gpus_per_pod=1, submit=2),
        job("b1", user="bob", gpus_per_pod=4, submit=3),
    ]
    st = state([q], NODES, jobs)
    result = cycle(st, 10, FCFS)
    assert admitted(result) == {"a1", "a2", "b1"}
    assert result.pending["a3"].reason is PendingReason.USER_LIMIT


def test_cohort_tree_pools_idle_quota_across_subcohorts() -> None:
    cohorts = [CohortSpec("root"), CohortSpec("left", parent="root"), CohortSpec("right", parent="root")]
    qs = [queue("a", 4, cohort="left"), queue("b", 4, cohort="left"), queue("c", 8, cohort="right")]
    st = SchedulerState(queues=qs, cohorts=cohorts, nodes=NODES)
    st.submit(job("big", "a", gpus_per_pod=1, replicas=14))
    st.submit(job("more", "a", gpus_per_pod=1, replicas=4, submit=1))
    result = cycle(st, 10, FCFS)
    assert admitted(result) == {"big"}  # 4 own + 10 borrowed from b (left) and c (right)
    assert result.pending["more"].reason is PendingReason.COHORT_QUOTA
    assert st.book.pool_used["root"]["gpu:a100"] == 14  # all of it lendable, so all of it pooled
    check_invariants(st)


def test_unknown_queue_is_rejected_and_removed() -> None:
    st = state([queue("q", 8)], NODES, [job("x", "nope")])
    result = cycle(st, 0)
    assert result.decisions == (Reject("x", PendingReason.UNKNOWN_QUEUE.value, "unknown queue 'nope'"),)
    assert st.job("x") is None


def test_budget_exhausted_blocks_tenant() -> None:
    st = state([queue("q", 8, tenant="t1")], NODES, [job("x")])
    st.set_budget_exhausted("t1", True)
    assert cycle(st, 0).pending["x"].reason is PendingReason.BUDGET
    st.set_budget_exhausted("t1", False)
    assert admitted(cycle(st, 1)) == {"x"}


def test_config_unknown_policy() -> None:
    st = state([queue("q", 8)], NODES)
    with pytest.raises(ValueError, match="unknown scheduling policy"):
        cycle(st, 0, SchedulerConfig(policy="nope"))


def test_cpu_and_memory_are_not_limited_where_no_quota_declares_them() -> None:
    """A GPU-only quota: CPU and memory requests are bounded by node capacity, not by quota."""
    from services.core import SchedulerConfig, SchedulerState, schedule
    from services.core.model import Admit, Job, Node, QueueSpec, ResourceQuota

    state = SchedulerState(
        queues=[QueueSpec("a", quotas={"gpu:a100": ResourceQuota(8)})],
        nodes=[Node("n1", "c1", "a100", 8, cpu_m=64000, memory_mb=512 * 1024)],
    )
    state.submit(Job("j1", "a", 0.0, gpus_per_pod=4, gpu_type="a100", cpu_m=16000, memory_mb=65536))
    result = schedule(state, 1.0, SchedulerConfig())
    assert [type(d) for d in result.decisions] == [Admit]


def test_cpu_quota_declared_in_the_cohort_governs_every_queue_of_it() -> None:
    from services.core import SchedulerConfig, SchedulerState, schedule
    from services.core.model import CohortSpec, Job, Node, PendingReason, QueueSpec, ResourceQuota

    state = SchedulerState(
        queues=[
            QueueSpec("a", cohort="c", quotas={"gpu:a100": ResourceQuota(8)}),
            QueueSpec("b", cohort="c", quotas={"gpu:a100": ResourceQuota(8), "cpu": ResourceQuota(8000)}),
        ],
        cohorts=[CohortSpec("c")],
        nodes=[Node("n1", "c1", "a100", 8, cpu_m=64000)],
    )
    state.submit(Job("j1", "a", 0.0, gpus_per_pod=1, gpu_type="a100", cpu_m=16000))
    result = schedule(state, 1.0, SchedulerConfig())
    assert not result.decisions
    assert result.pending["j1"].reason in (PendingReason.COHORT_QUOTA, PendingReason.QUEUE_QUOTA)


def test_quota_blocked_job_is_estimated_to_start_when_its_queue_frees_quota() -> None:
    from services.core import SchedulerConfig, SchedulerState, schedule
    from services.core.model import Job, Node, PendingReason, QueueSpec, ResourceQuota

    state = SchedulerState(
        queues=[QueueSpec("a", quotas={"gpu:a100": ResourceQuota(8)})],
        nodes=[Node(f"n{i}", "c1", "a100", 8) for i in range(4)],  # plenty of idle capacity
    )
    cfg = SchedulerConfig()
    state.submit(Job("long", "a", 0.0, gpus_per_pod=4, gpu_type="a100", runtime_estimate=1000.0))
    state.submit(Job("short", "a", 1.0, gpus_per_pod=4, gpu_type="a100", runtime_estimate=100.0))
    for d in schedule(state, 10.0, cfg).decisions:
        state.apply(d, 10.0)
    state.submit(Job("waiting", "a", 20.0, gpus_per_pod=4, gpu_type="a100"))
    info = schedule(state, 30.0, cfg).pending["waiting"]
    assert info.reason is PendingReason.QUEUE_QUOTA
    assert info.estimated_start == 110.0  # "short" (started at 10, estimate 100) frees 4 GPUs of quota


def test_quota_that_never_frees_gives_no_estimate() -> None:
    from services.core import SchedulerConfig, SchedulerState, schedule
    from services.core.model import Job, Node, PendingReason, QueueSpec, ResourceQuota

    state = SchedulerState(queues=[QueueSpec("a", quotas={"gpu:a100": ResourceQuota(4)})],
                           nodes=[Node("n0", "c1", "a100", 8)])
    state.submit(Job("big", "a", 0.0, gpus_per_pod=8, gpu_type="a100"))
    info = schedule(state, 1.0, SchedulerConfig()).pending["big"]
    assert info.reason is PendingReason.QUEUE_QUOTA and info.estimated_start is None


def test_a_clone_of_the_quota_book_is_copied_on_write_and_never_changes_the_original() -> None:
    book = QuotaBook()
    book.set_cohort(CohortSpec("c"))
    for name in ("a", "b"):
        book.set_queue(queue(name, 8, cohort="c"))
    book.add("a", {"gpu:a100": 4}, "alice", +1)
    before = ({q: dict(a) for q, a in book.alloc.items()}, {r: dict(u) for r, u in book.pool_used.items()},
              dict(book.user_gpus))

    scratch = book.clone()
    assert scratch.alloc["a"] is book.alloc["a"]  # shared until the scratch copy changes it
    scratch.add("a", {"gpu:a100": 4}, "alice", +1)
    scratch.add("b", {"gpu:a100": 12}, "bob", +1)
    scratch.add("b", {"gpu:a100": 2}, "bob", -1)

    assert (book.alloc, book.pool_used, book.user_gpus) == before
    assert scratch.alloc["a"] == {"gpu:a100": 8} and scratch.alloc["b"] == {"gpu:a100": 10}
    assert scratch.pool_used["c"]["gpu:a100"] == 18  # nothing is guaranteed (all nominal quota is lent)
    again = scratch.clone()  # a clone of a clone shares with its own source only until it writes
    again.add("a", {"gpu:a100": 1}, "alice", -1)
    assert scratch.alloc["a"] == {"gpu:a100": 8} and again.alloc["a"] == {"gpu:a100": 7}


def test_most_pods_stops_at_quota_borrowing_and_the_user_limit() -> None:
    """Nominal 8 in a cohort whose other queue has 8 idle: a preemptible job may take 16 GPUs (8 borrowed),
    a non-preemptible one its queue's 8, a user capped at 6 GPUs 6; what the queue uses already counts."""
    book = QuotaBook()
    book.set_cohort(CohortSpec("c"))
    book.set_queue(queue("a", 8, cohort="c", user_limit_gpus=6))
    book.set_queue(queue("b", 8, cohort="c"))
    book.set_queue(queue("solo", 8))
    two_per_pod = {"gpus_per_pod": 2, "replicas": 16}
    assert book.most_pods(job("j", "solo", **two_per_pod), "a100", 16) == 4
    assert book.most_pods(job("j", "b", preemptible=True, **two_per_pod), "a100", 16) == 8
    assert book.most_pods(job("j", "b", preemptible=False, **two_per_pod), "a100", 16) == 4
    assert book.most_pods(job("j", "b", preemptible=True, **two_per_pod), "a100", 3) == 3  # never above ``high``
    assert book.most_pods(job("j", "a", user="alice", **two_per_pod), "a100", 16) == 3
    book.add("b", {"gpu:a100": 6}, "bob", +1)
    assert book.most_pods(job("j", "b", preemptible=True, **two_per_pod), "a100", 16) == 5
    book.add("solo", {"gpu:a100": 8}, "carol", +1)
    assert book.most_pods(job("j", "solo", **two_per_pod), "a100", 16) == 0
