"""Kueue's large-scale scheduler performance shape (test/performance/scheduler/configs/large-scale).

Kueue's generator gives every ClusterQueue a nominal quota of 20 (borrowing limit 100) and creates, per
queue, workloads of three classes: small (request 1, 50 ms, priority 50), medium (request 5, 100 ms,
priority 100) and large (request 20, 200 ms, priority 200), in the proportion 20 : 7 : 3. Kueue's
workloads are single pods with a CPU request; here a class's request is a gang of that many 1-GPU pods,
so medium and large jobs are admitted whole (gang admission) on 8-GPU nodes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SizeClass:
    name: str  # also the name of its priority class
    pods: int  # 1-GPU pods admitted together
    runtime_s: float
    share: int  # out of SHARES


SIZES = (SizeClass("small", 1, 0.05, 20), SizeClass("medium", 5, 0.1, 7), SizeClass("large", 20, 0.2, 3))
SHARES = sum(s.share for s in SIZES)
NOMINAL = 20
BORROWING_LIMIT = 100


def per_queue(workloads: int) -> list[SizeClass]:
    """``workloads`` size classes for one queue in Kueue's proportion, interleaved as its sets are created."""
    counts = {s.name: workloads * s.share // SHARES for s in SIZES}
    counts["small"] += workloads - sum(counts.values())
    out: list[SizeClass] = []
    left = dict(counts)
    while any(left.values()):
        for size in SIZES:
            if left[size.name]:
                out.append(size)
                left[size.name] -= 1
    return out
