"""Scheduling-quality figures of one simulation run.

Definitions (all times in seconds, over completed jobs unless stated):

- JCT = completion time - submit time.
- queueing delay = first start - submit time (the wait before the job first ran; time lost to
  preemption shows up in JCT, not here).
- slowdown = JCT / max(duration, 1 s), where duration is the job's true run time.
- ``makespan_s`` = last completion - first submission.
- ``gpu_allocation`` = GPU-seconds held by jobs (terminating ones included) / (cluster GPUs x makespan).
- ``gpu_allocation_arrivals`` = the same between the first and the last submission only: the load
  while the workload is still arriving, without the drain after the last arrival (a replayed window
  of a longer trace ends with one; the real cluster's measured occupancy has none).
- ``per_size_class``: the job counts, average / p50 / p99 JCT and queueing delay, and GPU-hours of
  the jobs asking for 1 GPU, 2-4, 5-8 and more than 8 (``SIZE_CLASSES``; classes without jobs left out).
- ``jobs_several_roles``: the jobs of several roles (a main role with companion roles, ``WorkloadJob.roles``);
  their GPUs (size class, GPU-hours, allocation) count every role's.
- ``jain_fairness`` = Jain's index (sum x)^2 / (n sum x^2) over the per-queue mean slowdowns of the
  queues that completed jobs: 1.0 when every queue is slowed down equally, 1/n at worst.
- ``wait_breakdown`` (only with ``SimOptions.explain_gpus``): per size class, the explained jobs' queueing
  delay by the reason the core gave each cycle (``PendingReason`` values, or ``beyond_status_depth`` when
  the job stood too far back in its queue for the core to compute its status), their wait after
  preemptions, and the GPUs of later jobs of their queue that started while they waited.
- ``bought`` (only when the run bought nodes, ``GrowableGroup``): nodes bought, their GPU-hours (billed from
  ready until given back, or the run's end) and money, in all, per group and per queue (the queue whose job
  they were bought for), and ``requests``, the jobs nodes were bought for.
- percentiles interpolate linearly (numpy's default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from services.simulator.engine import BoughtNode, JobRecord, SimResult, records_by_queue

SIZE_CLASSES: tuple[tuple[str, int, float], ...] = (("1", 1, 1), ("2-4", 2, 4), ("5-8", 5, 8), (">8", 9, math.inf))


def size_class(gpus: int) -> str:
    """The job-size class of a job asking for ``gpus`` GPUs (a 0-GPU job counts as ``1``)."""
    for name, _, high in SIZE_CLASSES:
        if gpus <= high:
            return name
    return SIZE_CLASSES[-1][0]


def _pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def completed(records: Sequence[JobRecord]) -> list[JobRecord]:
    return [r for r in records if r.end is not None and not r.killed and r.rejected is None]


def jct(rec: JobRecord) -> float:
    assert rec.end is not None
    return rec.end - rec.spec.submit_time


def queue_delay(rec: JobRecord) -> float:
    assert rec.first_start is not None
    return rec.first_start - rec.spec.submit_time


def slowdown(rec: JobRecord) -> float:
    return jct(rec) / max(rec.spec.duration, 1.0)


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index of non-negative values; 1.0 for an empty or all-zero list."""
    total = sum(values)
    squares = sum(v * v for v in values)
    if not values or squares == 0:
        return 1.0
    return total * total / (len(values) * squares)


def queue_delays(result: SimResult) -> list[float]:
    """Queueing delays of all completed jobs, for CDF plots."""
    return [queue_delay(r) for r in completed(list(result.records.values()))]


def _queue_stats(records: Sequence[JobRecord]) -> dict[str, Any]:
    """A queue's figures: those of a job-size class, plus the mean slowdown."""
    return {**_class_stats(records), "avg_slowdown": _mean([slowdown(r) for r in completed(records)])}


def _class_stats(records: Sequence[JobRecord]) -> dict[str, Any]:
    done = completed(records)
    jcts = [jct(r) for r in done]
    waits = [queue_delay(r) for r in done]
    return {
        "jobs": len(records),
        "jobs_completed": len(done),
        "avg_jct_s": _mean(jcts),
        "p50_jct_s": _pct(jcts, 50),
        "p99_jct_s": _pct(jcts, 99),
        "avg_queue_s": _mean(waits),
        "p50_queue_s": _pct(waits, 50),
        "p99_queue_s": _pct(waits, 99),
        "gpu_hours": sum(r.gpu_seconds for r in records) / 3600.0,
        "preemptions": sum(r.preemptions for r in records),
    }


def per_size_class(records: Sequence[JobRecord]) -> dict[str, dict[str, Any]]:
    """Figures per job-size class, in ``SIZE_CLASSES`` order, for the classes that have jobs."""
    by_class: dict[str, list[JobRecord]] = {}
    for rec in records:
        by_class.setdefault(size_class(rec.spec.num_gpus), []).append(rec)
    return {name: _class_stats(by_class[name]) for name, _, _ in SIZE_CLASSES if name in by_class}


