"""The scheduling policy of a queue-manager process, from ``MUSTER_SCHEDULER_<FIELD>`` variables.

Every field of ``services.core.SchedulerConfig`` can be set, e.g. ``MUSTER_SCHEDULER_MIN_RUNTIME_S=60``
or ``MUSTER_SCHEDULER_POLICY=fifo``; unset fields keep the core's defaults. A flag set here wins over the
policy's preset (``MUSTER_SCHEDULER_POLICY=tiresias`` with ``MUSTER_SCHEDULER_MIN_RUNTIME_S=60`` runs
Tiresias with 60 s), and the queue manager logs the resolved policy at start (``services.core.described``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from enum import Enum
from typing import Any

from services.core import SchedulerConfig

ENV_PREFIX = "MUSTER_SCHEDULER_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _convert(name: str, raw: str, default: object) -> Any:
    if isinstance(default, bool):
        value = raw.strip().lower()
        if value not in _TRUE | _FALSE:
            raise ValueError(f"{ENV_PREFIX}{name.upper()}: expected true/false, got {raw!r}")
        return value in _TRUE
    kind: Any = type(default)
    try:
        return kind(raw)
    except ValueError:
        if isinstance(default, Enum):
            known = ", ".join(member.value for member in type(default))
            raise ValueError(f"{ENV_PREFIX}{name.upper()}: expected one of {known}, got {raw!r}") from None
        raise ValueError(f"{ENV_PREFIX}{name.upper()}: expected {type(default).__name__}, got {raw!r}") from None


def scheduler_config_from_env(environ: Mapping[str, str] | None = None) -> SchedulerConfig:
    env = os.environ if environ is None else environ
    base = SchedulerConfig()
    changes: dict[str, Any] = {
        f.name: _convert(f.name, env[ENV_PREFIX + f.name.upper()], getattr(base, f.name))
        for f in dataclasses.fields(SchedulerConfig)
        if f.name != "explicit" and ENV_PREFIX + f.name.upper() in env
    }
    return dataclasses.replace(base, **changes, explicit=frozenset(changes) - {"policy"})
