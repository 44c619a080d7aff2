"""Named scheduling policies the simulator can run.

Every preset of the core (``services.core.PRESETS``: muster, fifo, fifo-global, tiresias, priority,
drf) under its own name, plus ablations of ``muster`` that switch one mechanism off (or change one
choice) to show what it contributes.
"""

from __future__ import annotations

from services.core import PRESETS
from services.core.model import SchedulerConfig

ABLATIONS: dict[str, SchedulerConfig] = {
    "muster-no-preemption": SchedulerConfig(policy="muster", preemption=False),
    "muster-no-backfill": SchedulerConfig(policy="muster", backfill=False),
    "muster-no-fair-share": SchedulerConfig(policy="muster", fair_share=False),
    "muster-no-fair-share-preemption": SchedulerConfig(policy="muster", fair_share_preemption=False),
    "muster-no-consolidation": SchedulerConfig(policy="muster", consolidation=False),
    "muster-no-elastic": SchedulerConfig(policy="muster", elastic=False),
    # the order inside a queue and what it builds on
    "muster-submit-order": SchedulerConfig(policy="muster", queue_order="submit"),
    "muster-las-order": SchedulerConfig(policy="muster", queue_order="las"),
    "muster-no-learnt-runtimes": SchedulerConfig(policy="muster", learn_runtimes=False),
    "muster-no-reorder-preemption": SchedulerConfig(policy="muster", reorder_preemption=False),
    "muster-reorder-always": SchedulerConfig(policy="muster", reorder_wait_ratio=0.0),
}

POLICIES: dict[str, SchedulerConfig] = {name: SchedulerConfig(policy=name) for name in PRESETS} | ABLATIONS


def policy_config(name: str) -> SchedulerConfig:
    """The configuration called ``name``; raises ``KeyError`` listing the known names otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
