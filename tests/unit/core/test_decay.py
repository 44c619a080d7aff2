"""Decay, the one rule the scheduler's fair share and the quota accountant's usage share
(``services.core.fairshare``): exact integrals, additivity over split intervals, edge cases."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.fairshare import LN2, decay_factor, integrate, interval_value

HALF = 7 * 86400.0
times = st.floats(min_value=0, max_value=90 * 86400, allow_nan=False)
rates = st.floats(min_value=0, max_value=4096, allow_nan=False)
half_lives = st.floats(min_value=60, max_value=365 * 86400, allow_nan=False)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


@pytest.mark.parametrize(("dt", "half_life", "expected"), [
    (HALF, HALF, 0.5),
    (2 * HALF, HALF, 0.25),
    (0.0, HALF, 1.0),
    (-5.0, HALF, 1.0),  # reading before the value's time: no decay
    (10.0, 0.0, 0.0),  # no half-life: no history
    (0.0, 0.0, 0.0),
    (10.0, -1.0, 0.0),
])
def test_decay_factor(dt: float, half_life: float, expected: float) -> None:
    assert decay_factor(dt, half_life) == pytest.approx(expected)


@pytest.mark.parametrize(("value", "as_of", "rate", "now", "half_life", "expected"), [
    (1000.0, 0.0, 0.0, HALF, HALF, 500.0),  # halves after one half-life
    (1000.0, 50.0, 8.0, 50.0, HALF, 1000.0),  # no time passed
    (1000.0, 50.0, 8.0, 10.0, HALF, 1000.0),  # read before its time: unchanged
    (0.0, 0.0, 10.0, 100 * HALF, HALF, 10.0 * HALF / LN2),  # a constant allocation converges to rate * tau
    (1000.0, 0.0, 8.0, 60.0, 0.0, 0.0),  # no half-life: no history
    (1000.0, 0.0, 8.0, 60.0, -5.0, 0.0),
])
def test_integrate(value: float, as_of: float, rate: float, now: float, half_life: float, expected: float) -> None:
    assert integrate(value, as_of, rate, now, half_life) == pytest.approx(expected)


@pytest.mark.parametrize(("rate", "start", "end", "at", "half_life", "expected"), [
    (8, 0.0, 60.0, 60.0, HALF, 480.0),  # a minute against a week: close to plain GPU-seconds
    (8, 0.0, 60.0, 30.0, HALF, 240.0),  # the part after ``at`` is ignored
    (8, 60.0, 60.0, 120.0, HALF, 0.0),  # empty interval
    (0, 0.0, 60.0, 60.0, HALF, 0.0),
    (8, 0.0, 60.0, 60.0, 0.0, 0.0),  # no half-life: no history
])
def test_interval_value(rate: float, start: float, end: float, at: float, half_life: float, expected: float) -> None:
    assert interval_value(rate, start, end, at, half_life) == pytest.approx(expected, rel=1e-4)


def test_exact_integral_matches_numeric_quadrature() -> None:
    rate, a, b, t = 5.0, 0.0, 3 * 86400.0, 4 * 86400.0
    steps = 20000
    dt = (b - a) / steps
    numeric = sum(rate * 0.5 ** ((t - (a + (i + 0.5) * dt)) / HALF) * dt for i in range(steps))
    assert interval_value(rate, a, b, t, HALF) == pytest.approx(numeric, rel=1e-8)


@given(v=rates, r=rates, a=times, d1=times, d2=times, h=half_lives)
def test_integrating_over_a_b_then_b_c_equals_a_c(v: float, r: float, a: float, d1: float, d2: float, h: float) -> None:
    b, c = a + d1, a + d1 + d2
    assert close(integrate(integrate(v, a, r, b, h), b, r, c, h), integrate(v, a, r, c, h))


@given(r=rates, a=times, d1=times, d2=times, extra=times, h=half_lives)
def test_interval_value_is_additive(r: float, a: float, d1: float, d2: float, extra: float, h: float) -> None:
    m, b = a + d1, a + d1 + d2
    t = b + extra
    whole = interval_value(r, a, b, t, h)
    assert close(interval_value(r, a, m, t, h) + interval_value(r, m, b, t, h), whole)
    assert whole >= 0
