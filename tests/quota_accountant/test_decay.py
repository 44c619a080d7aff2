"""The accountant's running decayed total: the order intervals are added in does not matter (the decay
rule itself is tested with the core, in ``tests/unit/core/test_decay.py``)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from services.core.fairshare import interval_value
from services.quota_accountant.decay import DecayedTotal

HALF = 7 * 86400.0
times = st.floats(min_value=0, max_value=90 * 86400, allow_nan=False)
rates = st.floats(min_value=0, max_value=4096, allow_nan=False)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


@given(
    pieces=st.lists(st.tuples(rates, times, times), min_size=1, max_size=8),
    order=st.randoms(use_true_random=False),
)
def test_decayed_total_does_not_depend_on_order(pieces: list[tuple[float, float, float]], order: object) -> None:
    intervals = [(r, s, s + d) for r, s, d in pieces]
    end = max(e for _, _, e in intervals) + 3600
    forward = DecayedTotal(HALF)
    for r, s, e in intervals:
        forward.add_interval(r, s, e)
    shuffled = list(intervals)
    order.shuffle(shuffled)  # type: ignore[attr-defined]
    backward = DecayedTotal(HALF)
    for r, s, e in shuffled:
        backward.add_interval(r, s, e)
    expected = sum(interval_value(r, s, e, end, HALF) for r, s, e in intervals)
    assert close(forward.value_at(end), backward.value_at(end))
    assert close(forward.value_at(end), expected)
    assert forward.value_at(end) >= 0
