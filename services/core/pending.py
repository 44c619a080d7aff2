"""Pending jobs per queue in heaps with lazy deletion, walked in order without being mutated.

Each queue has a heap by ``(-priority, rank, submit_time)`` (the rank comes from ``ordering``), a
heap of the promotion times still to come, and a heap of the jobs already promoted, by priority and
promotion time. A walk at ``now`` first moves the promotions that have come, then yields, within each
priority, the promoted jobs (the earliest bound first) before the rest in rank order, each job once.
A global heap by submit time serves the FIFO policies.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator

from .model import Job

Entry = tuple[int, float, float, str, int]  # (-priority, rank, submit_time, job_id, version)
PromoEntry = tuple[float, int, float, str, int]  # (promote_at, -priority, submit_time, job_id, version)
FifoEntry = tuple[float, str, int]  # (submit_time, job_id, version)


def _walk_entries(heap: list[Entry]) -> Iterator[Entry]:
    """Yield the entries of ``heap`` in heap order, leaving the heap untouched."""
    if not heap:
        return
    n = len(heap)
    frontier: list[tuple[Entry, int]] = [(heap[0], 0)]
    while frontier:
        entry, i = heapq.heappop(frontier)
        yield entry
        c = 2 * i + 1
        if c < n:
            heapq.heappush(frontier, (heap[c], c))
            if c + 1 < n:
                heapq.heappush(frontier, (heap[c + 1], c + 1))


def _clean_top(heap: list[Entry] | None, live: dict[str, int]) -> list[Entry]:
    """``heap`` without the dead entries at its top (popped for good: they would be skipped by every walk)."""
    if heap is None:
        return []
    while heap and live.get(heap[0][3]) != heap[0][4]:
        heapq.heappop(heap)
    return heap


def _walk_fifo(heap: list[FifoEntry], live: dict[str, int]) -> Iterator[str]:
    """Yield the live job ids of ``heap`` in heap order, leaving the heap untouched."""
    if not heap:
        return
    n = len(heap)
    frontier: list[tuple[FifoEntry, int]] = [(heap[0], 0)]
    while frontier:
        entry, i = heapq.heappop(frontier)
        if live.get(entry[1]) == entry[2]:
            yield entry[1]
        c = 2 * i + 1
        if c < n:
            heapq.heappush(frontier, (heap[c], c))
            if c + 1 < n:
                heapq.heappush(frontier, (heap[c + 1], c + 1))


class PendingQueues:
    """Per-queue order (priority, rank, submit time) with promotions, and a global FIFO order."""

    __slots__ = ("_counter", "fifo", "heaps", "live", "promos", "promoted", "qfifo", "ranks", "sizes")

    def __init__(self) -> None:
        self.heaps: dict[str, list[Entry]] = {}
        self.promos: dict[str, list[PromoEntry]] = {}  # jobs with a promotion time still to come
        self.promoted: dict[str, list[Entry]] = {}  # (-priority, promote_at, submit_time, job_id, version)
        self.fifo: list[FifoEntry] = []
        self.qfifo: dict[str, list[FifoEntry]] = {}  # per queue, by submit time
        self.live: dict[str, int] = {}
        self.ranks: dict[str, tuple[float, float]] = {}  # job -> (rank, promote_at) it was pushed with
        self.sizes: dict[str, int] = {}
        self._counter = 0

    def push(self, job: Job, rank: float = 0.0, promote_at: float = math.inf) -> None:
        self._counter += 1
        version = self._counter
        if job.job_id in self.live:
            self.remove(job.job_id, job.queue)
        self.live[job.job_id] = version
        self.ranks[job.job_id] = (rank, promote_at)
        entry = (-job.priority, rank, job.submit_time, job.job_id, version)
        heapq.heappush(self.heaps.setdefault(job.queue, []), entry)
        if promote_at != math.inf:
            promo = (promote_at, -job.priority, job.submit_time, job.job_id, version)
            heapq.heappush(self.promos.setdefault(job.queue, []), promo)
        self._push_fifo(job.queue, job.submit_time, job.job_id, version)
        self.sizes[job.queue] = self.sizes.get(job.queue, 0) + 1

    def _push_fifo(self, queue: str, submit_time: float, job_id: str, version: int) -> None:
        heapq.heappush(self.fifo, (submit_time, job_id, version))
        heapq.heappush(self.qfifo.setdefault(queue, []), (submit_time, job_id, version))

    def remove(self, job_id: str, queue: str) -> None:
        if self.live.pop(job_id, None) is None:
            return
        self.ranks.pop(job_id, None)
        self.sizes[queue] -= 1
        size = self.sizes[queue]
        live = self.live
        for heaps in (self.heaps, self.promoted):
            heap = heaps.get(queue)
            if heap is not None and len(heap) > 64 and len(heap) > 2 * size:
                heaps[queue] = [e for e in heap if live.get(e[3]) == e[4]]
                heapq.heapify(heaps[queue])
        promos = self.promos.get(queue)
        if promos is not None and len(promos) > 64 and len(promos) > 2 * size:
            self.promos[queue] = [e for e in promos if live.get(e[3]) == e[4]]
            heapq.heapify(self.promos[queue])
        qfifo = self.qfifo.get(queue)
        if qfifo is not None and len(qfifo) > 64 and len(qfifo) > 2 * size:
            self.qfifo[queue] = [e for e in qfifo if live.get(e[1]) == e[2]]
            heapq.heapify(self.qfifo[queue])
        if len(self.fifo) > 64 and len(self.fifo) > 2 * len(live):
            self.fifo = [e for e in self.fifo if live.get(e[1]) == e[2]]
            heapq.heapify(self.fifo)

    def _advance(self, queue: str, now: float) -> None:
        """Move the queue's jobs whose promotion time has come by ``now`` into its promoted heap.

        A promoted job takes a new version, so its entry in the rank heap is dead from then on (and its
        FIFO entries are pushed again under that version). Promotions stay: a walk at an earlier ``now``
        than one before it still sees them promoted (the scheduler's time never goes back)."""
        promos = self.promos.get(queue)
        if not promos or promos[0][0] > now:
            return
        live = self.live
        promoted = self.promoted.setdefault(queue, [])
        while promos and promos[0][0] <= now:
            at, neg_priority, submit_time, job_id, version = heapq.heappop(promos)
            if live.get(job_id) != version:
                continue
            self._counter += 1
            live[job_id] = self._counter
            heapq.heappush(promoted, (neg_priority, at, submit_time, job_id, self._counter))
            self._push_fifo(queue, submit_time, job_id, self._counter)

    def walk_queue(self, queue: str, now: float = -math.inf, interleave: bool = False) -> Iterator[str]:
        """The queue's live jobs by priority; within a priority the promoted ones (the earliest promotion
        first) before the rest in heap order, or with ``interleave`` taking every other place, from the first.

        Costs the jobs walked, not the queue's length: promotions are moved over as their time comes
        (``_advance``) and dead entries at the top of either heap are dropped on the way."""
        self._advance(queue, now)
        live = self.live
        heap = _clean_top(self.heaps.get(queue), live)
        promoted = _clean_top(self.promoted.get(queue), live)
        if not promoted:  # nothing promoted: the rank order alone
            for entry in _walk_entries(heap):
                if live.get(entry[3]) == entry[4]:
                    yield entry[3]
            return
        ahead = (p for p in _walk_entries(promoted) if live.get(p[3]) == p[4])
        rest = (e for e in _walk_entries(heap) if live.get(e[3]) == e[4])
        p, e = next(ahead, None), next(rest, None)
        promoted_turn, level = True, None
        while p is not None or e is not None:
            take_promoted = e is None or (p is not None and p[0] < e[0])
            if p is not None and e is not None and p[0] == e[0]:
                if level != p[0]:
                    level, promoted_turn = p[0], True
                take_promoted = promoted_turn or not interleave
                promoted_turn = not promoted_turn
            if take_promoted:
                assert p is not None
                yield p[3]
                p = next(ahead, None)
            else:
                assert e is not None
                yield e[3]
                e = next(rest, None)

    def walk_fifo(self, queue: str | None = None) -> Iterator[str]:
        """Live jobs by submit time: of one queue, or of all queues."""
        return _walk_fifo(self.fifo if queue is None else self.qfifo.get(queue, []), self.live)

    def queue_names(self) -> list[str]:
        return sorted(q for q, n in self.sizes.items() if n > 0)


def ordered(heap: list[tuple[float, str, float]] | list[tuple[float, str, int]]) -> Iterator[tuple[float, str]]:
    """Yield (key, job_id) of a heap of (key, job_id, ...) tuples in order, leaving it untouched."""
    if not heap:
        return
    n = len(heap)
    frontier: list[tuple[float, str, int]] = [(heap[0][0], heap[0][1], 0)]
    while frontier:
        key, job_id, i = heapq.heappop(frontier)
        yield key, job_id
        for c in (2 * i + 1, 2 * i + 2):
            if c < n:
                heapq.heappush(frontier, (heap[c][0], heap[c][1], c))
