"""The dashboard's plots, computed from the bounded series (``dashboard_series``), the nodes and one job's
history, pure: GPUs allocated per queue over time, preemptions over time, waits per queue and size class,
and a job's states as spans of time for its timeline.

Every answer holds only the queues of tenants the caller may see (``Principal.owns``) and is bounded
whatever the number of jobs: at most ``MAX_POINTS`` steps, and ``TOP_QUEUES`` queues of a series plot with
the rest summed as one series. A plot starts at its window's start, or at the oldest status change the
gateway has seen when that is later (before it the series know nothing, which is not zero), but shows
``MIN_POINTS`` steps at least (the status topic held nothing before that change, so nothing was allocated
or preempted then).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from schemas.api import HistoryItem
from schemas.capacity import NodeState
from schemas.status import TERMINAL_STATES
from services.gateway.auth import Principal
from services.gateway.dashboard_models import (
    AllocationPlot,
    PreemptionPlot,
    QueueSeries,
    QueueWaitTimes,
    StateSpan,
    WaitPlot,
    WaitSizeClass,
)
from services.gateway.dashboard_series import SIZE_CLASSES, WAIT_BOUNDS_S, PlotSeries, QueueKey, WaitStats

MAX_POINTS = 240
MIN_POINTS = 12
TOP_QUEUES = 8


@dataclass(frozen=True, slots=True)
class Grid:
    """The steps of a plot: ``points`` steps of ``step_s`` seconds from ``start`` (seconds since the epoch)."""

    start: int
    step_s: int
    points: int

    @property
    def start_time(self) -> datetime:
        return datetime.fromtimestamp(self.start, UTC)


def grid(now: datetime, window_s: int, base_step_s: int, since: int | None) -> Grid:
    """Steps of a multiple of ``base_step_s`` covering ``window_s`` up to ``now`` in at most ``MAX_POINTS``;
    starting no earlier than ``since``'s step unless that leaves fewer than ``MIN_POINTS``."""
    step = base_step_s * max(1, math.ceil(window_s / (base_step_s * MAX_POINTS)))
    moment = int(now.timestamp())
    last = moment - moment % step
    first = last - (max(1, window_s // step) - 1) * step
    if since is not None:
        first = max(first, min(last - (MIN_POINTS - 1) * step, since - since % step))
    return Grid(first, step, (last - first) // step + 1)


def _visible(principal: Principal) -> Callable[[QueueKey], bool]:
    return lambda key: principal.owns(key[0])


def _top(series: dict[QueueKey, list[float]],
         rank: Callable[[list[float]], float]) -> tuple[list[QueueSeries], list[float] | None, int]:
    """The ``TOP_QUEUES`` queues ranked first (ties by name), and the rest summed step by step."""
    ordered = sorted(series.items(), key=lambda item: (-rank(item[1]), item[0][1], item[0][0]))
    shown = [QueueSeries(queue=queue, tenant=tenant, values=[round(v, 4) for v in values])
             for (tenant, queue), values in ordered[:TOP_QUEUES]]
    rest = [values for _, values in ordered[TOP_QUEUES:]]
    other = [round(sum(column), 4) for column in zip(*rest, strict=True)] if rest else None
    return shown, other, len(rest)


def allocation_plot(series: PlotSeries, nodes: Sequence[NodeState], principal: Principal, now: datetime,
                    window_s: int) -> AllocationPlot:
    allocation = series.allocation
    steps = grid(now, window_s, allocation.step_s, series.since)
    sampled = allocation.sample(steps.start, steps.step_s, steps.points, _visible(principal))
    queues, other, others = _top(sampled, max)
    return AllocationPlot(as_of=now, start=steps.start_time, step_s=steps.step_s, points=steps.points,
                          queues=queues, other=other, other_queues=others,
                          capacity=sum(node.gpus_allocatable for node in nodes))


def preemption_plot(series: PlotSeries, principal: Principal, now: datetime, window_s: int) -> PreemptionPlot:
    preemptions = series.preemptions
    steps = grid(now, window_s, preemptions.step_s, series.since)
    counted, reasons = preemptions.count(steps.start, steps.step_s, steps.points, _visible(principal))
    queues, other, others = _top(counted, sum)
    return PreemptionPlot(as_of=now, start=steps.start_time, step_s=steps.step_s, points=steps.points,
                          queues=queues, other=other, other_queues=others, total=sum(reasons.values()),
                          reasons=dict(sorted(reasons.items())))


def _size_class_waits(by_size: dict[str, WaitStats]) -> list[WaitSizeClass]:
    return [WaitSizeClass(size=size, jobs=stats.jobs, counts=list(stats.counts),
                          mean_s=round(stats.total_s / stats.jobs, 3), max_s=round(stats.max_s, 3),
                          p50_s=round(stats.at_most(0.5), 3), p90_s=round(stats.at_most(0.9), 3))
            for size in SIZE_CLASSES if (stats := by_size.get(size)) is not None and stats.jobs]


def wait_plot(series: PlotSeries, principal: Principal, now: datetime, window_s: int) -> WaitPlot:
    merged = series.waits.stats(int(now.timestamp()) - window_s, _visible(principal))
    per_queue: dict[QueueKey, dict[str, WaitStats]] = {}
    together: dict[str, WaitStats] = {}
    for (key, size), stats in merged.items():
        per_queue.setdefault(key, {})[size] = stats
        together.setdefault(size, WaitStats()).merge(stats)
    queues = [QueueWaitTimes(queue=queue, tenant=tenant, sizes=_size_class_waits(sizes))
              for (tenant, queue), sizes in sorted(per_queue.items(), key=lambda item: (item[0][1], item[0][0]))]
    return WaitPlot(as_of=now, window_s=window_s, bounds_s=list(WAIT_BOUNDS_S),
                    all_queues=_size_class_waits(together), queues=queues)


def job_spans(history: Sequence[HistoryItem], submitted_at: datetime, now: datetime) -> list[StateSpan]:
    """The job's states as spans: each lasts until the next state seen (a new reason in the same state does
    not break it), the last until now; a finished state ends the span before it. The first pending span of
    the first attempt starts at submission."""
    spans: list[StateSpan] = []
    for index, item in enumerate(history):
        if item.state in TERMINAL_STATES:
            break
        following = history[index + 1] if index + 1 < len(history) else None
        end = following.at if following is not None else now
        last = spans[-1] if spans else None
        if last is not None and (last.state, last.attempt) == (item.state, item.attempt):
            spans[-1] = last.model_copy(update={"end": max(last.start, end), "ongoing": following is None})
            continue
        first_wait = not spans and item.state == "pending" and item.attempt == 0
        start = min(submitted_at, item.at) if first_wait else item.at
        spans.append(StateSpan(attempt=item.attempt, state=item.state, reason=item.reason, start=start,
                               end=max(start, end), ongoing=following is None))
    return spans
