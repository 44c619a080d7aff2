"""Named policy presets: each one fixes some of the configuration flags."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .model import SchedulerConfig

PRESETS: dict[str, dict[str, Any]] = {
    "muster": {},
    # strict global FIFO by submit time: gang only, no backfill, preemption, fair share or growth
    "fifo": {"fair_share": False, "backfill": False, "preemption": False, "elastic": False},
    # priority, then submit time; everything else as muster
    "priority": {"fair_share": False},
    # muster without backfill reservations
    "drf": {"backfill": False},
}


def resolve(config: SchedulerConfig) -> SchedulerConfig:
    """Apply the named preset to ``config``; raises ``ValueError`` for an unknown policy."""
    try:
        preset = PRESETS[config.policy]
    except KeyError:
        raise ValueError(f"unknown scheduling policy {config.policy!r}; known: {sorted(PRESETS)}") from None
    return replace(config, **preset) if preset else config
