"""A running decayed sum of GPU time, on the core's decay rule (``services.core.fairshare``): the usage the
accountant reports is the same figure the scheduler's fair share decays. Nothing here reads a clock."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.fairshare import decay_factor, interval_value


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
