"""Named scheduling policies the simulator can run.

Every preset of the core (``services.core.PRESETS``: muster, fifo, fifo-global, tiresias, priority,
muster-no-backfill) under its own name, plus ablations of ``muster`` that switch one mechanism off (or change one
choice) to show what it contributes.
"""

from __future__ import annotations

from services.core import PRESETS
from services.core.model import Policy, QueueOrderKind, SchedulerConfig

ABLATIONS: dict[str, SchedulerConfig] = {
    "muster-no-preemption": SchedulerConfig(policy=Policy.MUSTER, preemption=False),
    "muster-no-fair-share": SchedulerConfig(policy=Policy.MUSTER, fair_share=False),
    "muster-no-fair-share-preemption": SchedulerConfig(policy=Policy.MUSTER, fair_share_preemption=False),
    "muster-no-consolidation": SchedulerConfig(policy=Policy.MUSTER, consolidation=False),
    "muster-no-elastic": SchedulerConfig(policy=Policy.MUSTER, elastic=False),
    # the order inside a queue and what it builds on
    "muster-submit-order": SchedulerConfig(policy=Policy.MUSTER, queue_order=QueueOrderKind.SUBMIT),
    "muster-las-order": SchedulerConfig(policy=Policy.MUSTER, queue_order=QueueOrderKind.LAS),
    # LAS with Tiresias' starvation guard (a job waiting 8x its last run moves up), every other mechanism as muster
    "muster-las-guarded-order": SchedulerConfig(policy=Policy.MUSTER, queue_order=QueueOrderKind.LAS,
                                                las_promote_knob=8.0),
    # least remaining work over every job, not inside the two levels of attained service (the order before #35)
    "muster-no-remaining-levels": SchedulerConfig(policy=Policy.MUSTER, remaining_in_levels=False),
    # learnt runtimes ranked by their median, not read as a distribution (the order before #35's third step)
    "muster-median-estimates": SchedulerConfig(policy=Policy.MUSTER, runtime_distribution=False),
    # jobs promoted past their slowdown bound all go first (the order before #35's third step)
    "muster-promoted-first": SchedulerConfig(policy=Policy.MUSTER, promotion_interleaved=False),
    # promoted jobs take back nothing from the jobs that overtook them (the order before #35's fourth step)
    "muster-no-overtaken-preemption": SchedulerConfig(policy=Policy.MUSTER, overtaken_preemption=False),
    "muster-no-learnt-runtimes": SchedulerConfig(policy=Policy.MUSTER, learn_runtimes=False),
    "muster-no-reorder-preemption": SchedulerConfig(policy=Policy.MUSTER, reorder_preemption=False),
    "muster-reorder-always": SchedulerConfig(policy=Policy.MUSTER, reorder_wait_ratio=0.0),
}

POLICIES: dict[str, SchedulerConfig] = {name.value: SchedulerConfig(policy=name) for name in PRESETS} | ABLATIONS


def policy_config(name: str) -> SchedulerConfig:
    """The configuration called ``name``; raises ``KeyError`` listing the known names otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
