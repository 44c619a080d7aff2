"""Reservations and start estimates of jobs confined to a pool by a node selector.

Each pool is a node group that a queue names through a node selector (the partitioned set-up): a
confined job's reservation is searched, held and estimated on its own pool's nodes only.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core import PendingReason, SchedulerConfig, SchedulerState
from services.core.backfill import find_reservation
from services.core.cycle import Cycle

from .builders import FCFS, admitted, cycle, job, node, queue, state

BIG = 1000
POOL_A: Mapping[str, str] = MappingProxyType({"pool": "a"})
POOL_B: Mapping[str, str] = MappingProxyType({"pool": "b"})
SELECTORS = {"a": POOL_A, "b": POOL_B, "": MappingProxyType({})}


def two_pools(runs: list[tuple[str, str, int, float]], b_nodes: int = 2) -> SchedulerState:
    """Pools a (a1, a2) and b (b1, b2, ...) of 8-GPU nodes, queues qa and qb (no cohort) naming them;
    ``runs``: (job, pool, GPUs, runtime estimate) admitted at t=0 in that order."""
    nodes = [node(f"a{i}", labels=POOL_A) for i in (1, 2)]
    nodes += [node(f"b{i}", labels=POOL_B) for i in range(1, b_nodes + 1)]
    st = state([queue("qa", BIG), queue("qb", BIG)], nodes)
    for i, (name, pool, gpus, est) in enumerate(runs):
        st.submit(job(name, "q" + pool, submit=i * 0.01, gpus_per_pod=gpus, runtime_estimate=est,
                      node_selector=SELECTORS[pool]))
        cycle(st, 0, FCFS)
        assert name in st.running_jobs()
    return st


def pool_nodes(st: SchedulerState, pool: str) -> set[str]:
    return {n for n, node_ in st.nodes().items() if node_.labels.get("pool") == pool}


# pool a is busy until 1000 (a1) and 3000 (a2); pool b frees up early (100 and 200)
BUSY_A_EARLY_B = [("ra1", "a", 8, 1000.0), ("ra2", "a", 8, 3000.0), ("rb1", "b", 8, 100.0), ("rb2", "b", 8, 200.0)]


@pytest.mark.parametrize(
    ("pool", "gpus", "replicas", "start", "nodes"),
    [
        ("a", 8, 1, 1000.0, "a"),  # the first node of its own pool to free, not b's at 100
        ("a", 8, 2, 3000.0, "a"),  # both of its own nodes, not b's two at 200
        ("b", 8, 2, 200.0, "b"),
        ("", 8, 2, 200.0, "b"),  # unconfined: any node of the type, as before
    ],
)
def test_reservation_is_held_on_the_jobs_own_pool(pool: str, gpus: int, replicas: int, start: float,
                                                   nodes: str) -> None:
    st = two_pools(BUSY_A_EARLY_B)
    big = job("big", "qa" if pool != "b" else "qb", submit=1, gpus_per_pod=gpus, replicas=replicas,
              node_selector=SELECTORS[pool])
    st.submit(big)
    res = find_reservation(Cycle(st, 10, SchedulerConfig()), big)
    assert res is not None
    assert res.time == start
    assert res.nodes <= pool_nodes(st, nodes)


def test_releases_in_other_pools_do_not_use_up_the_search() -> None:
    """Many small jobs ending early in pool b used to spend every placement try of pool a's gang."""
    runs = [("ra1", "a", 8, 5000.0), ("ra2", "a", 8, 6000.0)]
    runs += [(f"rb{i}", "b", 1, 10.0 + i) for i in range(80)]
    st = two_pools(runs, b_nodes=10)
    big = job("big", "qa", submit=1, gpus_per_pod=8, replicas=2, node_selector=POOL_A)
    st.submit(big)
    res = find_reservation(Cycle(st, 0, SchedulerConfig()), big)
    assert res is not None and res.time == 6000.0 and res.nodes == {"a1", "a2"}


def test_each_pool_holds_its_own_reservation_and_backfill_elsewhere_goes_on() -> None:
    # pool a: a1 busy until 1000, a2 half busy until 3000; pool b: b1 busy until 500, b2 free
    st = two_pools([("ra1", "a", 8, 1000.0), ("ra2", "a", 4, 3000.0), ("rb1", "b", 8, 500.0)])
    st.submit(job("big-b", "qb", submit=1, gpus_per_pod=8, replicas=2, node_selector=POOL_B))
    st.submit(job("big-a", "qa", submit=2, gpus_per_pod=8, replicas=2, node_selector=POOL_A))
    st.submit(job("long-a", "qa", submit=3, gpus_per_pod=4, runtime_estimate=10_000.0, node_selector=POOL_A))
    st.submit(job("short-a", "qa", submit=4, gpus_per_pod=4, runtime_estimate=100.0, node_selector=POOL_A))
    st.submit(job("long-b", "qb", submit=5, gpus_per_pod=8, runtime_estimate=10_000.0, node_selector=POOL_B))
    result = cycle(st, 10, FCFS)
    info = result.pending
    assert info["big-b"].reason is PendingReason.RESERVATION and info["big-b"].estimated_start == 500.0
    # the second reservation, in a pool that shares no node with the first: held on pool a's nodes
    assert info["big-a"].reason is PendingReason.RESERVATION and info["big-a"].estimated_start == 3000.0
    # pool a's gang is not overtaken by a long job that would sit on its nodes past 3000 ...
    assert info["long-a"].reason is PendingReason.BEHIND_RESERVATION
    # ... pool b's long job is kept off b2 (b's own reservation), and a short job that ends first backfills
    assert info["long-b"].reason is PendingReason.BEHIND_RESERVATION
    assert admitted(result) == {"short-a"}


