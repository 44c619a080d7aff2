"""The pure scheduling core: value types, ``SchedulerState`` and ``schedule``.

Standard library only, synchronous, no clock and no randomness: time comes in as ``now``.

- ``state``: the mutable state and its incremental indexes (pending order per queue, free capacity
  per node bucketed by free GPUs, quota usage per queue and cohort pool, running-job indexes).
- ``scheduler``: ``schedule(state, now, config)``; reads the state, returns a ``CycleResult``.
- ``ordering``, ``runtimes``: the order inside a queue; runtimes learnt from finished jobs.
- ``cycle``: scratch copies for one call and the admission of a single job.
- ``quota``, ``placement``/``capacity``, ``preemption``, ``backfill``, ``elastic``, ``estimate``,
  ``fairshare``, ``pending``, ``policy``: one concern each.

Build the state with ``SchedulerState(..., half_life_s=config.fair_share_half_life_s,
order=queue_order(config))`` so the usage history it integrates decays at the rate the scheduler
assumes and its queues are ranked as the policy orders them (another order still works, sorted on
the spot each cycle).
"""

from .model import (
    ANY_GPU,
    CPU,
    MEMORY,
    TOPOLOGY_LEVELS,
    Admit,
    CohortSpec,
    CycleResult,
    Decision,
    DecisionKind,
    Job,
    Node,
    NodeAssignment,
    PendingInfo,
    PendingReason,
    Placement,
    Policy,
    Preempt,
    PreemptReason,
    QueueOrderKind,
    QueueSpec,
    Reject,
    ResourceQuota,
    Role,
    RunningJob,
    Scale,
    SchedulerConfig,
    TopologyMode,
    TopologyRequest,
    gpu_resource,
)
from .ordering import QueueOrder
from .policy import PRESETS, described, queue_order
from .scheduler import schedule
from .state import SchedulerState

__all__ = [
    "ANY_GPU",
    "CPU",
    "MEMORY",
    "PRESETS",
    "TOPOLOGY_LEVELS",
    "Admit",
    "CohortSpec",
    "CycleResult",
    "Decision",
    "DecisionKind",
    "Job",
    "Node",
    "NodeAssignment",
    "PendingInfo",
    "PendingReason",
    "Placement",
    "Policy",
    "Preempt",
    "PreemptReason",
    "QueueOrder",
    "QueueOrderKind",
    "QueueSpec",
    "Reject",
    "ResourceQuota",
    "Role",
    "RunningJob",
    "Scale",
    "SchedulerConfig",
    "SchedulerState",
    "TopologyMode",
    "TopologyRequest",
    "described",
    "gpu_resource",
    "queue_order",
    "schedule",
]
