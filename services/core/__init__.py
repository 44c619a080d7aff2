"""The pure scheduling core: value types, ``SchedulerState`` and ``schedule``.

Standard library only, synchronous, no clock and no randomness: time comes in as ``now``.

- ``state``: the mutable state and its incremental indexes (pending order per queue, free capacity
  per node bucketed by free GPUs, quota usage per queue and cohort pool, running-job indexes).
- ``scheduler``: ``schedule(state, now, config)``; reads the state, returns a ``CycleResult``.
- ``cycle``: scratch copies for one call and the admission of a single job.
- ``quota``, ``placement``/``capacity``, ``preemption``, ``backfill``, ``elastic``, ``estimate``,
  ``fairshare``, ``pending``, ``policy``: one concern each.

Build the state with ``SchedulerState(..., half_life_s=config.fair_share_half_life_s)`` so the
usage history it integrates decays at the same rate the scheduler assumes.
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
    Preempt,
    PreemptReason,
    QueueSpec,
    Reject,
    ResourceQuota,
    RunningJob,
    Scale,
    SchedulerConfig,
    TopologyMode,
    TopologyRequest,
    gpu_resource,
)
from .policy import PRESETS
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
    "Preempt",
    "PreemptReason",
    "QueueSpec",
    "Reject",
    "ResourceQuota",
    "RunningJob",
    "Scale",
    "SchedulerConfig",
    "SchedulerState",
    "TopologyMode",
    "TopologyRequest",
    "gpu_resource",
    "schedule",
]
