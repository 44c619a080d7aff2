"""Reservations for a blocked head job, from runtime estimates of the jobs that hold capacity."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .capacity import CapacityIndex
from .estimate import running_ends, touches
from .model import Job, NodeAssignment, Reservation, RunningJob
from .placement import Placer, candidate_clusters, candidate_gpu_types

if TYPE_CHECKING:
    from .cycle import Cycle

MAX_RELEASES = 20_000  # running jobs folded back per reservation search
MAX_PLACEMENT_TRIES = 48


def find_reservation(cycle: Cycle, job: Job) -> Reservation | None:
    """The earliest time and nodes at which ``job`` fits, assuming running jobs end as estimated.

    A job confined by a node selector is searched on its own pool: only the running jobs with pods on
    the pool's nodes are folded back, and only the pool's free GPUs decide whether a placement is worth
    trying, so the reservation's time is when the pool itself frees up, not when the GPU type does."""
    best: Reservation | None = None
    for gpu_type in candidate_gpu_types(cycle.cap, job):
        found = _earliest(cycle, job, gpu_type, cycle.scope(job, gpu_type))
        if found is not None and (best is None or found.time < best.time):
            best = found
    return best


def _ends(cycle: Cycle, gpu_type: str, scope: frozenset[str] | None) -> Iterator[tuple[float, RunningJob]]:
    """Running jobs of a GPU type (including this cycle's admissions) by estimated end; with ``scope``,
    only those with a pod on one of its nodes."""
    cfg = cycle.cfg
    state_side = running_ends(cycle.st, gpu_type, cycle.now, cfg.default_runtime_estimate_s, scope)
    fresh = cycle.forecast.admitted_runs.get(gpu_type, [])
    if scope is not None:
        fresh = [e for e in fresh if touches(e[1], scope)]
    ordered = sorted(fresh, key=lambda e: (e[0], e[1].job.job_id))
    yield from heapq.merge(state_side, ordered, key=lambda e: e[0])


class _ScopedBound:
    """Upper bound on pods of one size that fit on the usable nodes of a pool, kept as capacity returns."""

    __slots__ = ("cap", "gpus", "pods", "scope")

    def __init__(self, cap: CapacityIndex, scope: frozenset[str], gpus: int) -> None:
        self.cap = cap
        self.scope = scope
        self.gpus = gpus
        self.pods = sum(self._on(n) for n in scope)

    def _on(self, name: str) -> int:
        if not CapacityIndex.usable(self.cap.nodes[name]):
            return 0
        return max(self.cap.free[name], 0) // self.gpus if self.gpus > 0 else 1_000_000

    def give(self, job: Job, a: NodeAssignment) -> None:
        if a.node not in self.scope or a.node not in self.cap.nodes:
            self.cap.give_for(job, a)
            return
        before = self._on(a.node)
        self.cap.give_for(job, a)
        self.pods += self._on(a.node) - before


def _earliest(cycle: Cycle, job: Job, gpu_type: str, scope: frozenset[str] | None) -> Reservation | None:
    pods = max(job.min_size, 1)
    scratch = cycle.cap.clone()
    placer = Placer(scratch, job)
    keys = [(c, gpu_type) for c in candidate_clusters(scratch, job, gpu_type)]
    if not keys or (scope is not None and not scope):
        return None
    bound = _ScopedBound(scratch, scope, job.gpus_per_pod) if scope is not None else None
    tries = 0
    for released, (end, rj) in enumerate(_ends(cycle, gpu_type, scope)):
        if released >= MAX_RELEASES:
            break
        j = rj.job
        if bound is None:
            for a in rj.placement.nodes:
                scratch.give_for(j, a)
            if not any(scratch.pod_bound(k, job.gpus_per_pod) >= pods for k in keys):
                continue
        else:
            for a in rj.placement.nodes:
                bound.give(j, a)
            if bound.pods < pods:
                continue
        tries += 1
        if tries > MAX_PLACEMENT_TRIES:
            break
        placement = placer.place(gpu_type, pods, pods)
        if placement is not None:
            return Reservation(job.job_id, end, frozenset(a.node for a in placement.nodes))
    return None
