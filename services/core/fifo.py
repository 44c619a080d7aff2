"""The FIFO baselines (policies ``fifo`` and ``fifo-global``): no reordering, backfill or preemption, only
gang admission in submit order. ``scheduler.schedule`` runs them instead of the muster walk."""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from .cycle import Cycle
from .model import PendingReason


def fifo_per_queue(cycle: Cycle, report: bool) -> None:
    """FIFO inside each queue: a queue's blocked head blocks only that queue (as Philly, the Helios
    simulator and Kueue's StrictFIFO do); the queues' heads are tried in submit-time order."""
    st, cfg = cycle.st, cycle.cfg
    heads: list[tuple[float, str, str]] = []
    walkers: dict[str, Iterator[str]] = {}
    for queue in st.pq.queue_names():
        walker = st.pq.walk_fifo(queue)
        job = cycle.next_waiting(walker)
        if job is not None:
            walkers[queue] = walker
            heads.append((job.submit_time, job.job_id, queue))
    heapq.heapify(heads)
    while heads:
        _, job_id, queue = heapq.heappop(heads)
        job = st.pending[job_id]
        if cycle.out.admissions < cfg.max_admissions_per_cycle:
            reason = cycle.try_admit(job)
            if reason is None:
                nxt = cycle.next_waiting(walkers[queue])
                if nxt is not None:
                    heapq.heappush(heads, (nxt.submit_time, nxt.job_id, queue))
                continue
            reason = cycle.lent_out(job, reason)
        else:
            reason = PendingReason.QUEUED
        if not report:
            continue  # the queue is blocked: nothing behind its head is admitted this cycle
        start = None if reason is PendingReason.NO_MATCHING_NODES else cycle.forecast.estimate_start(job)
        cycle.report(job, reason, 0, start)
        for position in range(1, cfg.status_depth):
            rest = cycle.next_waiting(walkers[queue])
            if rest is None:
                break
            cycle.report(rest, PendingReason.QUEUED, position, cycle.forecast.estimate_start(rest))


def fifo_global(cycle: Cycle, report: bool) -> None:
    """Strict global FIFO: one blocked head stops admission in every queue."""
    st, cfg = cycle.st, cycle.cfg
    waiting: dict[str, int] = {}
    head_blocked = False
    queues = max(len(st.pq.queue_names()), 1)
    seen_after_block = 0
    for job_id in st.pq.walk_fifo():
        if job_id in cycle.out.rejected:
            continue
        job = st.pending[job_id]
        position = waiting.get(job.queue, 0)
        if not head_blocked and cycle.out.admissions < cfg.max_admissions_per_cycle:
            reason = cycle.try_admit(job)
            if reason is None:
                continue
            reason = cycle.lent_out(job, reason)
            head_blocked = True
            if not report:
                break  # nothing after the blocked head is admitted: the rest of the walk only reports
        else:
            reason = PendingReason.QUEUED
            seen_after_block += 1
        waiting[job.queue] = position + 1
        if report and position < cfg.status_depth:
            start = None if reason is PendingReason.NO_MATCHING_NODES else cycle.forecast.estimate_start(job)
            cycle.report(job, reason, position, start)
        if seen_after_block >= cfg.status_depth * queues:
            break