def wait_breakdown(records: Sequence[JobRecord]) -> dict[str, dict[str, Any]]:
    """Per size class, the completed explained jobs' queueing delay (``SimOptions.explain_gpus``) by the
    reason the core gave for it each cycle: average seconds per job and share of the class's waiting, most
    first; their waits again after preemptions, by reason the same way; and the GPUs of later jobs of their
    queue that started while they waited (``overtaken_gpus``)."""
    by_class: dict[str, list[JobRecord]] = {}
    for rec in completed(records):
        if rec.waits is not None:
            by_class.setdefault(size_class(rec.spec.num_gpus), []).append(rec)
    out: dict[str, dict[str, Any]] = {}
    for name, _, _ in SIZE_CLASSES:
        recs = by_class.get(name)
        if not recs:
            continue
        n = len(recs)
        first = _by_reason([r.waits or {} for r in recs])
        again = _by_reason([r.requeued_waits for r in recs])
        waited, rewaited = sum(first.values()), sum(again.values())
        out[name] = {
            "jobs": n,
            "avg_queue_s": waited / n,
            "by_reason_s": {reason: seconds / n for reason, seconds in first.items()},
            "by_reason_share": {reason: seconds / waited if waited else 0.0 for reason, seconds in first.items()},
            "avg_requeued_wait_s": rewaited / n,
            "requeued_by_reason_s": {reason: seconds / n for reason, seconds in again.items()},
            "avg_overtaken_gpus": _mean([r.overtaken_gpus for r in recs]),
        }
    return out


def _by_reason(waits: Sequence[dict[str, float]]) -> dict[str, float]:
    """The seconds of every job's waits summed by reason, most first."""
    totals: dict[str, float] = {}
    for one in waits:
        for reason, seconds in one.items():
            totals[reason] = totals.get(reason, 0.0) + seconds
    return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))


def held_gpu_seconds(timeline: Sequence[tuple[float, str, float]], start: float, end: float) -> float:
    """GPU-seconds held between ``start`` and ``end`` according to an allocation timeline."""
    held = 0.0
    level: float = 0
    last = start
    for t, _, delta in sorted(timeline, key=lambda e: e[0]):
        if t > start:
            held += level * (min(t, end) - last)
            last = min(t, end)
        if t >= end:
            break
        level += delta
    held += level * max(0.0, end - last)
    return held


def bought(result: SimResult) -> dict[str, Any]:
    """What the run bought, in all, per group and per queue (see the module docstring)."""
    end = result.end_time

    def totals(nodes: Sequence[BoughtNode]) -> dict[str, Any]:
        hours = sum(b.gpu_hours(end) for b in nodes)
        return {"nodes": len(nodes), "gpu_hours": hours,
                "money": sum(b.gpu_hours(end) * b.price_per_gpu_hour for b in nodes)}

    by_group: dict[str, list[BoughtNode]] = {}
    by_queue: dict[str, list[BoughtNode]] = {}
    for b in result.bought:
        by_group.setdefault(b.group, []).append(b)
        by_queue.setdefault(b.queue, []).append(b)
    return {**totals(result.bought), "requests": result.provisions,
            "per_group": {g: totals(ns) for g, ns in sorted(by_group.items())},
            "per_queue": {q: totals(ns) for q, ns in sorted(by_queue.items())}}


def build_report(result: SimResult) -> dict[str, Any]:
    """The JSON-ready report of one run (keys documented in the module docstring)."""
    records = list(result.records.values())
    done = completed(records)
    jcts = [jct(r) for r in done]
    waits = [queue_delay(r) for r in done]
    first_submit = min((r.spec.submit_time for r in records), default=0.0)
    last_end = max((r.end for r in records if r.end is not None), default=first_submit)
    makespan = last_end - first_submit
    held = sum(r.gpu_seconds for r in records)
    capacity = result.capacity_gpus * makespan
    per_queue = {q: _queue_stats(rs) for q, rs in sorted(records_by_queue(result).items())}
    last_submit = max((r.spec.submit_time for r in records), default=first_submit)
    arriving = last_submit - first_submit
    arrivals_capacity = result.capacity_gpus * arriving
    fairness_inputs = [s["avg_slowdown"] for s in per_queue.values() if s["jobs_completed"]]
    rejected = sum(1 for r in records if r.rejected is not None)
    killed = sum(1 for r in records if r.killed)
    dependency_failed = sum(1 for r in records if r.dependency_failed is not None)
    several_roles = sum(1 for r in records if r.spec.roles is not None and r.spec.roles.several)
    return {
        "policy": result.policy,
        "seed": result.seed,
        "workload": result.workload,
        "jobs": len(records),
        "jobs_completed": len(done),
        "jobs_rejected": rejected,
        "jobs_killed": killed,
        "jobs_dependency_failed": dependency_failed,
        "jobs_unfinished": len(records) - len(done) - rejected - killed - dependency_failed,
        "jobs_several_roles": several_roles,
        "avg_jct_s": _mean(jcts),
        "p50_jct_s": _pct(jcts, 50),
        "p99_jct_s": _pct(jcts, 99),
        "avg_queue_s": _mean(waits),
        "p50_queue_s": _pct(waits, 50),
        "p99_queue_s": _pct(waits, 99),
        "avg_slowdown": _mean([slowdown(r) for r in done]),
        "makespan_s": makespan,
        "capacity_gpus": result.capacity_gpus,
        "gpu_allocation": held / capacity if capacity > 0 else 0.0,
        "gpu_allocation_arrivals": (
            held_gpu_seconds(result.timeline, first_submit, last_submit) / arrivals_capacity
            if arrivals_capacity > 0
            else 0.0
        ),
        "jain_fairness": jain_index(fairness_inputs),
        "jain_fairness_over": "per-queue mean slowdown",
        "preemptions": result.preemptions,
        "restarts_from_zero": sum(r.restarts_from_zero for r in records),
        "decisions": result.decisions,
        "cycles": result.cycles,
        "wall_s": result.wall_s,
        "cycle_wall_s": result.cycle_wall_s,
        "per_queue": per_queue,
        "per_size_class": per_size_class(records),
    } | ({"wait_breakdown": wait_breakdown(records)} if any(r.waits is not None for r in records) else {}) | (
        {"bought": bought(result)} if result.provisions else {})
