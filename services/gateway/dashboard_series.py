"""Bounded series the dashboard's plots are drawn from, folded from the job status changes the gateway sees
go by (``DashboardFeeds.status`` hands each change over with the job's status before it):

- ``AllocationSeries``: GPUs allocated per queue (its admitted, running and preempting jobs), kept as the
  value at the end of every 15-second bucket in which it changed, over 6 hours;
- ``PreemptionCounts``: preemptions per queue and reason in 1-minute buckets over 6 hours (a running job
  stopped because it was cancelled is not one);
- ``WaitTimes``: the time from submission to first admission of every job, as a histogram per queue and
  size class in 15-minute slices over 24 hours.

Memory depends on the windows and the number of queues, never on the number of jobs. Every series is keyed
by (tenant, queue), the tenant being the job's own, so a plot is scoped exactly as the jobs are. Times are
the status changes' own (``updated_at``), whole seconds since the epoch. A gateway that starts reads the
status topic from its beginning and rebuilds what the topic still holds (after compaction, each job's latest
state only). Pure: no I/O.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from schemas.status import JobStatusChanged
from services.gateway.dashboard_models import SizeClass
from services.gateway.dashboard_query import HOLDING_GPUS

QueueKey = tuple[str, str]  # (tenant, queue)
SIZE_CLASSES: tuple[SizeClass, ...] = ("1", "2-4", "5-8", ">8")

ALLOCATION_STEP_S = 15
PREEMPTION_STEP_S = 60
SERIES_WINDOW_S = 6 * 3600
WAIT_SLICE_S = 15 * 60
WAIT_WINDOW_S = 24 * 3600
#: the upper edges of the wait-time histogram's bins, in seconds; one more bin holds every longer wait
WAIT_BOUNDS_S: tuple[int, ...] = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)
#: a stop that is not a preemption: the job was cancelled while it ran
_NOT_PREEMPTED = frozenset({"cancelled"})
_FIRST_ADMISSION = frozenset({"admitted", "running"})
_EPSILON = 1e-6

V = TypeVar("V")


def seconds(status: JobStatusChanged) -> int:
    """When the change happened, in whole seconds since the epoch."""
    return int(status.updated_at.timestamp())


def queue_key(status: JobStatusChanged) -> QueueKey:
    return (status.tenant, status.queue)


def held(status: JobStatusChanged | None) -> float:
    """The GPUs a job holds in this state: its share of GPUs for a GPU-sharing job, none unless admitted."""
    if status is None or status.state not in HOLDING_GPUS:
        return 0.0
    return status.gpu_share if status.gpu_share is not None else float(status.gpus)


def size_class(gpus: int) -> SizeClass:
    """A job's size class by the whole GPUs it asks for; a GPU-sharing job (0 whole GPUs) is in the smallest."""
    if gpus <= 1:
        return "1"
    if gpus <= 4:
        return "2-4"
    return "5-8" if gpus <= 8 else ">8"


class Buckets(Generic[V]):
    """Values in time buckets of ``step_s`` seconds, oldest first, none older than ``window_s`` behind the newest.

    A bucket is made when something falls into it; ``evicted`` is told of every bucket that leaves the window.
    """

    def __init__(self, step_s: int, window_s: int, empty: Callable[[], V],
                 evicted: Callable[[int, V], None] | None = None) -> None:
        self.step_s = step_s
        self.window_s = window_s
        self._empty = empty
        self._evicted = evicted
        self._items: deque[tuple[int, V]] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[int, V]]:
        return iter(self._items)

    @property
    def newest(self) -> int | None:
        return self._items[-1][0] if self._items else None

    def at(self, when: int) -> V | None:
        """The bucket ``when`` falls into, made when missing; None when it is older than the window kept."""
        start = when - when % self.step_s
        items = self._items
        if not items or start > items[-1][0]:
            items.append((start, self._empty()))
            horizon = start - self.window_s
            while items[0][0] <= horizon:
                gone = items.popleft()
                if self._evicted is not None:
                    self._evicted(*gone)
            return items[-1][1]
        if start <= items[-1][0] - self.window_s:
            return None
        # a change that arrives after newer ones: rare, and close to the newest bucket
        index = len(items) - 1
        while index >= 0 and items[index][0] > start:
            index -= 1
        if index >= 0 and items[index][0] == start:
            return items[index][1]
        value = self._empty()
        items.insert(index + 1, (start, value))
        return value


