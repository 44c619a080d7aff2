"""Health-aware retries in the core: a job's ``avoid_nodes`` are used only when nothing else fits."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core import (
    Admit,
    CycleResult,
    Job,
    Node,
    SchedulerConfig,
    SchedulerState,
    TopologyMode,
    TopologyRequest,
    schedule,
)
from services.core.placement import Placer

from .builders import GPU, check_invariants, cycle, job, node, queue, state

BIG = 1000
RACK_REQUIRED = TopologyRequest("rack", TopologyMode.REQUIRED)
RACK_PREFERRED = TopologyRequest("rack", TopologyMode.PREFERRED)


def placement(result: CycleResult, job_id: str) -> dict[str, int] | None:
    for d in result.decisions:
        if isinstance(d, Admit) and d.job_id == job_id:
            return {a.node: a.pods for a in d.placement.nodes}
    return None


def busy_cluster() -> list[Node]:
    """n1 (rack r1) is half full; n2 (r1) and n3 (r2) are empty: best fit prefers n1."""
    return [node("n1", 8, rack="r1"), node("n2", 8, rack="r1"), node("n3", 8, rack="r2")]


def with_half_of_n1_taken() -> SchedulerState:
    st = state([queue("q", BIG)], busy_cluster(), [job("filler", gpus_per_pod=4)])
    first = cycle(st, 0)
    assert placement(first, "filler") == {"n1": 1}
    return st


CASES = [
    # (name, job keyword arguments, avoided nodes, expected placement)
    ("best fit would pick the avoided node", {"gpus_per_pod": 4}, {"n1"}, {"n2": 1}),
    ("nothing avoided: best fit as always", {"gpus_per_pod": 4}, set(), {"n1": 1}),
    ("an unknown node avoided changes nothing", {"gpus_per_pod": 4}, {"gone"}, {"n1": 1}),
    ("a gang packs onto the nodes not avoided", {"gpus_per_pod": 2, "replicas": 4}, {"n1"}, {"n2": 4}),
    ("every node that fits is avoided: use them", {"gpus_per_pod": 4}, {"n1", "n2", "n3"}, {"n1": 1}),
    ("the gang needs an avoided node: it may use it",
     {"gpus_per_pod": 4, "replicas": 5}, {"n2"}, {"n1": 1, "n2": 2, "n3": 2}),
    ("the gang needs one avoided node: only one, the other's room first",
     {"gpus_per_pod": 4, "replicas": 3}, {"n1", "n2"}, {"n3": 2, "n1": 1}),
    ("required rack: the other rack", {"gpus_per_pod": 4, "topology": RACK_REQUIRED}, {"n1", "n2"}, {"n3": 1}),
    ("required rack: only the avoided rack fits",
     {"gpus_per_pod": 8, "replicas": 2, "topology": RACK_REQUIRED}, {"n2"}, None),
    ("preferred rack gives way to avoidance",
     {"gpus_per_pod": 4, "replicas": 3, "topology": RACK_PREFERRED}, {"n1"}, {"n2": 2, "n3": 1}),
]


@pytest.mark.parametrize(("kw", "avoid", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_avoided_nodes_are_a_last_resort(kw: dict[str, object], avoid: set[str],
                                         expected: dict[str, int] | None) -> None:
    st = with_half_of_n1_taken()
    st.submit(job("retry", submit=1, attempt=1, avoid_nodes=frozenset(avoid), **kw))  # type: ignore[arg-type]
    result = cycle(st, 1)
    assert placement(result, "retry") == expected
    check_invariants(st)


def test_a_requeue_after_an_infrastructure_failure_carries_the_nodes_to_avoid() -> None:
    st = state([queue("q", BIG)], busy_cluster(), [job("j", gpus_per_pod=8)])
    first = placement(cycle(st, 0), "j")
    assert first is not None
    [bad] = first
    st.job_stopped("j", 1, requeue=True, avoid=frozenset({bad}))
    assert st.pending["j"].attempt == 1 and st.pending["j"].avoid_nodes == {bad}
    second = placement(cycle(st, 2), "j")
    assert second is not None and bad not in second
    # a later requeue (a preemption) that names nothing new keeps what the job avoids
    st.job_stopped("j", 3, requeue=True)
    assert st.pending["j"].avoid_nodes == {bad} and st.pending["j"].attempt == 2


def test_a_hard_exclusion_stays_hard_while_avoidance_falls_back() -> None:
    # n2 is held for a reservation, n1 is avoided: the job falls back to n1, never to n2
    st = state([queue("q", BIG)], [node("n1", 8), node("n2", 8)])
    avoiding = job("j", gpus_per_pod=8, avoid_nodes=frozenset({"n1"}))
    found = Placer(st.cap.clone(), avoiding, frozenset({"n2"})).place(GPU, 1, 1)
    assert found is not None and [a.node for a in found.nodes] == ["n1"]
    assert Placer(st.cap.clone(), avoiding, frozenset({"n1", "n2"})).place(GPU, 1, 1) is None


# ---------------------------------------------------------------------- property


@st.composite
def situations(draw: st.DrawFn) -> tuple[list[Node], list[Job], Job]:
    count = draw(st.integers(1, 5))
    nodes = [node(f"n{i}", draw(st.sampled_from((2, 4, 8))), rack=f"r{i % 2}",
                  nvlink_groups=draw(st.sampled_from(((), "halves")))) for i in range(count)]
    nodes = [replace(n, nvlink_groups=(n.gpus // 2, n.gpus // 2)) if n.nvlink_groups else n for n in nodes]
    fillers = [job(f"f{i}", gpus_per_pod=draw(st.integers(1, 4))) for i in range(draw(st.integers(0, 4)))]
    avoid = frozenset(n.name for n in nodes if draw(st.booleans()))
    target = job("t", submit=1, attempt=1, gpus_per_pod=draw(st.integers(1, 8)), replicas=draw(st.integers(1, 4)),
                 topology=draw(st.sampled_from((None, RACK_PREFERRED, RACK_REQUIRED,
                                                TopologyRequest("node", TopologyMode.REQUIRED)))),
                 avoid_nodes=avoid)
    return nodes, fillers, target


def _place_target(nodes: list[Node], fillers: list[Job], target: Job) -> dict[str, int] | None:
    st = state([queue("q", BIG)], nodes, fillers)
    cycle(st, 0, SchedulerConfig(backfill=False))
    st.submit(target)
    result = schedule(st, 1, SchedulerConfig(backfill=False))
    return placement(result, target.job_id)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(situations())
def test_never_on_an_avoided_node_while_a_placement_without_it_exists(case: tuple[list[Node], list[Job], Job]) -> None:
    nodes, fillers, target = case
    avoid = target.avoid_nodes
    chosen = _place_target(nodes, fillers, target)
    # the same cluster with the avoided nodes closed to new work, and the job avoiding nothing
    closed = [replace(n, schedulable=False) if n.name in avoid else n for n in nodes]
    # fillers land first, on the same nodes in both worlds, because they are placed before the nodes close
    without = _place_target_after_fillers(nodes, closed, fillers, replace(target, avoid_nodes=frozenset()))
    anywhere = _place_target(nodes, fillers, replace(target, avoid_nodes=frozenset()))
    if without is not None:
        assert chosen is not None and not set(chosen) & avoid, (chosen, without)
    if anywhere is not None:
        assert chosen is not None
    else:
        assert chosen is None


def _place_target_after_fillers(nodes: list[Node], closed: list[Node], fillers: list[Job],
                                target: Job) -> dict[str, int] | None:
    st = state([queue("q", BIG)], nodes, fillers)
    cycle(st, 0, SchedulerConfig(backfill=False))
    for n in closed:
        st.upsert_node(n)
    st.submit(target)
    return placement(schedule(st, 1, SchedulerConfig(backfill=False)), target.job_id)
