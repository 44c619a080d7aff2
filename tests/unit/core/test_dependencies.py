"""Job dependencies: the verdict on a waiting job's conditions, and cycles."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from services.core.dependencies import After, On, Verdict, find_cycle, verdict

A, B = "train", "eval"


@pytest.mark.parametrize(
    ("after", "states", "expected"),
    [
        ([], {}, Verdict(True)),
        ([After(A)], {A: "running"}, Verdict(False, (A,))),
        ([After(A)], {A: "succeeded"}, Verdict(True)),
        ([After(A)], {A: "failed"}, Verdict(False, broken=(A, "train ended failed, not succeeded"))),
        ([After(A)], {A: "cancelled"}, Verdict(False, broken=(A, "train ended cancelled, not succeeded"))),
        ([After(A, On.FAILED)], {A: "failed"}, Verdict(True)),
        ([After(A, On.FAILED)], {A: "succeeded"}, Verdict(False, broken=(A, "train ended succeeded, not failed"))),
        ([After(A, On.FINISHED)], {A: "rejected"}, Verdict(True)),
        ([After(A, On.FINISHED)], {A: "preempting"}, Verdict(False, (A,))),
        ([After(A), After(B)], {A: "succeeded"}, Verdict(False, (B,), (B,))),
        ([After(A), After(B, On.FINISHED)], {A: "pending", B: "failed"}, Verdict(False, (A,))),
        ([After(A), After(B)], {A: "running", B: "failed"},
         Verdict(False, broken=(B, "eval ended failed, not succeeded"))),
    ],
)
def test_verdict(after: list[After], states: dict[str, str], expected: Verdict) -> None:
    assert verdict(after, states) == expected


def test_cycles() -> None:
    assert find_cycle({}) is None
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"x": ["y", "z"], "y": ["z"], "z": []}) is None  # a diamond is no cycle
    assert find_cycle({"p": ["q"], "q": ["r"], "r": ["q"]}) == ["q", "r", "q"]


@settings(max_examples=200, deadline=None)
@given(st_.dictionaries(st_.sampled_from("abcdefg"), st_.lists(st_.sampled_from("abcdefg"), max_size=3), max_size=7))
def test_find_cycle_agrees_with_a_topological_sort(edges: dict[str, list[str]]) -> None:
    """A cycle is reported exactly when the graph has no topological order, and it is a real cycle."""
    remaining = {n: set(v) for n, v in edges.items()}
    for targets in list(remaining.values()):
        for t in targets:
            remaining.setdefault(t, set())
    while True:
        free = [n for n, deps in remaining.items() if not deps]
        if not free:
            break
        for n in free:
            del remaining[n]
        for deps in remaining.values():
            deps.difference_update(free)
    cycle = find_cycle(edges)
    assert (cycle is None) == (not remaining)
    if cycle is not None:
        assert cycle[0] == cycle[-1]
        assert all(cycle[i + 1] in edges.get(cycle[i], ()) for i in range(len(cycle) - 1))
