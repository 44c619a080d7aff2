"""The typed parts of one cycle's scratch state. ``cycle.Cycle`` holds one of each, beside its scratch copies of
capacity (``cap``) and quota (``book``), its reservations (``reservations.Reservations``) and its estimates
(``forecast.Forecast``).

Who writes each part:

- ``Outcome``, what the cycle has decided: only the steps that decide write it (housekeeping, admission in
  ``Cycle.commit_admit``, preemption and shrinking in ``scheduler._carry_out``, growth in ``elastic``). Its
  decisions and statuses become the ``CycleResult``; the rest says which jobs those decisions touched.
- ``Wants``, what the waiting jobs walked so far want: written by the walk (``Cycle.note_*``) as it passes
  each job it could not start, read by elastic growth and by the size an elastic job starts with.
- ``Memo``, answers worked out during the cycle that stay true until it ends (usage only grows and free
  capacity only shrinks within a cycle): written on first use by whichever step asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from .model import Amount, Decision, Job, PendingInfo, PendingReason, Provision

#: a running job ranked as a victim: (priority, not checkpointable, tie-break, job id), cheapest first
VictimRank = tuple[int, bool, float, str]


class VictimPool(Enum):
    """Which running jobs a list of victims ranks."""

    QUEUE = "queue"  # a queue's own running jobs
    BORROWED = "borrowed"  # the jobs borrowing within a cohort tree (named by its root)
    ORDER = "order"  # a queue's checkpointable jobs, by how far behind they are in its order


#: (pool, the queue or the cohort tree's root, the minimum runtime that protected running jobs when ranked)
VictimListKey = tuple[VictimPool, str, "float | None"]


@dataclass(slots=True, eq=False)
class Outcome:
    """What the cycle has decided so far, and the running jobs and waiting jobs its decisions touch."""

    decisions: list[Decision] = field(default_factory=list)
    info: dict[str, PendingInfo] = field(default_factory=dict)  # statuses computed this cycle
    admitted: dict[str, tuple[int, Job, str]] = field(default_factory=dict)  # job -> (decision index, job, type)
    rejected: set[str] = field(default_factory=set)
    #: running jobs already preempted, shrunk or grown this cycle (none is touched twice)
    taken: set[str] = field(default_factory=set)
    stopped: dict[str, dict[str, Amount]] = field(default_factory=dict)  # queue -> what its preempted jobs hold
    #: preemptors that took their turn at the start of the cycle and hold their placement while their victims
    #: stop -> when the victims should be gone
    front: dict[str, float] = field(default_factory=dict)
    admissions: int = 0  # counted against ``max_admissions_per_cycle``
    preempt_attempts: int = 0  # victim searches, counted against ``max_preemption_attempts``
    moves: int = 0  # running jobs moved to consolidate
    provisions: list[Provision] = field(default_factory=list)  # nodes bought this cycle (``growth``)
    provisioned: set[str] = field(default_factory=set)  # ... for these jobs
    growing: dict[str, int] = field(default_factory=dict)  # group -> nodes bought for it this cycle
    charged: dict[str, tuple[float, float]] = field(default_factory=dict)  # queue -> GPU-hours, money this cycle
    growth_searches: int = 0  # existing-capacity starts searched for jobs that might have nodes bought


@dataclass(slots=True, eq=False)
class Wants:
    """What the waiting jobs walked so far could not get. A GPU type ``""`` means any type."""

    wanted: set[str] = field(default_factory=set)  # GPU types waiting jobs could use
    #: GPU types that jobs tried earlier in the walk could not get: those jobs are ahead of later ones
    blocked: set[str] = field(default_factory=set)
    quota_queues: set[str] = field(default_factory=set)  # queues whose jobs wait for their quota
    quota_cohorts: set[str] = field(default_factory=set)  # cohort trees (by root) whose jobs wait for quota


#: a request's shape as far as quota and placement judge it (``cycle._shape``)
Shape = tuple[object, ...]


@dataclass(slots=True, eq=False)
class Memo:
    """Answers that hold until the cycle ends, kept so that each is worked out once."""

    #: (GPU type, shape, pods, reservations it may not delay) -> why it did not fit: capacity only shrinks
    fails: dict[tuple[str, Shape, int, tuple[str, ...]], PendingReason] = field(default_factory=dict)
    #: (queue, preemptible, resource) -> the least of it found out of quota, and why (usage only grows)
    quota_floors: dict[tuple[str, bool, str], tuple[Amount, PendingReason]] = field(default_factory=dict)
    shares: dict[str, float] = field(default_factory=dict)  # queue -> weighted share (dropped as it admits)
    headroom: dict[str, dict[str, Amount]] = field(default_factory=dict)  # queue -> nominal minus admitted
    borrows: dict[str, dict[Shape, bool]] = field(default_factory=dict)  # queue -> request shape -> borrows
    spent: set[str] = field(default_factory=set)  # queues refused even one more GPU of every type
    preemptor_queues: frozenset[str] | None = None  # queues with a preemptor whose victims still stop
    victim_lists: dict[VictimListKey, list[VictimRank]] = field(default_factory=dict)
    #: per queue, the running elastic jobs below full size, by their place in the queue's order (lazily)
    growers: dict[str, list[tuple[tuple[int, float], str]]] | None = None
