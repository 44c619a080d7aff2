"""Named policy presets: each one fixes some of the configuration flags."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .model import Policy, QueueOrderKind, SchedulerConfig
from .ordering import QueueOrder

_FIFO: dict[str, Any] = {
    "fair_share": False,
    "backfill": False,
    "preemption": False,
    "elastic": False,
    "consolidation": False,
    "queue_order": QueueOrderKind.SUBMIT,
    "learn_runtimes": False,
}

PRESETS: dict[Policy, dict[str, Any]] = {
    Policy.MUSTER: {},
    # FIFO by submit time inside each queue (a blocked head blocks its own queue only): gang only,
    # no backfill, preemption, fair share or growth
    Policy.FIFO: _FIFO,
    # strict global FIFO by submit time: one blocked head blocks every queue
    Policy.FIFO_GLOBAL: _FIFO,
    # Tiresias' 2D-LAS (NSDI'19): least attained GPU-service first in two levels, preemptive, no
    # runtime knowledge; its starvation guard moves a job up after waiting 8x its last run
    Policy.TIRESIAS: {
        "fair_share": False,
        "backfill": False,
        "elastic": False,
        "consolidation": False,
        "queue_order": QueueOrderKind.LAS,
        "learn_runtimes": False,
        "reorder_preemption": True,
        "reorder_wait_ratio": 0.0,
        "max_reorder_restarts": 0,
        "min_runtime_s": 0.0,
        "las_promote_knob": 8.0,
    },
    # priority, then submit time; everything else as muster
    Policy.PRIORITY: {"fair_share": False, "queue_order": QueueOrderKind.SUBMIT},
    # muster without backfill reservations (named ``drf`` before v0.2, which is still understood)
    Policy.MUSTER_NO_BACKFILL: {"backfill": False},
}


def resolve(config: SchedulerConfig) -> SchedulerConfig:
    """Apply the named preset to ``config``, except to the flags it sets explicitly (``config.explicit``: an
    operator's own setting wins over the preset's)."""
    preset = PRESETS[config.policy]
    applied = {name: value for name, value in preset.items() if name not in config.explicit}
    return replace(config, **applied) if applied else config


def described(config: SchedulerConfig) -> str:
    """The resolved policy in one line, as a startup log says it: the preset, then each flag that differs from
    the defaults, marked ``(set)`` when the operator set it and ``(preset)`` when the preset did."""
    resolved, defaults = resolve(config), SchedulerConfig()
    preset = PRESETS.get(config.policy, {})
    parts = []
    for name in sorted({*preset, *config.explicit} - {"policy", "explicit"}):
        value = getattr(resolved, name)
        if name in config.explicit:
            parts.append(f"{name}={value} (set)")
        elif value != getattr(defaults, name):
            parts.append(f"{name}={value} (preset)")
    return f"policy {config.policy}" + (": " + ", ".join(parts) if parts else "")


def queue_order(config: SchedulerConfig) -> QueueOrder:
    """How a state must rank its queues for ``config`` (``SchedulerState(..., order=queue_order(cfg))``)."""
    return QueueOrder.of(resolve(config))
