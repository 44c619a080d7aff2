"""What a benchmark run tells the command around it besides its table: how far it is (a progress callback the
command sets, e.g. ``muster bench``'s rich bars) and the per-job moments of each measured scenario (which
``muster bench ... --plot`` draws, ``bench/system/plots.py``). Both default to nothing; the benchmarks
work the same without them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bench.system.measure import Timeline

Progress = Callable[[str, float, float | None], None]
"""``(description, done, total)``."""


def _quiet(description: str, done: float, total: float | None) -> None:
    return None


@dataclass(frozen=True)
class Series:
    """One measured scenario: per job (in submission order), seconds from the scenario's first submission to
    its submission and to its decision (NaN when it was not admitted). ``offered_per_s``: the pace asked for
    (None: a burst)."""

    name: str
    submitted: tuple[float, ...]
    decided: tuple[float, ...]
    offered_per_s: float | None = None

    @classmethod
    def of(cls, name: str, timeline: Timeline, jobs: Iterable[str], offered_per_s: float | None = None) -> Series:
        chosen = sorted((j for j in jobs if j in timeline.submitted), key=lambda j: timeline.submitted[j])
        if not chosen:
            return cls(name, (), (), offered_per_s)
        start = timeline.submitted[chosen[0]]
        return cls(name, tuple(timeline.submitted[j] - start for j in chosen),
                   tuple(timeline.decided[j] - start if j in timeline.decided else math.nan for j in chosen),
                   offered_per_s)

    def latencies(self) -> list[float]:
        """Submit -> decision of every admitted job, seconds, in submission order."""
        return [d - s for s, d in zip(self.submitted, self.decided, strict=True) if not math.isnan(d)]


@dataclass
class Observer:
    progress: Progress = _quiet
    series: list[Series] = field(default_factory=list)
    benchmark: str = ""

    def reset(self, benchmark: str, progress: Progress | None = None) -> None:
        self.benchmark = benchmark
        self.progress = progress or _quiet
        self.series = []


#: the run's observer (one benchmark runs per process)
OBSERVER = Observer()


def counting(description: str, done: Callable[[], int], total: int, condition: Callable[[], bool],
             ) -> Callable[[], bool]:
    """``condition``, reporting ``done()`` of ``total`` under ``description`` each time it is evaluated."""

    def check() -> bool:
        OBSERVER.progress(description, done(), total)
        return condition()

    return check
