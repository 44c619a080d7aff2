"""A fingerprint of every decision and status the core takes over a fixed set of replays.

    .venv/bin/python bench/decision_fingerprint.py [--traces-dir DIR] [--quick] [--json FILE]

For refactors of the scheduling core that must not change what it decides: run it before and after and
compare the hashes. Each case replays a workload through ``services.simulator`` and hashes every
``CycleResult`` the core returns (decisions in order, and every pending job's reason, text, position and
estimated start), so two runs agree only if every cycle of every case decided and reported the same.

Cases: the four Pollux workloads (muster, tiresias, and muster with every multi-pod job elastic) on the
16 x 4-GPU Pollux cluster, and three days of Philly (partitioned and cohort set-ups, muster and tiresias) on
a cluster scaled to 0.2178 of its nodes (days 29-32 of the trace, busy ones). ``--quick`` keeps Pollux
workload 1 and one Philly day (day 21).
Wall times are printed for reference only; they are not part of the fingerprint.

Decisions and statuses are hashed in a canonical text (``canonical``) that leaves out every field holding its
default, so a new field of a decision (added with a default that keeps the old meaning) does not change the
fingerprint of runs that never set it. The same script run over an older tree (``PYTHONPATH=OLD_TREE``)
gives that tree's fingerprint in the same scheme.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import services.simulator.engine as engine
from schemas.config import MusterConfig
from services.core import CycleResult, SchedulerState
from services.core.model import SchedulerConfig
from services.simulator.engine import SimOptions, simulate
from services.simulator.policies import policy_config
from services.simulator.sources import parse_window
from services.simulator.traces.common import default_traces_dir
from services.simulator.traces.philly import load_philly
from services.simulator.workload import Workload, read_workload_csv, subset
from services.spec.cluster_file import load_cluster_file

POLLUX_CLUSTER = Path(__file__).resolve().parent.parent / "examples" / "sim" / "cluster-pollux.yaml"
POLLUX = SimOptions(round_s=60.0, restart_cost_s=30.0, all_checkpointable=True)
PHILLY_SCALE = 0.2178


def canonical(value: Any) -> str:
    """``repr`` of a value, but a dataclass shows only the fields that differ from their defaults."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = []
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            parts.append(f"{f.name}={canonical(v)}")
        return f"{type(value).__name__}({', '.join(parts)})"
    if isinstance(value, tuple | list):
        inner = ", ".join(canonical(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value)


class Recorder:
    """Wraps ``schedule`` and folds every result into one running hash."""

    def __init__(self, schedule: Callable[..., CycleResult]) -> None:
        self._schedule = schedule
        self.digest = hashlib.sha256()
        self.cycles = 0
        self.decisions = 0
        self.statuses = 0

    def __call__(self, state: SchedulerState, now: float, config: SchedulerConfig, **kw: Any) -> CycleResult:
        result = self._schedule(state, now, config, **kw)
        self.cycles += 1
        self.decisions += len(result.decisions)
        self.statuses += len(result.pending)
        self.digest.update(canonical((now, result.decisions)).encode())
        self.digest.update(canonical(sorted(result.pending.items())).encode())
        return result


def run_case(workload: Workload, cluster: MusterConfig, policy: str, options: SimOptions) -> dict[str, Any]:
    original = engine.schedule
    recorder = Recorder(original)
    engine.schedule = recorder  # type: ignore[assignment]
    started = time.perf_counter()
    try:
        simulate(workload, cluster, policy_config(policy), options=options, policy_name=policy)
    finally:
        engine.schedule = original  # type: ignore[assignment]
    return {
        "hash": recorder.digest.hexdigest()[:16],
        "cycles": recorder.cycles,
        "decisions": recorder.decisions,
        "statuses": recorder.statuses,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def cases(traces: Path, quick: bool) -> list[tuple[str, Workload, MusterConfig, str, SimOptions]]:
    out: list[tuple[str, Workload, MusterConfig, str, SimOptions]] = []
    pollux_cluster = load_cluster_file(POLLUX_CLUSTER)
    elastic = SimOptions(round_s=60.0, restart_cost_s=30.0, all_checkpointable=True, all_elastic=True)
    for n in (1,) if quick else (1, 2, 3, 4):
        path = traces / "pollux-derived" / f"workload-{n}.csv"
        if not path.exists():
            continue
        workload = read_workload_csv(path)
        for policy in ("muster", "tiresias"):
            out.append((f"pollux-{n} {policy}", workload, pollux_cluster, policy, POLLUX))
        out.append((f"pollux-{n} muster elastic", workload, pollux_cluster, "muster", elastic))
    if (traces / "philly-pollux" / "philly.csv").exists():
        window = parse_window("21d:22d" if quick else "29d:32d")
        for setup in ("partitioned", "cohort"):
            trace = load_philly(traces, node_scale=PHILLY_SCALE, setup=setup)
            workload = subset(trace.workload, window=window)
            for policy in ("muster", "tiresias"):
                out.append((f"philly {setup} {policy}", workload, trace.cluster, policy, SimOptions()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces-dir", type=Path, default=None, help="folder with pollux-derived/ and philly-pollux/")
    parser.add_argument("--quick", action="store_true", help="Pollux workload 1 and one Philly day only")
    parser.add_argument("--json", type=Path, help="also write the fingerprints here")
    args = parser.parse_args(argv)
    todo = cases(args.traces_dir or default_traces_dir(), args.quick)
    if not todo:
        print("no traces found (give --traces-dir)", file=sys.stderr)
        return 2
    results: dict[str, dict[str, Any]] = {}
    print(f"{'case':<32} {'hash':<16} {'cycles':>7} {'decisions':>9} {'statuses':>9} {'wall s':>7}")
    for name, workload, cluster, policy, options in todo:
        r = results[name] = run_case(workload, cluster, policy, options)
        print(f"{name:<32} {r['hash']:<16} {r['cycles']:>7,} {r['decisions']:>9,} {r['statuses']:>9,} "
              f"{r['wall_s']:>7.1f}", flush=True)
    everything = hashlib.sha256(json.dumps({k: v["hash"] for k, v in results.items()}, sort_keys=True).encode())
    print(f"all cases: {everything.hexdigest()[:16]}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
