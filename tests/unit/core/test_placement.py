"""Gang placement: all-or-nothing, best fit, GPU types, selectors, taints, topology, NVLink groups."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from services.core import (
    Admit,
    CycleResult,
    Node,
    PendingReason,
    SchedulerConfig,
    SchedulerState,
    TopologyMode,
    TopologyRequest,
)

from .builders import admitted, check_invariants, cycle, job, node, queue, quotas, state

BIG = 1000
NO_BACKFILL = SchedulerConfig(backfill=False)
INFERENCE = MappingProxyType({"pool": "inference"})


def placed(st_result: CycleResult, job_id: str) -> dict[str, int]:
    for d in st_result.decisions:
        if isinstance(d, Admit) and d.job_id == job_id:
            return {a.node: a.pods for a in d.placement.nodes}
    raise AssertionError(f"{job_id} not admitted")


def test_gang_is_all_or_nothing() -> None:
    st = state([queue("q", BIG)], [node("n1", 8), node("n2", 8)], [job("small", gpus_per_pod=4)])
    cycle(st, 0)
    st.submit(job("g", gpus_per_pod=8, replicas=2, submit=1))
    result = cycle(st, 1, NO_BACKFILL)
    assert result.decisions == ()
    assert result.pending["g"].reason is PendingReason.CAPACITY
    assert set(st.running_jobs()) == {"small"}
    st.job_finished("small", 2)
    assert placed(cycle(st, 2), "g") == {"n1": 1, "n2": 1}


def test_gang_larger_than_any_cluster_never_matches() -> None:
    st = state([queue("q", BIG)], [node("n1", 8), node("n2", 8)], [job("g", gpus_per_pod=8, replicas=3)])
    result = cycle(st, 0)
    assert result.pending["g"].reason is PendingReason.NO_MATCHING_NODES
    assert result.pending["g"].estimated_start is None


def test_best_fit_fills_busiest_node_first() -> None:
    st = state([queue("q", BIG)], [node("n1", 8), node("n2", 8)], [job("a", gpus_per_pod=6)])
    cycle(st, 0)
    busy = next(iter(placed_nodes(st, "a")))
    st.submit(job("b", gpus_per_pod=2, submit=1))
    result = cycle(st, 1)
    assert placed(result, "b") == {busy: 1}


def placed_nodes(st: SchedulerState, job_id: str) -> dict[str, int]:
    rj = st.running_jobs()[job_id]
    return {a.node: a.pods for a in rj.placement.nodes}


@pytest.mark.parametrize(
    ("kw", "expected_node", "reason"),
    [
        ({"gpu_type": "h100"}, "h", None),
        ({"gpu_type": "v100"}, None, PendingReason.NO_MATCHING_NODES),
        ({"node_selector": INFERENCE, "tolerations": frozenset({"dedicated"})}, "sel", None),
        ({"node_selector": MappingProxyType({"pool": "inference"})}, None, PendingReason.NO_MATCHING_NODES),
        ({"tolerations": frozenset({"dedicated"})}, None, None),  # may use any node, tainted too
        ({"node_selector": MappingProxyType({"pool": "nope"})}, None, PendingReason.NO_MATCHING_NODES),
        ({"cluster": "c2"}, "other", None),
        ({"gpu_type": "a100", "replicas": 16}, None, PendingReason.NO_MATCHING_NODES),
        ({"gpu_type": "l4", "cpu_m": 10_000}, "cpu", None),
    ],
)
def test_node_matching(kw: dict[str, Any], expected_node: str | None, reason: PendingReason | None) -> None:
    nodes = [
        node("h", gpu_type="h100"),
        node("sel", labels=MappingProxyType({"pool": "inference"}), taints=frozenset({"dedicated"})),
        node("other", cluster="c2", gpu_type="t4"),
        node("cpu", gpu_type="l4", cpu_m=16_000),
        node("small", gpu_type="l4", cpu_m=4_000),
        node("sick", gpu_type="v100", healthy=False, taints=frozenset({"x"})),
    ]
    q = queue("q", quotas=quotas(gpu_a100=BIG, gpu_h100=BIG, gpu_l4=BIG, gpu_t4=BIG, gpu_v100=BIG, cpu=10**6))
    st = state([q], nodes, [job("j", gpus_per_pod=1, **kw)])
    result = cycle(st, 0)
    if reason is not None:
        assert result.pending["j"].reason is reason
    elif expected_node is not None:
        assert placed(result, "j") == {expected_node: 1}
    else:
        assert admitted(result) == {"j"}
    assert "sick" not in placed_nodes(st, "j") if "j" in st.running_jobs() else True


def test_taints_must_all_be_tolerated() -> None:
    nodes = [node("t", taints=frozenset({"a", "b"}))]
    st = state([queue("q", BIG)], nodes, [job("one", tolerations=frozenset({"a"}))])
    assert cycle(st, 0).pending["one"].reason is PendingReason.NO_MATCHING_NODES
    st.submit(job("both", tolerations=frozenset({"a", "b"}), submit=1))
    assert admitted(cycle(st, 1)) == {"both"}


def test_unhealthy_and_cordoned_nodes_are_skipped() -> None:
    nodes = [node("sick", healthy=False), node("cordoned", schedulable=False), node("ok", 2)]
    st = state([queue("q", BIG)], nodes, [job("a", gpus_per_pod=2), job("b", gpus_per_pod=2, submit=1)])
    result = cycle(st, 0, NO_BACKFILL)
    assert placed(result, "a") == {"ok": 1}
    assert result.pending["b"].reason is PendingReason.CAPACITY


def rack_nodes() -> list[Node]:
    return [
        node("r1a", 4, rack="r1"),
        node("r1b", 4, rack="r1"),
        node("r2a", 8, rack="r2", block="b2"),
        node("r2b", 2, rack="r2", block="b2"),
    ]


@pytest.mark.parametrize(
    ("level", "mode", "replicas", "expected"),
    [
        ("rack", TopologyMode.REQUIRED, 4, {"r1a": 2, "r1b": 2}),  # r1 (8 GPUs) is the tightest rack
        ("node", TopologyMode.REQUIRED, 4, {"r2a": 4}),
        ("rack", TopologyMode.REQUIRED, 6, None),  # no rack has 12 GPUs
        ("block", TopologyMode.REQUIRED, 6, None),
        ("zone", TopologyMode.REQUIRED, 6, "any"),
        ("rack", TopologyMode.PREFERRED, 6, "any"),  # falls back to the whole cluster
        ("rack", TopologyMode.PREFERRED, 2, {"r1a": 2}),  # tightest single rack
    ],
)
def test_topology(level: str, mode: TopologyMode, replicas: int, expected: object) -> None:
    j = job("g", gpus_per_pod=2, replicas=replicas, topology=TopologyRequest(level, mode))
    st = state([queue("q", BIG)], rack_nodes(), [j])
    result = cycle(st, 0)
    if expected is None:
        assert result.pending["g"].reason is PendingReason.TOPOLOGY
    elif expected == "any":
        assert sum(placed(result, "g").values()) == replicas
    else:
        assert placed(result, "g") == expected
    check_invariants(st)


def test_gang_never_spans_clusters() -> None:
    nodes = [node("a", 4, cluster="c1"), node("b", 4, cluster="c2")]
    st = state([queue("q", BIG)], nodes, [job("g", gpus_per_pod=4, replicas=2)])
    result = cycle(st, 0)
    assert result.pending["g"].reason is PendingReason.NO_MATCHING_NODES
    assert st.running_jobs() == {}


@pytest.mark.parametrize(
    ("groups", "pods", "gpus", "expected_groups"),
    [
        ((4, 4), 2, 2, (0, 0)),  # both pods fit in group 0 (best fit)
        ((4, 4), 2, 4, (0, 1)),
        ((4, 4), 1, 8, (-1,)),  # larger than any group: spans groups
        ((2, 2, 4), 3, 2, (0, 1, 2)),
    ],
)
def test_nvlink_groups(groups: tuple[int, ...], pods: int, gpus: int, expected_groups: tuple[int, ...]) -> None:
    n = node("n", sum(groups), nvlink_groups=groups)
    st = state([queue("q", BIG)], [n], [job("g", gpus_per_pod=gpus, replicas=pods)])
    result = cycle(st, 0)
    (d,) = result.decisions
    assert isinstance(d, Admit)
    assert d.placement.nodes[0].groups == expected_groups
    check_invariants(st)


def test_nvlink_fragmentation_blocks_pod_that_needs_one_group() -> None:
    n = node("n", 8, nvlink_groups=(4, 4))
    st = state([queue("q", BIG)], [n], [job("a", gpus_per_pod=3), job("b", gpus_per_pod=3, submit=1)])
    cycle(st, 0)
    assert st.cap.free_groups["n"] == (1, 1)
    st.submit(job("c", gpus_per_pod=2, submit=2))  # 2 GPUs free in total, but in different groups
    result = cycle(st, 1, NO_BACKFILL)
    assert result.pending["c"].reason is PendingReason.CAPACITY


def test_bin_packing_off_spreads_to_emptiest_node() -> None:
    st = state([queue("q", BIG)], [node("n1", 8), node("n2", 8)], [job("a", gpus_per_pod=6)])
    cycle(st, 0)
    busy = next(iter(placed_nodes(st, "a")))
    st.submit(job("b", gpus_per_pod=2, submit=1))
    result = cycle(st, 1, SchedulerConfig(bin_packing=False))
    assert placed(result, "b") == {({"n1", "n2"} - {busy}).pop(): 1}
