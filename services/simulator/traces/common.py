"""What every trace loader returns, and helpers shared by the loaders."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from schemas.config import MusterConfig
from services.simulator.workload import Workload

TRACES_ENV = "MUSTER_TRACES_DIR"


@dataclass(frozen=True, slots=True)
class Trace:
    """A workload together with the cluster (nodes, queues, quotas, cohorts) it should replay on."""

    workload: Workload
    cluster: MusterConfig


def default_traces_dir() -> Path:
    """``$MUSTER_TRACES_DIR``, else ``./traces``, else ``../shared/traces`` from the working directory."""
    env = os.environ.get(TRACES_ENV)
    if env:
        return Path(env)
    for candidate in (Path.cwd() / "traces", Path.cwd().parent / "shared" / "traces"):
        if candidate.is_dir():
            return candidate
    return Path.cwd() / "traces"


def require_file(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"trace file not found: {path} (set {TRACES_ENV} or --traces-dir)")
    return path


def proportional_quotas(demand: dict[str, float], total: int) -> dict[str, int]:
    """Split ``total`` GPUs over queues in proportion to their demand (rounded down)."""
    weight = sum(demand.values())
    if weight <= 0:
        return dict.fromkeys(demand, 0)
    return {q: int(total * d / weight) for q, d in demand.items()}
