"""Reservations for a blocked head job, from runtime estimates of the jobs that hold capacity."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .estimate import running_ends
from .model import Job, Reservation, RunningJob
from .placement import Placer, candidate_clusters, candidate_gpu_types

if TYPE_CHECKING:
    from .cycle import Cycle

MAX_RELEASES = 20_000  # running jobs folded back per reservation search
MAX_PLACEMENT_TRIES = 48


def find_reservation(cycle: Cycle, job: Job) -> Reservation | None:
    """The earliest time and nodes at which ``job`` fits, assuming running jobs end as estimated."""
    best: Reservation | None = None
    for gpu_type in candidate_gpu_types(cycle.cap, job):
        found = _earliest(cycle, job, gpu_type)
        if found is not None and (best is None or found.time < best.time):
            best = found
    return best


def _ends(cycle: Cycle, gpu_type: str) -> Iterator[tuple[float, RunningJob]]:
    """Running jobs of a GPU type (including this cycle's admissions) by estimated end."""
    cfg = cycle.cfg
    state_side = running_ends(cycle.st, gpu_type, cycle.now, cfg.default_runtime_estimate_s)
    fresh = sorted(cycle.admitted_runs.get(gpu_type, []), key=lambda e: (e[0], e[1].job.job_id))
    yield from heapq.merge(state_side, fresh, key=lambda e: e[0])


def _earliest(cycle: Cycle, job: Job, gpu_type: str) -> Reservation | None:
    pods = max(job.min_size, 1)
    scratch = cycle.cap.clone()
    placer = Placer(scratch, job)
    keys = [(c, gpu_type) for c in candidate_clusters(scratch, job, gpu_type)]
    if not keys:
        return None
    tries = 0
    for released, (end, rj) in enumerate(_ends(cycle, gpu_type)):
        if released >= MAX_RELEASES:
            break
        j = rj.job
        for a in rj.placement.nodes:
            scratch.give(j.gpus_per_pod, j.cpu_m, j.memory_mb, a)
        if not any(scratch.pod_bound(k, job.gpus_per_pod) >= pods for k in keys):
            continue
        tries += 1
        if tries > MAX_PLACEMENT_TRIES:
            break
        placement = placer.place(gpu_type, pods, pods)
        if placement is not None:
            return Reservation(job.job_id, end, frozenset(a.node for a in placement.nodes))
    return None
