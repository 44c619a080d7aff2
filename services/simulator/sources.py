"""Resolve ``--workload`` / ``--cluster`` into a workload and a cluster configuration.

``--workload`` is a CSV path or a trace name: ``philly`` (``philly:[SETUP][:SCALE]``: SCALE
multiplies every VC's node count, e.g. ``philly:0.25``; SETUP is ``cohort``, the default, where all
VCs share one cohort and borrow idle quota, or ``partitioned``, where each VC runs only on its own
nodes, e.g. ``philly:partitioned:0.25``), ``alibaba`` (``alibaba:<variant>`` picks
another openb pod list, e.g. ``alibaba:multigpu50``) or ``gavel`` (``gavel:<vc>`` for one VC).
A trace brings its own cluster; ``--cluster`` overrides it. A CSV workload needs ``--cluster``.
"""

from __future__ import annotations

from pathlib import Path

from schemas.config import MusterConfig
from services.simulator.traces.alibaba import load_alibaba
from services.simulator.traces.common import Trace
from services.simulator.traces.gavel import load_gavel
from services.simulator.traces.philly import load_philly, parse_philly_variant
from services.simulator.workload import Workload, read_workload_csv
from services.spec.cluster_file import load_cluster_file
from services.spec.durations import parse_duration

TRACE_NAMES = ("philly", "alibaba", "gavel")


def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` (durations after the first arrival; END may be empty for "to the end")."""
    start, sep, end = text.partition(":")
    if not sep:
        raise ValueError(f"window must be START:END, got {text!r}")
    lo = parse_duration(start) if start.strip() else 0.0
    hi = parse_duration(end) if end.strip() else float("inf")
    if hi <= lo:
        raise ValueError(f"window end must be after its start: {text!r}")
    return lo, hi


def parse_size_range(text: str) -> tuple[int, float]:
    """A range of job sizes in GPUs, inclusive: ``N``, ``A-B``, ``>N`` (more than N) or ``N+`` (N or more)."""
    t = text.strip()
    try:
        if t.startswith(">"):
            return int(t[1:]) + 1, float("inf")
        if t.endswith("+"):
            return int(t[:-1]), float("inf")
        lo, sep, hi = t.partition("-")
        low = int(lo)
        high = int(hi) if sep else low
    except ValueError:
        raise ValueError(f"a size is N, A-B, >N or N+ (GPUs), got {text!r}") from None
    if high < low or low < 0:
        raise ValueError(f"a size range must not be empty: {text!r}")
    return low, float(high)


def load_trace(name: str, traces_dir: Path) -> Trace:
    """A named trace with its default cluster."""
    base, _, variant = name.partition(":")
    if base == "philly":
        setup, scale = parse_philly_variant(variant)
        return load_philly(traces_dir, node_scale=scale, setup=setup)
    if base == "alibaba":
        return load_alibaba(traces_dir, variant or "default")
    if base == "gavel":
        return load_gavel(traces_dir, vc=variant or None)
    raise ValueError(f"unknown trace {name!r}; known: {', '.join(TRACE_NAMES)}")


def resolve(workload: str, cluster: str | None, traces_dir: Path) -> tuple[Workload, MusterConfig]:
    """The workload and cluster named on the command line."""
    if workload.partition(":")[0] in TRACE_NAMES and not Path(workload).exists():
        trace = load_trace(workload, traces_dir)
        config = load_cluster_file(cluster) if cluster else trace.cluster
        return trace.workload, config
    if cluster is None:
        raise ValueError("a CSV workload needs --cluster FILE")
    return read_workload_csv(workload), load_cluster_file(cluster)
