"""Decay: exact integrals, additivity over split intervals, order independence."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.quota_accountant.decay import LN2, DecayedTotal, decay_factor, integrate, interval_value

HALF = 7 * 86400.0
times = st.floats(min_value=0, max_value=90 * 86400, allow_nan=False)
rates = st.floats(min_value=0, max_value=4096, allow_nan=False)
half_lives = st.floats(min_value=60, max_value=365 * 86400, allow_nan=False)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def test_value_halves_after_one_half_life() -> None:
    assert integrate(1000.0, 0.0, 0.0, HALF, HALF) == pytest.approx(500.0)
    assert decay_factor(2 * HALF, HALF) == pytest.approx(0.25)
    assert decay_factor(-5.0, HALF) == 1.0


def test_short_interval_is_close_to_plain_gpu_seconds() -> None:
    # 8 GPUs for one minute, read at its end: decay over a minute is negligible against a week
    assert interval_value(8, 0.0, 60.0, 60.0, HALF) == pytest.approx(480.0, rel=1e-4)


def test_constant_allocation_converges_to_rate_times_tau() -> None:
    assert integrate(0.0, 10.0, 0.0, 100 * HALF, HALF) == pytest.approx(10.0 * HALF / LN2)


def test_exact_integral_matches_numeric_quadrature() -> None:
    rate, a, b, t = 5.0, 0.0, 3 * 86400.0, 4 * 86400.0
    steps = 20000
    dt = (b - a) / steps
    numeric = sum(rate * 0.5 ** ((t - (a + (i + 0.5) * dt)) / HALF) * dt for i in range(steps))
    assert interval_value(rate, a, b, t, HALF) == pytest.approx(numeric, rel=1e-8)


@given(v=rates, r=rates, a=times, d1=times, d2=times, h=half_lives)
def test_integrating_over_a_b_then_b_c_equals_a_c(v: float, r: float, a: float, d1: float, d2: float, h: float) -> None:
    b, c = a + d1, a + d1 + d2
    assert close(integrate(integrate(v, r, a, b, h), r, b, c, h), integrate(v, r, a, c, h))


@given(r=rates, a=times, d1=times, d2=times, extra=times, h=half_lives)
def test_interval_value_is_additive(r: float, a: float, d1: float, d2: float, extra: float, h: float) -> None:
    m, b = a + d1, a + d1 + d2
    t = b + extra
    whole = interval_value(r, a, b, t, h)
    assert close(interval_value(r, a, m, t, h) + interval_value(r, m, b, t, h), whole)
    assert whole >= 0


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
