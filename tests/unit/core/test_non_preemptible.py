"""Work that cannot be preempted runs only within its queue's nominal quota, so borrowed quota is always
reclaimable; the reasons name the real cause."""

from __future__ import annotations

from services.core import (
    Admit,
    NodeAssignment,
    PendingReason,
    Placement,
    Preempt,
    PreemptReason,
    Scale,
    SchedulerConfig,
    schedule,
)

from .builders import admitted, check_invariants, cycle, job, node, queue, state

CFG = SchedulerConfig(min_runtime_s=100.0, backfill=False)
NODES = [node(f"n{i}") for i in range(4)]  # 32 a100s
TEAMS = [queue("team-a", 16, cohort="research"), queue("team-b", 16, cohort="research")]


def test_non_preemptible_job_never_borrows_and_says_why() -> None:
    train = job("train", "team-a", replicas=4, gpus_per_pod=8, preemptible=False, runtime_estimate=21600)
    st = state(TEAMS, NODES, [train])
    result = cycle(st, 0, CFG)
    assert result.decisions == ()
    info = result.pending["train"]
    assert info.reason is PendingReason.NON_PREEMPTIBLE_QUOTA
    assert info.message == "non-preemptible work may only use queue team-a's nominal quota (4x8 GPUs would borrow)"
    assert info.estimated_start is None  # 32 GPUs never fit in 16 nominal
    assert st.queue_usage("team-b") == {}
    check_invariants(st)


def test_preemptible_job_still_borrows() -> None:
    st = state(TEAMS, NODES, [job("train", "team-a", replicas=4, gpus_per_pod=8)])
    (d,) = cycle(st, 0, CFG).decisions
    assert isinstance(d, Admit) and d.borrowed and st.running_jobs()["train"].borrowed


def test_non_preemptible_job_within_nominal_is_admitted_unborrowed() -> None:
    st = state(TEAMS, NODES, [job("serve", "team-a", replicas=2, gpus_per_pod=8, preemptible=False)])
    (d,) = cycle(st, 0, CFG).decisions
    assert isinstance(d, Admit) and not d.borrowed


def test_non_preemptible_waits_for_its_own_queue_and_estimates_from_its_releases() -> None:
    running = job("batch", "team-a", gpus_per_pod=8, runtime_estimate=500)
    st = state(TEAMS, NODES, [running])
    cycle(st, 0, CFG)
    st.submit(job("serve", "team-a", replicas=2, gpus_per_pod=8, preemptible=False, submit=1))
    result = cycle(st, 10, CFG)
    assert admitted(result) == set()  # 8 + 16 would borrow 8, although the cohort has 24 idle
    info = result.pending["serve"]
    assert info.reason is PendingReason.NON_PREEMPTIBLE_QUOTA and info.estimated_start == 500
    st.job_finished("batch", 500)
    assert admitted(cycle(st, 500, CFG)) == {"serve"}


def test_non_preemptible_job_preempts_lower_priority_work_of_its_own_queue_for_nominal_room() -> None:
    st = state(TEAMS, NODES, [job("batch", "team-a", gpus_per_pod=8, grace_period_s=30)])
    cycle(st, 0, CFG)
    st.submit(job("serve", "team-a", replicas=2, gpus_per_pod=8, preemptible=False, priority=10, submit=1))
    result = cycle(st, 200, CFG)
    (p,) = [d for d in result.decisions if isinstance(d, Preempt)]
    assert (p.job_id, p.reason, p.preemptor) == ("batch", PreemptReason.PRIORITY.value, "serve")
    assert result.pending["serve"].reason is PendingReason.PREEMPTING
    assert result.pending["serve"].estimated_start == 230


def test_hostile_tenant_cannot_hold_the_other_teams_quota() -> None:
    """The issue's case: team-a's non-preemptible gang cannot borrow team-b's idle A100s; its preemptible
    work can, and team-b gets its 16 back by quota reclaim."""
    hostile = job("hostile", "team-a", replicas=4, gpus_per_pod=8, preemptible=False)
    borrower = job("borrower", "team-a", replicas=4, gpus_per_pod=8, submit=1, grace_period_s=120)
    st = state(TEAMS, NODES, [hostile, borrower])
    assert admitted(cycle(st, 0, CFG)) == {"borrower"}
    st.submit(job("urgent", "team-b", replicas=2, gpus_per_pod=8, priority=1000, submit=50))
    early = cycle(st, 50, CFG)
    assert early.pending["urgent"].reason is PendingReason.PROTECTED
    assert early.pending["urgent"].estimated_start == 100 + 120  # min runtime, then the grace period
    result = cycle(st, 100, CFG)
    (p,) = [d for d in result.decisions if isinstance(d, Preempt)]
    assert (p.job_id, p.reason, p.preemptor) == ("borrower", PreemptReason.RECLAIM.value, "urgent")
    assert result.pending["hostile"].reason is PendingReason.NON_PREEMPTIBLE_QUOTA
    check_invariants(st)


