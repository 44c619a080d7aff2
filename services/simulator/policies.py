"""Named scheduling policies the simulator can run.

Every preset of the core (``services.core.PRESETS``: fifo, muster, priority, drf) under its own
name, plus ablations of ``muster`` that switch one mechanism off to show what it contributes.
"""

from __future__ import annotations

from services.core import PRESETS
from services.core.model import SchedulerConfig

ABLATIONS: dict[str, SchedulerConfig] = {
    "muster-no-preemption": SchedulerConfig(policy="muster", preemption=False),
    "muster-no-backfill": SchedulerConfig(policy="muster", backfill=False),
    "muster-no-fair-share": SchedulerConfig(policy="muster", fair_share=False),
}

POLICIES: dict[str, SchedulerConfig] = {name: SchedulerConfig(policy=name) for name in PRESETS} | ABLATIONS


def policy_config(name: str) -> SchedulerConfig:
    """The configuration called ``name``; raises ``KeyError`` listing the known names otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
