"""Percentiles, per-job timelines and the small tables the benchmarks print."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Spread:
    """p50 / p95 / p99 / max of a sample, in seconds."""

    count: int
    p50: float
    p95: float
    p99: float
    worst: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(len(values), percentile(values, 50), percentile(values, 95), percentile(values, 99),
                   max(values) if values else math.nan)

    def ms(self) -> str:
        """``p50 / p95 / p99`` in milliseconds."""
        return f"{_ms(self.p50)} / {_ms(self.p95)} / {_ms(self.p99)}"


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.0f}"


@dataclass
class Timeline:
    """Wall-clock moments (``time.time()`` of this process) per job: submitted, decided, created, stopped."""

    submitted: dict[str, float] = field(default_factory=dict)
    decided: dict[str, float] = field(default_factory=dict)  # the JobAdmitted envelope's occurred_at
    created: dict[str, float] = field(default_factory=dict)  # the fake cluster consumed JobAdmitted
    preempt_requested: dict[str, float] = field(default_factory=dict)
    stopped: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    admitted_last: dict[str, float] = field(default_factory=dict)  # the latest JobAdmitted's occurred_at
    held: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # each admission until it ended
    evictions: dict[str, int] = field(default_factory=dict)
    _holding: dict[str, float] = field(default_factory=dict)

    def hold(self, job: str, at: float) -> None:
        """The job was admitted at ``at`` (again, after a preemption)."""
        self.admitted_last[job] = at
        self._holding[job] = at

    def release(self, job: str, at: float, *, evicted: bool = False) -> None:
        """The job's admission ended at ``at``: it finished, or it was preempted (``evicted``)."""
        since = self._holding.pop(job, None)
        if since is not None:
            self.held.setdefault(job, []).append((since, max(at, since)))
        if evicted:
            self.evictions[job] = self.evictions.get(job, 0) + 1

    def delays(self, since: dict[str, float], until: dict[str, float], jobs: Iterable[str] | None = None,
               ) -> list[float]:
        """``until[job] - since[job]`` for the jobs in both (or in ``jobs``)."""
        chosen = until.keys() if jobs is None else jobs
        return [until[j] - since[j] for j in chosen if j in until and j in since]


@dataclass
class Table:
    """A plain-text table printed with aligned columns."""

    title: str
    header: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def render(self) -> str:
        widths = [max(len(str(r[i])) for r in [self.header, *self.rows]) for i in range(len(self.header))]

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        out = [self.title, line(self.header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        out += [line(r) for r in self.rows]
        out += [f"  {n}" for n in self.notes]
        return "\n".join(out)


def rate(count: int, seconds: float) -> str:
    """``count / seconds`` formatted as a per-second figure."""
    return "-" if seconds <= 0 else f"{count / seconds:,.0f}/s"