class AllocationSeries:
    """GPUs allocated per queue now (``totals``), and how that changed over the window."""

    def __init__(self, step_s: int = ALLOCATION_STEP_S, window_s: int = SERIES_WINDOW_S) -> None:
        self.totals: dict[QueueKey, float] = {}
        #: every queue's value before the oldest bucket kept
        self._baseline: dict[QueueKey, float] = {}
        self._buckets: Buckets[dict[QueueKey, float]] = Buckets(step_s, window_s, dict, self._forget)

    @property
    def step_s(self) -> int:
        return self._buckets.step_s

    def __len__(self) -> int:
        return len(self._buckets)

    def _forget(self, _start: int, values: dict[QueueKey, float]) -> None:
        for key, value in values.items():
            if value:
                self._baseline[key] = value
            else:
                self._baseline.pop(key, None)

    def observe(self, previous: JobStatusChanged | None, current: JobStatusChanged | None) -> None:
        changes: dict[QueueKey, float] = {}
        for status, sign in ((previous, -1.0), (current, 1.0)):
            if status is not None and (gpus := held(status)):
                key = queue_key(status)
                changes[key] = changes.get(key, 0.0) + sign * gpus
        changes = {key: delta for key, delta in changes.items() if abs(delta) > _EPSILON}
        latest = current if current is not None else previous
        if not changes or latest is None:
            return
        # allocation is a state, not an event: a change that arrives late counts from the newest bucket on
        newest = self._buckets.newest
        bucket = self._buckets.at(max(seconds(latest), newest if newest is not None else 0))
        assert bucket is not None
        for key, delta in changes.items():
            total = round(self.totals.get(key, 0.0) + delta, 6)
            if total > _EPSILON:
                self.totals[key] = total
            else:
                self.totals.pop(key, None)
                total = 0.0
            bucket[key] = total

    def sample(self, start: int, step_s: int, points: int,
               visible: Callable[[QueueKey], bool]) -> dict[QueueKey, list[float]]:
        """Each visible queue's GPUs at the end of every step from ``start`` (the last step's: now, with any change
        stamped later by a clock ahead of the gateway's); queues at zero throughout left out."""
        values = dict(self._baseline)
        series: dict[QueueKey, list[float]] = {}
        buckets = iter(self._buckets)
        waiting = next(buckets, None)
        for index in range(points):
            end = start + (index + 1) * step_s if index < points - 1 else None
            while waiting is not None and (end is None or waiting[0] < end):
                values.update(waiting[1])
                waiting = next(buckets, None)
            for key, value in values.items():
                if value and visible(key):
                    series.setdefault(key, [0.0] * points)[index] = value
        return series


