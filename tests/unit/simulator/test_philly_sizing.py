"""The node-scale search of bench/philly_replay.py on synthetic allocation curves."""

from __future__ import annotations

import pytest

from bench.philly_replay import find_scale


def test_find_scale_converges_on_a_proportional_curve() -> None:
    calls: list[float] = []

    def alloc(scale: float) -> float:  # demand 0.2 of the full cluster: allocation = 0.2 / scale, at most 1
        calls.append(scale)
        return min(1.0, 0.2 / scale)

    scale, seen = find_scale(alloc, 0.4, 0.739, tolerance=0.01, probes=6)
    assert abs(0.2 / scale - 0.739) <= 0.01
    assert len(seen) == len(calls) <= 3


def test_find_scale_returns_the_closest_probe_when_the_target_is_out_of_reach() -> None:
    def alloc(scale: float) -> float:  # levels off at 0.63, as static partitions do under fifo
        return min(0.63, 0.1 / scale)

    scale, seen = find_scale(alloc, 0.3, 0.739, tolerance=0.01, probes=5)
    assert len(seen) == 5
    assert alloc(scale) == pytest.approx(max(a for _, a in seen))
