"""Runtime estimates learnt from history, never from a job's own true duration.

A job that arrives without a ``runtime_estimate`` gets the median run time of the jobs of its
queue that have already completed in the simulation at the moment it is submitted (at least
``min_samples`` of them); failing that, the median over all queues; failing that, the configured
default. This is what an operator's history would tell the scheduler, and it is causal: only
completions that happened before the submission in virtual time count.
"""

from __future__ import annotations

import bisect


def _median(values: list[float]) -> float:
    n = len(values)
    mid = n // 2
    return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2.0


class HistoryEstimator:
    """Per-queue running median of completed run times (sorted lists; O(log n) lookup)."""

    def __init__(self, default_s: float, min_samples: int = 3) -> None:
        self._default = default_s
        self._min_samples = min_samples
        self._by_queue: dict[str, list[float]] = {}
        self._all: list[float] = []

    def observe(self, queue: str, run_time_s: float) -> None:
        """Record the run time of a job that has just completed."""
        bisect.insort(self._by_queue.setdefault(queue, []), run_time_s)
        bisect.insort(self._all, run_time_s)

    def estimate(self, queue: str) -> float:
        """The estimate for a job of ``queue`` submitted now."""
        own = self._by_queue.get(queue, [])
        if len(own) >= self._min_samples:
            return _median(own)
        if len(self._all) >= self._min_samples:
            return _median(self._all)
        return self._default
