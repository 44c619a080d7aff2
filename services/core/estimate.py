"""Start-time estimates from runtime estimates: running jobs end, pending jobs start in order."""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from .model import RunningJob
from .state import SchedulerState


def running_ends(
    state: SchedulerState,
    gpu_type: str,
    now: float,
    default_estimate: float,
    scope: frozenset[str] | None = None,
) -> Iterator[tuple[float, RunningJob]]:
    """Running jobs on ``gpu_type`` by estimated end (lazy; reads copies of the state's heaps).

    ``scope``: only the jobs with a pod on one of these nodes (a node selector's pool); None: all."""
    known = list(state.ends.get((gpu_type, True), ()))
    unknown = list(state.ends.get((gpu_type, False), ()))
    seen: set[str] = set()
    while known or unknown:
        take_known = bool(known) and (not unknown or known[0][0] <= unknown[0][0] + default_estimate)
        key, job_id, start = heapq.heappop(known) if take_known else heapq.heappop(unknown)
        rj = state.running.get(job_id)
        if rj is None or rj.start_time != start or job_id in seen:
            continue
        seen.add(job_id)
        if scope is not None and not touches(rj, scope):
            continue
        end = key if take_known else key + default_estimate
        if rj.terminating:
            end = now + rj.job.grace_period_s
        yield max(end, now), rj


def touches(rj: RunningJob, scope: frozenset[str]) -> bool:
    """Whether the running job has a pod on a node of ``scope``."""
    return any(a.node in scope for a in rj.placement.nodes)


def gpus_in(rj: RunningJob, scope: frozenset[str] | None) -> int:
    """GPUs the running job holds on the nodes of ``scope`` (all of them when None)."""
    if scope is None:
        return rj.gpus
    job = rj.job
    return sum(a.pods * job.shape(a.role)[0] for a in rj.placement.nodes if a.node in scope)


class Pool:
    """Fluid model of one GPU type, or of the nodes of one pool (``scope``, the nodes a node selector
    allows) of that type: free GPUs now, releases over time, jobs started in order. A scoped model
    counts only what running jobs hold on its nodes."""

    __slots__ = ("events", "free", "scope", "source", "t", "total")

    def __init__(
        self,
        now: float,
        free: int,
        total: int,
        source: Iterator[tuple[float, RunningJob]],
        scope: frozenset[str] | None = None,
    ) -> None:
        self.t = now
        self.free = free
        self.total = total
        self.source = source
        self.scope = scope
        self.events: list[tuple[float, int]] = []
        self._pull()

    def _pull(self) -> None:
        nxt = next(self.source, None)
        if nxt is not None:
            end, rj = nxt
            gpus = gpus_in(rj, self.scope)
            heapq.heappush(self.events, (end, gpus))

    def _advance(self, gpus: int) -> tuple[float, int, list[tuple[float, int]]]:
        t, f = self.t, self.free
        popped: list[tuple[float, int]] = []
        while f < gpus and self.events:
            ev = heapq.heappop(self.events)
            self._pull()
            popped.append(ev)
            t = max(t, ev[0])
            f += ev[1]
        return t, f, popped

    def release_at(self, end: float, gpus: int) -> None:
        """``gpus`` already counted as busy become free at ``end``."""
        heapq.heappush(self.events, (end, gpus))

    def occupy(self, gpus: int, end: float) -> None:
        """A job started now holds ``gpus`` GPUs until ``end``."""
        self.free -= gpus
        heapq.heappush(self.events, (end, gpus))

    def probe(self, gpus: int) -> float | None:
        """When ``gpus`` GPUs would be free for the next job in line; None if never."""
        if gpus > self.total:
            return None
        t, f, popped = self._advance(gpus)
        for ev in popped:
            heapq.heappush(self.events, ev)
        return t if f >= gpus else None

    def commit(self, gpus: int, duration: float) -> float | None:
        """Start the next job in line at its earliest time; returns that time."""
        if gpus > self.total:
            return None
        t, f, _ = self._advance(gpus)
        if f < gpus:
            return None
        self.t, self.free = t, f - gpus
        heapq.heappush(self.events, (t + duration, gpus))
        return t
