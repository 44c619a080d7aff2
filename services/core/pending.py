"""Pending jobs per queue in heaps with lazy deletion, walked in order without being mutated."""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from .model import Job

Entry = tuple[int, float, str, int]  # (-priority, submit_time, job_id, version)
FifoEntry = tuple[float, str, int]  # (submit_time, job_id, version)


def _walk(heap: list[Entry] | list[FifoEntry], live: dict[str, int]) -> Iterator[str]:
    """Yield the live job ids of ``heap`` in heap order, leaving the heap untouched."""
    if not heap:
        return
    n = len(heap)
    frontier: list[tuple[Entry | FifoEntry, int]] = [(heap[0], 0)]
    while frontier:
        entry, i = heapq.heappop(frontier)
        if live.get(entry[-2]) == entry[-1]:
            yield entry[-2]
        c = 2 * i + 1
        if c < n:
            heapq.heappush(frontier, (heap[c], c))
            if c + 1 < n:
                heapq.heappush(frontier, (heap[c + 1], c + 1))


class PendingQueues:
    """Per-queue order (priority, then submit time) and a global FIFO order (submit time)."""

    __slots__ = ("_counter", "fifo", "heaps", "live", "sizes")

    def __init__(self) -> None:
        self.heaps: dict[str, list[Entry]] = {}
        self.fifo: list[FifoEntry] = []
        self.live: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        self._counter = 0

    def push(self, job: Job) -> None:
        self._counter += 1
        version = self._counter
        if job.job_id in self.live:
            self.remove(job.job_id, job.queue)
        self.live[job.job_id] = version
        heapq.heappush(self.heaps.setdefault(job.queue, []), (-job.priority, job.submit_time, job.job_id, version))
        heapq.heappush(self.fifo, (job.submit_time, job.job_id, version))
        self.sizes[job.queue] = self.sizes.get(job.queue, 0) + 1

    def remove(self, job_id: str, queue: str) -> None:
        if self.live.pop(job_id, None) is None:
            return
        self.sizes[queue] -= 1
        heap = self.heaps.get(queue)
        if heap is not None and len(heap) > 64 and len(heap) > 2 * self.sizes[queue]:
            self.heaps[queue] = [e for e in heap if self.live.get(e[2]) == e[3]]
            heapq.heapify(self.heaps[queue])
        if len(self.fifo) > 64 and len(self.fifo) > 2 * len(self.live):
            self.fifo = [e for e in self.fifo if self.live.get(e[1]) == e[2]]
            heapq.heapify(self.fifo)

    def walk_queue(self, queue: str) -> Iterator[str]:
        return _walk(self.heaps.get(queue, []), self.live)

    def walk_fifo(self) -> Iterator[str]:
        return _walk(self.fifo, self.live)

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
