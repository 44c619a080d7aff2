"""The order of equal-priority jobs inside one queue, and when a waiting job jumps to its front.

Each queue keeps its pending jobs by ``(-priority, rank, submit_time)``; a job is ranked when it
enters the queue (and again when what its rank depends on changes), so the walk never re-sorts:

- ``remaining``: least estimated remaining GPU-time first (estimate x GPUs - service already
  received). Short jobs do not wait behind long ones, which is what average completion time rewards.
- ``submit``: first come, first served.
- ``las``: least attained service in two levels, as Tiresias (2D-LAS) does without any estimate:
  jobs that have received less than ``las_threshold_gpu_s`` GPU-seconds first, then the rest, each
  level in submit order.
- ``remaining`` with ``remaining_in_levels``: the two levels of ``las``, least remaining work inside each.
  An estimate then orders jobs only among those that have received about as much service: a job that
  has run long already (its estimate was wrong, or it is simply long) cannot keep new work waiting
  because it is estimated to be nearly done.
- ``remaining`` with ``runtime_distribution``: a learnt estimate's samples are read as a distribution,
  and remaining work is the expected further service per completion (``RuntimeSample.per_completion``,
  a Gittins index) rather than the median minus the service received. Where the samples agree the two
  are close; where they spread widely, a job is not ranked as if its short median were known to hold,
  and one that has run past most of its samples goes behind new work.

A ranked order can make a job wait behind ever newer, shorter ones. Each job therefore gets a
promotion time, after which it is walked before every unpromoted job of its priority: under
``remaining`` once it has waited ``slowdown_limit`` times its own estimated runtime (at most
``starvation_age_s``), which bounds its slowdown; under ``las`` once it has waited
``las_promote_knob`` times its last run (Tiresias' starvation guard). Promoted jobs go among
themselves by promotion time, the earliest first: a deadline order. In an overloaded queue, where
every waiting job is soon promoted, that keeps short jobs ahead (their bound comes sooner) instead of
falling back to first come, first served. Under ``remaining`` with ``promotion_interleaved`` the promoted
jobs take every other place of their priority rather than all the first ones (``interleaves``): still
reached in bound order, while the ranked order keeps about half of what frees up for new work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .model import Job, QueueOrderKind, SchedulerConfig
from .runtimes import RuntimeSample

REMAINING, SUBMIT, LAS = QueueOrderKind.REMAINING, QueueOrderKind.SUBMIT, QueueOrderKind.LAS
NEVER = math.inf
#: the rank distance between the two levels of ``remaining_in_levels``: more GPU-seconds than any job needs
LEVEL_SPAN = 1e15


@dataclass(frozen=True, slots=True)
class QueueOrder:
    """What a queue's ranking depends on: derived from a ``SchedulerConfig``, kept by the state."""

    kind: QueueOrderKind = REMAINING
    learned: bool = True
    default_estimate_s: float = 3600.0
    slowdown_limit: float = 3.0
    starvation_age_s: float = 24 * 3600.0
    las_threshold_gpu_s: float = 16 * 3600.0
    las_promote_knob: float = 0.0
    remaining_in_levels: bool = True
    runtime_distribution: bool = True
    promotion_interleaved: bool = True

    @classmethod
    def of(cls, cfg: SchedulerConfig) -> QueueOrder:
        return cls(
            kind=cfg.queue_order,
            learned=cfg.learn_runtimes,
            default_estimate_s=cfg.default_runtime_estimate_s,
            slowdown_limit=cfg.slowdown_limit,
            starvation_age_s=cfg.starvation_age_s,
            las_threshold_gpu_s=cfg.las_threshold_gpu_s,
            las_promote_knob=cfg.las_promote_knob,
            remaining_in_levels=cfg.remaining_in_levels,
            runtime_distribution=cfg.runtime_distribution,
            promotion_interleaved=cfg.promotion_interleaved,
        )

    @property
    def interleaves(self) -> bool:
        """Whether promoted jobs take every other place among their priority rather than all the first."""
        return self.kind == REMAINING and self.promotion_interleaved

    def remaining(self, job: Job, estimate: float | None, attained: float,
                  sample: RuntimeSample | None = None) -> float:
        """Estimated GPU-seconds the job still needs after ``attained``. A job that has outrun its
        estimate was underestimated: the further past it, the more it is expected to need still (the
        longer a job has run, the longer it tends to run on), so it does not hold its GPUs for ever as
        if it were about to finish, while one just past its estimate still resumes ahead of new work.
        ``sample``: the learnt runtimes the estimate is the median of (with ``runtime_distribution``, the
        expected service per completion they give is used instead)."""
        gpus = max(job.total_gpus, 1)
        if sample is not None and self.runtime_distribution:
            return sample.per_completion(attained / gpus) * gpus
        est = self.default_estimate_s if estimate is None else estimate
        left = est * gpus - attained
        return abs(left)

    def standing(self, job: Job, estimate: float | None, attained: float,
                 sample: RuntimeSample | None = None) -> float:
        """Where a job with ``attained`` GPU-seconds stands among its priority in its queue (lower is
        further ahead), waiting or running: its submit time, its level of attained service, or its
        remaining work, by the order's kind."""
        if self.kind == REMAINING:
            return self.levelled(self.remaining(job, estimate, attained, sample), attained)
        if self.kind == LAS:
            return float(self.level(attained))
        return job.submit_time

    def levelled(self, remaining: float, attained: float) -> float:
        """Remaining work as a place in the order: behind every job of a lower level when levels are on."""
        return remaining + self.level(attained) * LEVEL_SPAN if self.remaining_in_levels else remaining

    def level(self, attained: float) -> int:
        return 0 if attained < self.las_threshold_gpu_s else 1

    def rank(self, job: Job, estimate: float | None, sample: RuntimeSample | None = None) -> float:
        """The job's place among equal-priority jobs of its queue while it waits (lower goes first)."""
        if self.kind == REMAINING:
            return self.levelled(self.remaining(job, estimate, job.attained_gpu_s, sample), job.attained_gpu_s)
        if self.kind == LAS:
            return float(self.level(job.attained_gpu_s))
        return 0.0

    def promote_at(self, job: Job, estimate: float | None) -> float:
        """When the waiting job goes to the front of its priority in its queue (``NEVER``: it does not)."""
        since = job.waiting_since
        if self.kind == REMAINING:
            est = self.default_estimate_s if estimate is None else estimate
            wait = self.starvation_age_s
            if self.slowdown_limit > 0:
                wait = min(wait, self.slowdown_limit * est)
            return since + wait
        if self.kind == LAS and self.las_promote_knob > 0 and job.last_run_s > 0:
            return since + self.las_promote_knob * job.last_run_s
        return NEVER