class PreemptionCounts:
    """Preemptions per queue and reason, in buckets of ``step_s``."""

    def __init__(self, step_s: int = PREEMPTION_STEP_S, window_s: int = SERIES_WINDOW_S) -> None:
        self._buckets: Buckets[Counter[tuple[QueueKey, str]]] = Buckets(step_s, window_s, Counter)

    @property
    def step_s(self) -> int:
        return self._buckets.step_s

    def __len__(self) -> int:
        return len(self._buckets)

    def observe(self, previous: JobStatusChanged | None, current: JobStatusChanged | None) -> None:
        if current is None or current.state != "preempting" or current.reason in _NOT_PREEMPTED:
            return
        if previous is not None and previous.state == "preempting" and previous.attempt == current.attempt:
            return  # the same preemption again (a new message, a repeat)
        bucket = self._buckets.at(seconds(current))
        if bucket is not None:
            bucket[(queue_key(current), current.reason or "unknown")] += 1

    def count(self, start: int, step_s: int, points: int,
              visible: Callable[[QueueKey], bool]) -> tuple[dict[QueueKey, list[float]], Counter[str]]:
        """Preemptions of each visible queue in every step from ``start`` (the last step's with any stamped later
        by a clock ahead of the gateway's), and the window's by reason."""
        series: dict[QueueKey, list[float]] = {}
        reasons: Counter[str] = Counter()
        for bucket_start, counts in self._buckets:
            if bucket_start < start:
                continue
            index = min(points - 1, (bucket_start - start) // step_s)
            for (key, reason), n in counts.items():
                if visible(key):
                    series.setdefault(key, [0.0] * points)[index] += n
                    reasons[reason] += n
        return series, reasons


@dataclass(slots=True)
class WaitStats:
    """Waits from submission to first admission: a histogram over ``WAIT_BOUNDS_S``, their sum and longest."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(WAIT_BOUNDS_S) + 1))
    total_s: float = 0.0
    max_s: float = 0.0

    @property
    def jobs(self) -> int:
        return sum(self.counts)

    def add(self, wait_s: float) -> None:
        self.counts[bisect.bisect_right(WAIT_BOUNDS_S, wait_s)] += 1
        self.total_s += wait_s
        self.max_s = max(self.max_s, wait_s)

    def merge(self, other: WaitStats) -> None:
        for index, n in enumerate(other.counts):
            self.counts[index] += n
        self.total_s += other.total_s
        self.max_s = max(self.max_s, other.max_s)

    def at_most(self, fraction: float) -> float:
        """An upper bound of the wait that ``fraction`` of the jobs did not exceed: the upper edge of the bin
        that job falls into (the longest wait seen, for the last bin or when that is less)."""
        rank = max(1, math.ceil(self.jobs * fraction))  # that job's rank, counted from 1
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                edge = WAIT_BOUNDS_S[index] if index < len(WAIT_BOUNDS_S) else self.max_s
                return min(float(edge), self.max_s)
        return self.max_s


WaitKey = tuple[QueueKey, SizeClass]


class WaitTimes:
    """Per queue and size class, the waits of the jobs first admitted in each slice of ``slice_s``."""

    def __init__(self, slice_s: int = WAIT_SLICE_S, window_s: int = WAIT_WINDOW_S) -> None:
        self._slices: Buckets[dict[WaitKey, WaitStats]] = Buckets(slice_s, window_s, dict)

    @property
    def slice_s(self) -> int:
        return self._slices.step_s

    def __len__(self) -> int:
        return len(self._slices)

    def observe(self, previous: JobStatusChanged | None, current: JobStatusChanged | None) -> None:
        if current is None or current.state not in _FIRST_ADMISSION or current.attempt != 0:
            return
        if previous is not None and previous.attempt == 0 and previous.state in HOLDING_GPUS:
            return  # admitted before: running now, or the same state again
        stats = self._slices.at(seconds(current))
        if stats is None:
            return
        key = (queue_key(current), size_class(current.gpus))
        if key not in stats:
            stats[key] = WaitStats()
        stats[key].add(max(0.0, (current.updated_at - current.submitted_at).total_seconds()))

    def stats(self, since: int, visible: Callable[[QueueKey], bool]) -> dict[WaitKey, WaitStats]:
        """The waits of every visible queue and size class first admitted in the slices from ``since`` on."""
        first = since - since % self.slice_s
        merged: dict[WaitKey, WaitStats] = {}
        for start, stats in self._slices:
            if start < first:
                continue
            for key, part in stats.items():
                if visible(key[0]):
                    merged.setdefault(key, WaitStats()).merge(part)
        return merged


@dataclass
class PlotSeries:
    """Every bounded series of the dashboard's plots, and when the first status change was seen."""

    allocation: AllocationSeries = field(default_factory=AllocationSeries)
    preemptions: PreemptionCounts = field(default_factory=PreemptionCounts)
    waits: WaitTimes = field(default_factory=WaitTimes)
    #: the time of the oldest status change seen (before it, the series know nothing, rather than zero)
    since: int | None = None

    def observe(self, previous: JobStatusChanged | None, current: JobStatusChanged | None) -> None:
        """Fold one change of a job's status (``previous`` is what the gateway held before; either may be None)."""
        if current is not None:
            at = seconds(current)
            self.since = at if self.since is None else min(self.since, at)
        self.allocation.observe(previous, current)
        self.preemptions.observe(previous, current)
        self.waits.observe(previous, current)
