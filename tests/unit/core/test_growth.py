"""Capacity that grows: nodes bought for a waiting job only when that starts it sooner, within its queue's burst
budget, kept for it, and given back when idle (``services.core.growth``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from services.core import Job, PendingReason, SchedulerConfig, SchedulerState, schedule
from services.core.model import Admit, BurstBudget, GrowableGroup, Provision

from .builders import FCFS, admitted, cycle, job, node, queue, state

CLOUD = "cloud"


def cloud_group(max_nodes: int = 8, delay: float = 360.0, price: float = 2.0, idle: float = 600.0,
                min_nodes: int = 0, gpus: int = 8) -> GrowableGroup:
    return GrowableGroup("cloud-a100", node("template", gpus=gpus, cluster=CLOUD), min_nodes, max_nodes, delay,
                         price, idle)


ROOMY = BurstBudget(gpu_hours=1000.0)


def grown_state(nodes: int = 2, budget: BurstBudget | None = ROOMY,
                group: GrowableGroup | None = None, quota: int = 64) -> SchedulerState:
    st = state([queue("q", quota), queue("other", quota)], [node(f"n{i}") for i in range(nodes)])
    st.set_growable_group(group or cloud_group(), [], 0.0)
    st.set_burst_budget("q", budget)
    return st


def arrive(st: SchedulerState, grp: str, p: Provision, now: float, booking: float = 600.0) -> list[str]:
    """The cloud answers ``p``: its nodes join the state, kept for its job."""
    template = st.growth.groups[grp].template
    names = [f"{grp}-b{i}" for i in range(1, p.nodes + 1)]
    st.provisioned(p.job_id, [replace(template, name=n) for n in names], now, now + booking)
    return names


def test_a_gang_no_node_can_host_gets_nodes_bought_and_says_so() -> None:
    st = grown_state()
    st.submit(job("gang", gpus_per_pod=8, replicas=4, runtime_estimate=1800.0))
    result = schedule(st, 60.0, FCFS)
    hours = 4 * 8 * (1800 + 600) / 3600  # from ready until its estimated end plus the idle time
    assert result.provisions == (Provision("gang", "q", "cloud-a100", 4, 420.0, hours, hours * 2.0),)
    info = result.pending["gang"]
    assert info.reason is PendingReason.PROVISIONING
    assert info.estimated_start == 420.0
    assert info.message == "provisioning 4 x a100 nodes (8 GPUs each, group cloud-a100), ready in ~6 min"
    st.provision_requested(result.provisions[0], 60.0)
    again = schedule(st, 120.0, FCFS)
    assert again.provisions == ()  # one request in flight per job
    assert again.pending["gang"].reason is PendingReason.PROVISIONING
    assert again.pending["gang"].message.endswith("ready in ~5 min")


def test_nothing_is_bought_when_existing_capacity_starts_the_job_about_as_soon() -> None:
    st = grown_state(nodes=1)
    st.submit(job("busy", gpus_per_pod=8, runtime_estimate=400.0))
    cycle(st, 0.0, FCFS)
    st.submit(job("next", gpus_per_pod=8, submit=1.0, runtime_estimate=600.0))
    result = schedule(st, 10.0, FCFS)
    assert result.provisions == ()  # existing frees at 400; bought nodes would be ready at 370 (+300 margin)
    assert result.pending["next"].reason is PendingReason.RESERVATION
    # the same job behind a long runner: buying starts it hours sooner
    st2 = grown_state(nodes=1)
    st2.submit(job("busy", gpus_per_pod=8, runtime_estimate=8 * 3600.0))
    cycle(st2, 0.0, FCFS)
    st2.submit(job("next", gpus_per_pod=8, submit=1.0, runtime_estimate=600.0))
    assert [p.nodes for p in schedule(st2, 10.0, FCFS).provisions] == [1]


@pytest.mark.parametrize("budget", [None, BurstBudget(gpu_hours=10.0), BurstBudget(money=5.0)])
def test_no_budget_or_too_small_a_budget_buys_nothing(budget: BurstBudget | None) -> None:
    st = grown_state(budget=budget)
    st.submit(job("gang", gpus_per_pod=8, replicas=4, runtime_estimate=1800.0))
    result = schedule(st, 0.0, FCFS)
    assert result.provisions == ()
    assert result.pending["gang"].reason is PendingReason.NO_MATCHING_NODES


def test_work_beyond_its_queue_quota_runs_on_bought_nodes_outside_the_quota() -> None:
    st = grown_state(quota=16)
    st.submit(job("home", gpus_per_pod=8, replicas=2, runtime_estimate=8 * 3600.0))
    cycle(st, 0.0, FCFS)  # the queue's 16 GPUs are taken for 8 hours
    st.submit(job("gang", gpus_per_pod=8, replicas=4, submit=1.0, runtime_estimate=1800.0))
    st.submit(job("theirs", queue="other", gpus_per_pod=8, replicas=4, submit=2.0))  # no budget: never
    result = schedule(st, 10.0, FCFS)
    assert [(p.job_id, p.nodes) for p in result.provisions] == [("gang", 4)]
    st.provision_requested(result.provisions[0], 10.0)
    arrive(st, "cloud-a100", result.provisions[0], 370.0)
    started = cycle(st, 370.0, FCFS)
    [admit] = [d for d in started.decisions if isinstance(d, Admit)]
    assert admit.job_id == "gang" and admit.bought
    assert {a.node for a in admit.placement.nodes} == {f"cloud-a100-b{i}" for i in range(1, 5)}
    assert st.queue_usage("q") == {"gpu:a100": 16}  # the bought work is not charged to the quota
    st.job_finished("gang", 2170.0)
    assert st.queue_usage("q") == {"gpu:a100": 16}


def test_a_job_whose_quota_frees_up_soon_buys_nothing() -> None:
    st = grown_state(quota=16)
    st.submit(job("home", gpus_per_pod=8, replicas=2, runtime_estimate=200.0))
    cycle(st, 0.0, FCFS)
    st.submit(job("next", gpus_per_pod=8, replicas=2, submit=1.0, runtime_estimate=1800.0))
    result = schedule(st, 10.0, FCFS)
    assert result.provisions == ()  # its quota frees at 200; bought nodes would be ready at 370
    assert result.pending["next"].reason is PendingReason.QUEUE_QUOTA


def test_the_group_maximum_counts_requests_in_flight() -> None:
    st = grown_state(group=cloud_group(max_nodes=6))
    st.submit(job("a", gpus_per_pod=8, replicas=4, runtime_estimate=1800.0))
    st.submit(job("b", gpus_per_pod=8, replicas=4, submit=1.0, runtime_estimate=1800.0))
    result = schedule(st, 0.0, FCFS)
    assert [p.job_id for p in result.provisions] == ["a"]  # b's 4 more would make 8 > 6
    st.provision_requested(result.provisions[0], 0.0)
    assert schedule(st, 30.0, FCFS).provisions == ()


def test_budget_counts_this_cycles_requests_and_the_window() -> None:
    one = 2 * 8 * (1800 + 600) / 3600  # GPU-hours of one 2-node request
    st = grown_state(budget=BurstBudget(gpu_hours=one * 1.5, window_s=86400.0))
    st.submit(job("a", gpus_per_pod=8, replicas=4, runtime_estimate=1800.0))
    st.submit(job("b", gpus_per_pod=8, replicas=4, submit=1.0, runtime_estimate=1800.0))
    st.set_growable_group(cloud_group(), [], 0.0)
    result = schedule(st, 0.0, FCFS)
    assert len(result.provisions) == 0  # each needs 4 nodes: 2x ``one``, over the budget
    st.set_burst_budget("q", BurstBudget(gpu_hours=2 * one * 1.5, window_s=86400.0))
    result = schedule(st, 0.0, FCFS)
    assert [p.job_id for p in result.provisions] == ["a"]  # not a and b: together they would overspend
    st.provision_requested(result.provisions[0], 0.0)
    assert schedule(st, 100.0, FCFS).provisions == ()
    assert [p.job_id for p in schedule(st, 86400.0 + 1, FCFS).provisions] == ["b"]  # a new window


def test_bought_nodes_host_only_their_job_and_are_given_back_when_it_is_done_with_them() -> None:
    st = grown_state(nodes=0)
    st.submit(job("gang", gpus_per_pod=8, replicas=2, runtime_estimate=1000.0))
    p = schedule(st, 0.0, FCFS).provisions[0]
    st.provision_requested(p, 0.0)
    charged = st.growth.spent_in_window("q", 0.0)[0]
    assert charged == pytest.approx(2 * 8 * (1000 + 600) / 3600)
    st.submit(job("small", gpus_per_pod=1, submit=1.0, runtime_estimate=60.0))  # first in line below
    st.submit(job("gang2", gpus_per_pod=8, replicas=2, submit=2.0))
    names = arrive(st, "cloud-a100", p, 360.0)
    no_buying = SchedulerConfig(queue_order="submit", provisioning=False)
    result = cycle(st, 360.0, no_buying)
    assert admitted(result) == {"gang"}  # small and gang2 may not take the gang's nodes
    st.job_finished("gang", 1360.0)
    result = cycle(st, 1400.0, no_buying)
    assert admitted(result) == set()  # the gang is done with them: nobody else's
    assert schedule(st, 1500.0, FCFS).releases == ()  # idle for 140 s of 600
    released = schedule(st, 1360.0 + 600.0, FCFS).releases
    assert sorted(r.node for r in released) == names
    for r in released:
        st.node_released(r.node, 1960.0)
    assert not st.growth.members["cloud-a100"]
    assert not any(n in st.nodes() for n in names)
    # the queue pays what the nodes really cost: 2 x 8 GPUs from ready (360) until given back (1960)
    assert st.growth.spent_in_window("q", 1960.0)[0] == pytest.approx(2 * 8 * 1600 / 3600)


def test_bought_nodes_whose_job_never_comes_are_given_back_after_the_booking() -> None:
    st = grown_state(nodes=0)
    st.submit(job("gang", gpus_per_pod=8, replicas=2, runtime_estimate=1000.0))
    p = schedule(st, 0.0, FCFS).provisions[0]
    st.provision_requested(p, 0.0)
    st.cancel("gang")
    names = arrive(st, "cloud-a100", p, 360.0, booking=600.0)  # nobody to keep them for: not kept
    assert sorted(r.node for r in schedule(st, 360.0 + 600.0, FCFS).releases) == names


def test_a_group_never_shrinks_below_its_minimum() -> None:
    st = grown_state(nodes=0, group=cloud_group(min_nodes=1))
    st.upsert_node(node("cloud-a100-0", cluster=CLOUD))
    st.upsert_node(node("cloud-a100-1", cluster=CLOUD))
    st.set_growable_group(cloud_group(min_nodes=1), ["cloud-a100-0", "cloud-a100-1"], 0.0)
    assert [r.node for r in schedule(st, 700.0, FCFS).releases] == ["cloud-a100-0"]


def test_a_failed_request_gives_the_charge_back_and_the_job_waits_with_the_reason() -> None:
    st = grown_state(budget=BurstBudget(gpu_hours=100.0))
    st.submit(job("gang", gpus_per_pod=8, replicas=4, runtime_estimate=1800.0))
    p = schedule(st, 0.0, FCFS).provisions[0]
    st.provision_requested(p, 0.0)
    assert st.growth.spent_in_window("q", 1.0)[0] == pytest.approx(p.gpu_hours)
    st.provision_failed("gang", "stockout: no a100 in zone", 400.0)
    assert st.growth.spent_in_window("q", 401.0) == (0.0, 0.0)
    result = schedule(st, 401.0, SchedulerConfig(queue_order="submit", provisioning=False))
    info = result.pending["gang"]
    assert info.reason is PendingReason.NO_MATCHING_NODES
    assert info.message.endswith("buying nodes failed (stockout: no a100 in zone), waiting for existing capacity")


def test_no_growable_group_changes_nothing() -> None:
    plain = state([queue("q", 64)], [node("n0")])
    grown = grown_state(nodes=1, budget=None)
    for st in (plain, grown):
        st.submit(job("gang", gpus_per_pod=8, replicas=4, runtime_estimate=1800.0))
        st.submit(job("one", gpus_per_pod=8, submit=1.0))
    a, b = schedule(plain, 0.0, FCFS), schedule(grown, 0.0, FCFS)
    assert a.decisions == b.decisions
    assert {k: v.reason for k, v in a.pending.items()} == {k: v.reason for k, v in b.pending.items()}


# ---------------------------------------------------------------------- properties

@settings(max_examples=150, deadline=None)
@given(
    existing=st_.integers(0, 3),
    busy=st_.lists(st_.tuples(st_.integers(1, 8), st_.floats(60, 20000)), max_size=4),
    waiting=st_.lists(st_.tuples(st_.integers(1, 4), st_.sampled_from([1, 2, 4, 8]), st_.floats(60, 20000)),
                      min_size=1, max_size=6),
    delay=st_.floats(0, 3600),
    budget_hours=st_.floats(0, 200),
    max_nodes=st_.integers(0, 6),
)
def test_never_buys_what_existing_capacity_serves_as_soon_and_never_overspends(
    existing: int, busy: list[tuple[int, float]], waiting: list[tuple[int, int, float]], delay: float,
    budget_hours: float, max_nodes: int,
) -> None:
    st = grown_state(nodes=existing, budget=BurstBudget(gpu_hours=budget_hours),
                     group=cloud_group(max_nodes=max_nodes, delay=delay))
    cfg = SchedulerConfig(queue_order="submit")
    for i, (gpus, est) in enumerate(busy):
        st.submit(job(f"busy{i}", gpus_per_pod=gpus, runtime_estimate=est, submit=i * 0.01))
    cycle(st, 0.0, cfg)
    for i, (replicas, per_pod, est) in enumerate(waiting):
        st.submit(job(f"w{i}", gpus_per_pod=per_pod, replicas=replicas, runtime_estimate=est, submit=1 + i))
    result = schedule(st, 10.0, cfg)
    bought_for = {p.job_id for p in result.provisions}
    assert not bought_for & admitted(result)
    for p in result.provisions:
        assert p.ready_at == 10.0 + delay
        # had existing capacity started it as soon, no reservation or estimate would put it this late
        shown = result.pending[p.job_id]
        assert shown.reason is PendingReason.PROVISIONING
    for p in result.provisions:
        st.provision_requested(p, 10.0)
    spent, _ = st.growth.spent_in_window("q", 10.0)
    assert spent <= budget_hours + 1e-6
    assert st.growth.size("cloud-a100") <= max_nodes
    # the first job in line (nothing waits ahead of it): if nodes were bought for it, existing capacity could
    # not have started it before they are ready plus the margin, even with every running job ending as
    # estimated and nothing else admitted meanwhile (an optimistic start, worked out here independently)
    first = next((j for j in sorted(st.pending.values(), key=lambda j: j.submit_time)), None)
    if first is not None and first.job_id == "w0" and first.job_id in bought_for:
        earliest = optimistic_start(st, first, 10.0)
        assert earliest is None or earliest > 10.0 + delay + cfg.provision_margin_s


def optimistic_start(st: SchedulerState, waiting: Job, now: float) -> float | None:
    """When ``waiting``'s pods first fit on the existing nodes as the running jobs end at their estimates."""
    free = {name: st.free_gpus(name) for name in st.nodes()}
    ends = sorted(((rj.start_time + (rj.job.runtime_estimate or 0.0), rj) for rj in st.running.values()),
                  key=lambda e: (e[0], e[1].job.job_id))
    ends_iter = iter(ends)

    def fits() -> bool:
        return sum(f // waiting.gpus_per_pod for f in free.values()) >= waiting.replicas

    t = now
    while not fits():
        nxt = next(ends_iter, None)
        if nxt is None:
            return None
        t, rj = nxt
        for a in rj.placement.nodes:
            free[a.node] += a.pods * rj.job.gpus_per_pod
    return max(t, now)


def test_a_cycle_searches_a_bounded_number_of_jobs_and_buys_nothing_on_a_guess() -> None:
    from services.core.growth import MAX_SEARCHES_PER_CYCLE
    pool = {"pool": "x"}
    st = state([queue("q", 1000)], [node("n0", labels=pool)])
    st.set_growable_group(replace(cloud_group(max_nodes=100), template=node("t", cluster=CLOUD, labels=pool)), [], 0.0)
    st.set_burst_budget("q", BurstBudget(gpu_hours=1e6))
    st.submit(job("busy", gpus_per_pod=8, runtime_estimate=10 * 3600.0, node_selector=pool))
    cycle(st, 0.0, FCFS)
    n = MAX_SEARCHES_PER_CYCLE + 4
    for i in range(n):  # confined by a selector: no in-order estimate, each needs a search of its pool
        st.submit(job(f"w{i:02d}", gpus_per_pod=8, runtime_estimate=600.0, node_selector=pool, submit=1 + i))
    first = schedule(st, 10.0, FCFS)
    # w00 holds the pool's reservation (its start known without a search); the next ones are searched
    searched = MAX_SEARCHES_PER_CYCLE + 1
    assert [p.job_id for p in first.provisions] == [f"w{i:02d}" for i in range(searched)]
    for p in first.provisions:
        st.provision_requested(p, 10.0)
    second = schedule(st, 20.0, FCFS)
    assert [p.job_id for p in second.provisions] == [f"w{i:02d}" for i in range(searched, n)]


def test_while_its_job_runs_a_bought_node_shares_its_free_gpus_with_the_jobs_of_its_queue_only() -> None:
    st = grown_state(nodes=0)
    st.submit(job("half", gpus_per_pod=4, runtime_estimate=3600.0))
    p = schedule(st, 0.0, FCFS).provisions[0]
    st.provision_requested(p, 0.0)
    [name] = arrive(st, "cloud-a100", p, 360.0)
    no_buying = SchedulerConfig(queue_order="submit", provisioning=False)
    assert admitted(cycle(st, 360.0, no_buying)) == {"half"}
    st.submit(job("theirs", queue="other", gpus_per_pod=4, submit=400.0))
    st.submit(job("ours", gpus_per_pod=4, submit=401.0, runtime_estimate=600.0))
    assert admitted(cycle(st, 410.0, no_buying)) == {"ours"}  # the queue that pays for the node
    st.job_finished("ours", 1000.0)
    st.job_finished("half", 3960.0)
    st.submit(job("later", gpus_per_pod=4, submit=3970.0))
    assert admitted(cycle(st, 3970.0, no_buying)) == set()  # its job has left: no new work
    assert [r.node for r in schedule(st, 3960.0 + 600.0, FCFS).releases] == [name]


def test_what_bought_nodes_really_cost_so_far_counts_against_the_budget_before_they_are_given_back() -> None:
    st = grown_state(nodes=0, budget=BurstBudget(gpu_hours=40.0))
    st.submit(job("long", gpus_per_pod=8, runtime_estimate=600.0))  # estimated 10 min, runs for hours
    p = schedule(st, 0.0, FCFS).provisions[0]
    assert p.gpu_hours == pytest.approx(8 * 1200 / 3600)
    st.provision_requested(p, 0.0)
    arrive(st, "cloud-a100", p, 360.0)
    cycle(st, 360.0, FCFS)
    st.submit(job("next", gpus_per_pod=8, replicas=2, submit=400.0, runtime_estimate=600.0))
    nxt = schedule(st, 400.0, FCFS).provisions
    assert [q.job_id for q in nxt] == ["next"]  # 2.7 + 5.3 GPU-hours of 40
    st.provision_requested(nxt[0], 400.0)
    st.submit(job("third", gpus_per_pod=8, replicas=2, submit=500.0, runtime_estimate=600.0))
    assert [q.job_id for q in schedule(st, 500.0, FCFS).provisions] == ["third"]
    # four hours on, "long" has cost 8 x 4 = 32 GPU-hours, not the 2.7 charged: 32 + 5.3 + 5.3 would pass 40
    assert schedule(st, 360.0 + 4 * 3600.0, FCFS).provisions == ()


def test_once_the_budget_is_spent_a_bought_node_takes_no_more_work_of_its_queue() -> None:
    st = grown_state(nodes=0, budget=BurstBudget(gpu_hours=10.0))
    st.submit(job("half", gpus_per_pod=4, runtime_estimate=600.0))  # estimated 10 min, runs for hours
    p = schedule(st, 0.0, FCFS).provisions[0]
    st.provision_requested(p, 0.0)
    arrive(st, "cloud-a100", p, 360.0)
    no_buying = SchedulerConfig(queue_order="submit", provisioning=False)
    assert admitted(cycle(st, 360.0, no_buying)) == {"half"}
    st.submit(job("early", gpus_per_pod=4, submit=400.0, runtime_estimate=60.0))
    assert admitted(cycle(st, 400.0, no_buying)) == {"early"}  # shares the free GPUs
    st.job_finished("early", 460.0)
    st.submit(job("late", gpus_per_pod=4, submit=2 * 3600.0))
    # by two hours the node has cost 8 x 1.9 = 15 GPU-hours, past the 10 of the budget: nothing new goes there
    assert admitted(cycle(st, 2 * 3600.0, no_buying)) == set()