def test_quota_held_by_unreclaimable_borrowers_is_reported_as_lent() -> None:
    """Non-preemptible work admitted on borrowed quota before this rule (recovered state): the queue
    whose quota it holds is told its nominal quota is lent out, not that the cohort has none to lend,
    with the borrower's estimated end as its start."""
    legacy = job("legacy", "team-a", replicas=4, gpus_per_pod=8, preemptible=False, runtime_estimate=3600)
    st = state(TEAMS, NODES, [legacy])
    placement = Placement("c1", tuple(NodeAssignment(f"n{i}", 1, (-1,)) for i in range(4)))
    st.apply(Admit("legacy", 0, placement, 4, borrowed=True), 0)
    st.submit(job("urgent", "team-b", replicas=2, gpus_per_pod=8, priority=1000, submit=50))
    result = cycle(st, 500, CFG)
    assert not result.decisions
    info = result.pending["urgent"]
    assert info.reason is PendingReason.QUOTA_LENT and info.estimated_start == 3600
    assert info.message.startswith("queue team-b's nominal quota for 2x8 GPUs is lent to other queues")
    st.submit(job("greedy", "team-b", replicas=3, gpus_per_pod=8, submit=60))  # would borrow: the cohort's reason
    assert cycle(st, 500, CFG).pending["greedy"].reason is PendingReason.COHORT_QUOTA


def test_fifo_policy_reports_lent_quota_too() -> None:
    legacy = job("legacy", "team-a", replicas=4, gpus_per_pod=8, preemptible=False)
    st = state(TEAMS, NODES, [legacy])
    st.apply(Admit("legacy", 0, Placement("c1", tuple(NodeAssignment(f"n{i}", 1) for i in range(4))), 4, True), 0)
    st.submit(job("urgent", "team-b", gpus_per_pod=8, submit=1))
    result = schedule(st, 10, SchedulerConfig(policy="fifo"))
    assert result.pending["urgent"].reason is PendingReason.QUOTA_LENT


def test_non_preemptible_elastic_job_grows_only_within_nominal() -> None:
    elastic = job("serve", "team-a", replicas=4, min_replicas=1, gpus_per_pod=8, preemptible=False)
    st = state(TEAMS, NODES, [elastic])
    cycle(st, 0, CFG)
    cycle(st, 1, CFG)
    rj = st.running_jobs()["serve"]
    assert rj.replicas == 2 and not rj.borrowed  # 16 of team-a's nominal, none of team-b's
    grown = job("grow", "team-b", replicas=4, min_replicas=1, gpus_per_pod=8)
    st.submit(grown)
    decisions = cycle(st, 2, CFG).decisions + cycle(st, 3, CFG).decisions
    assert any(isinstance(d, (Admit, Scale)) and d.job_id == "grow" for d in decisions)
    assert st.running_jobs()["grow"].replicas == 2  # the rest of the cluster is team-b's own 16
    check_invariants(st)


def test_a_job_running_on_borrowed_quota_cannot_become_non_preemptible() -> None:
    st = state(TEAMS, NODES, [job("borrower", "team-a", replicas=3, gpus_per_pod=8), job("own", "team-b")])
    cycle(st, 0, CFG)
    assert not st.set_priority("borrower", 10_000, preemptible=False)
    assert st.running_jobs()["borrower"].job.preemptible and st.running_jobs()["borrower"].job.priority == 0
    assert st.set_priority("own", 10_000, preemptible=False)  # within team-b's nominal: it may
    assert not st.running_jobs()["own"].job.preemptible
    assert st.set_priority("borrower", 5)
    assert st.running_jobs()["borrower"].job.priority == 5


def test_shrinking_a_job_never_marks_it_borrowed() -> None:
    """A queue above nominal through its preemptible borrower: shrinking its non-preemptible elastic job
    (within nominal) must not mark that job as borrowed."""
    serve = job("serve", "team-a", replicas=2, min_replicas=1, gpus_per_pod=8, preemptible=False)
    st = state(TEAMS, NODES, [serve])
    cycle(st, 0, CFG)
    st.submit(job("borrower", "team-a", replicas=2, gpus_per_pod=8, submit=1))
    cycle(st, 1, CFG)
    assert st.running_jobs()["borrower"].borrowed and st.book.over_nominal("team-a")
    rj = st.running_jobs()["serve"]
    keep = Placement(rj.placement.cluster, rj.placement.nodes[:1])
    st.apply(Scale("serve", 0, 1, keep), 2)
    assert not st.running_jobs()["serve"].borrowed
    check_invariants(st)
