"""How often a cycle also recomputes the waiting jobs' statuses (positions and estimated starts).

With a large backlog that recomputation is most of a cycle's cost, and the cycle holds the queue
manager's lock, so inputs wait while it runs. Reports are therefore spaced at least ``interval_s``
apart and, when one takes long, ``cost_factor`` times its own duration apart: reporting then uses at
most about a tenth of the service's time however long the backlog grows. Cycles in between decide
the same way, only without refreshing those statuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_COST_FACTOR = 10.0


@dataclass
class ReportPacer:
    interval_s: float
    cost_factor: float = DEFAULT_COST_FACTOR
    _at: float = field(default=float("-inf"), init=False)
    _gap: float = field(default=0.0, init=False)

    def due(self, now: float) -> bool:
        """Whether a cycle at ``now`` should report (also when the clock went back past the last one)."""
        return not now - max(self.interval_s, self._gap) < self._at <= now

    def reported(self, now: float, cost_s: float) -> None:
        """A reporting cycle at ``now`` took ``cost_s`` seconds."""
        self._at = now
        self._gap = self.cost_factor * max(cost_s, 0.0)

    @property
    def gap_s(self) -> float:
        """The current least time between two reports."""
        return max(self.interval_s, self._gap)