def test_small_jobs_in_other_pools_are_not_blocked_by_a_pool_reservation() -> None:
    st = two_pools([("ra1", "a", 8, 1000.0), ("ra2", "a", 4, 3000.0)])
    st.submit(job("big-a", "qa", submit=1, gpus_per_pod=8, replicas=2, node_selector=POOL_A))
    st.submit(job("long-b", "qb", submit=2, gpus_per_pod=8, runtime_estimate=10_000.0, node_selector=POOL_B))
    st.submit(job("long-b2", "qb", submit=3, gpus_per_pod=8, runtime_estimate=10_000.0, node_selector=POOL_B))
    result = cycle(st, 10, FCFS)
    assert result.pending["big-a"].reason is PendingReason.RESERVATION
    assert admitted(result) == {"long-b", "long-b2"}


@pytest.mark.parametrize(
    ("pool", "gpus", "start"),
    [
        ("a", 8, 1000.0),  # pool a's own first release; b's idle GPUs are not its
        ("a", 16, 3000.0),
        ("b", 16, 10.0),  # b is idle
        ("", 16, 10.0),  # unconfined: the pooled model, as before
    ],
)
def test_estimated_start_ignores_other_pools_capacity(pool: str, gpus: int, start: float) -> None:
    st = two_pools([("ra1", "a", 8, 1000.0), ("ra2", "a", 8, 3000.0)])
    c = Cycle(st, 10, SchedulerConfig())
    waiting = job("w", "qa" if pool != "b" else "qb", gpus_per_pod=8, replicas=gpus // 8, runtime_estimate=50.0,
                  node_selector=SELECTORS[pool])
    assert c.forecast.estimate_start(waiting) == start


def test_estimates_in_a_pool_queue_behind_each_other_only() -> None:
    st = two_pools([("ra1", "a", 8, 1000.0), ("ra2", "a", 8, 3000.0)])
    c = Cycle(st, 10, SchedulerConfig())
    first = job("w1", "qa", gpus_per_pod=8, replicas=2, runtime_estimate=500.0, node_selector=POOL_A)
    second = job("w2", "qa", gpus_per_pod=8, runtime_estimate=50.0, node_selector=POOL_A)
    other = job("w3", "qb", gpus_per_pod=8, replicas=2, runtime_estimate=50.0, node_selector=POOL_B)
    assert c.forecast.estimate_start(first) == 3000.0
    assert c.forecast.estimate_start(second) == 3500.0
    assert c.forecast.estimate_start(other) == 10.0


@settings(max_examples=60, deadline=None)
@given(
    pools=st.lists(st.sampled_from("abc"), min_size=2, max_size=6),
    runs=st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from((1, 2, 4, 8)), st.floats(1.0, 5000.0)), max_size=10
    ),
    target=st.sampled_from("abc"),
    replicas=st.integers(1, 3),
    gpus=st.sampled_from((1, 4, 8)),
)
def test_a_reservation_never_names_a_node_outside_the_jobs_pool(
    pools: list[str], runs: list[tuple[str, int, float]], target: str, replicas: int, gpus: int
) -> None:
    nodes = [node(f"n{i}", labels=MappingProxyType({"pool": p})) for i, p in enumerate(pools)]
    names = {p: MappingProxyType({"pool": p}) for p in "abc"}
    st = state([queue("q", BIG)], nodes)
    for i, (p, g, est) in enumerate(runs):
        st.submit(job(f"r{i}", submit=i, gpus_per_pod=g, runtime_estimate=est, node_selector=names[p]))
        cycle(st, 0, FCFS)
    big = job("big", submit=100, gpus_per_pod=gpus, replicas=replicas, node_selector=names[target])
    st.submit(big)
    blocked = Cycle(st, 1, SchedulerConfig()).try_admit(big)
    c = Cycle(st, 1, SchedulerConfig())
    res = find_reservation(c, big)
    mine = {n.name for n in nodes if n.labels["pool"] == target}
    if res is not None:
        assert res.nodes <= mine
        assert res.time >= 1
    if blocked is PendingReason.CAPACITY:
        assert res is not None  # a gang that fits its pool gets a reservation for when the pool drains
    # the fluid estimate counts the same pool's GPUs without their fragmentation: never later than the
    # reservation, never before now
    start = c.forecast.estimate_start(big)
    if res is not None:
        assert start is not None and 1 <= start <= res.time
