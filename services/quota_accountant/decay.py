"""Exponentially decayed GPU time: exact integrals of a constant allocation over an interval.

A GPU held at time ``s`` weighs ``2 ** (-(t - s) / half_life)`` at time ``t``, so ``g`` GPUs held over
``[a, b]`` are worth ``g * tau * (exp(-(t - b) / tau) - exp(-(t - a) / tau))`` GPU-seconds at ``t``,
where ``tau = half_life / ln 2``. All times are seconds (POSIX timestamps); nothing here reads a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LN2 = math.log(2.0)


def decay_factor(dt: float, half_life_s: float) -> float:
    """Weight left after ``dt`` seconds (1 for ``dt <= 0``)."""
    if dt <= 0:
        return 1.0
    return math.exp(-dt * LN2 / half_life_s)


def integrate(value: float, rate: float, start: float, end: float, half_life_s: float) -> float:
    """Decayed value at ``end`` of ``value`` (as of ``start``) plus ``rate`` GPUs held over ``[start, end]``."""
    if end <= start:
        return value
    tau = half_life_s / LN2
    x = (end - start) / tau
    return value * math.exp(-x) + rate * tau * -math.expm1(-x)


def interval_value(rate: float, start: float, end: float, at: float, half_life_s: float) -> float:
    """Decayed value at ``at`` of ``rate`` GPUs held over ``[start, end]`` (the part after ``at`` is ignored)."""
    end = min(end, at)
    if rate <= 0 or end <= start:
        return 0.0
    return integrate(0.0, rate, start, end, half_life_s) * decay_factor(at - end, half_life_s)


@dataclass
class DecayedTotal:
    """A running decayed sum: ``value`` as of ``as_of``; intervals may be added in any order."""

    half_life_s: float
    value: float = 0.0
    as_of: float = 0.0

    def advance(self, t: float) -> None:
        """Move ``as_of`` forward to ``t`` (never backwards), decaying the value."""
        if t > self.as_of:
            self.value *= decay_factor(t - self.as_of, self.half_life_s)
            self.as_of = t

    def add_interval(self, rate: float, start: float, end: float) -> None:
        """Fold ``rate`` GPUs held over ``[start, end]`` in (advancing to ``end`` first if it is later)."""
        self.advance(end)
        self.value += interval_value(rate, start, end, self.as_of, self.half_life_s)

    def value_at(self, t: float) -> float:
        """The value at ``t`` (``t`` earlier than ``as_of`` reads the value at ``as_of``)."""
        return self.value * decay_factor(t - self.as_of, self.half_life_s)
