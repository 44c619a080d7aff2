"""What-if replays of the live log: a configuration patch, the runs, and actual vs replayed per queue.

A **config patch** is a YAML merge patch (RFC 7386: a mapping merges into a mapping, a value replaces,
``null`` deletes) on the reconstructed configuration, written with named items as mappings keyed by name::

    queues:
      team-b:
        quotas: {gpu:a100: {nominal: 32, borrowing_limit: 16}}
        weight: 2
    cohorts: {research: {weight: 1}}
    clusters:
      east:
        node_groups:
          a100: {count: 6}          # the group's node count (absolute), here 2 nodes more
    scheduler: {preemption: false, min_runtime_s: 60}

The sections are those of the cluster file (``queues``, ``cohorts``, ``priority_classes``,
``gpu_types``, ``pools``, ``tenants``, ``clusters`` with their ``node_groups``) and ``scheduler``,
the fields of ``SchedulerConfig`` (the policy flags the queue manager reads from ``MUSTER_SCHEDULER_*``).
The result is validated with the same models; an unknown key is an error naming its place.

Figures (``compare``), per queue, for the jobs submitted in the window (carried-over jobs are load only):

- ``avg_wait_s``: mean of admission - submission over the jobs that started in reality.
- ``avg_jct_s``: mean of end - submission over the jobs that succeeded in reality.
- ``gpu_allocation``: GPU-seconds the queue's jobs held during the window / (GPUs x window length),
  each run against its own capacity.
- ``preemptions``: preemptions of the queue's jobs (a cancel is not one).
- ``waiting_at_end``: jobs of the window that had not started when the window ended.

The report's ``notes`` say what the reconstruction assumed, and ``not_replayed`` what happened in the window
that the replays do not replay, and why (``Reconstruction.not_replayed``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from schemas.config import (
    ClusterConfig,
    CohortConfig,
    GpuTypeConfig,
    MusterConfig,
    NodeGroupConfig,
    PoolConfig,
    PriorityClassConfig,
    QueueConfig,
    TenantConfig,
)
from services.core.model import SchedulerConfig
from services.simulator.engine import SimOptions, SimResult, Simulator
from services.simulator.replay import Reconstruction
from services.simulator.report import bought, held_gpu_seconds
from services.spec.durations import human_duration
from services.spec.merge_patch import merge_patch

_SECTIONS: dict[str, type[BaseModel]] = {
    "queues": QueueConfig, "cohorts": CohortConfig, "priority_classes": PriorityClassConfig,
    "gpu_types": GpuTypeConfig, "pools": PoolConfig, "tenants": TenantConfig, "clusters": ClusterConfig,
}
PATCH_SECTIONS = (*_SECTIONS, "scheduler")
METRICS = ("avg_wait_s", "avg_jct_s", "gpu_allocation", "preemptions", "waiting_at_end")
RUNS = ("actual", "baseline", "whatif")


class PatchError(ValueError):
    """A config patch that does not apply: unknown keys, wrong types, an invalid result."""


@dataclasses.dataclass(frozen=True, slots=True)
class Patched:
    config: MusterConfig
    scheduler: SchedulerConfig
    changes: tuple[str, ...]  # "path: old -> new", for the output


# ---------------------------------------------------------------- the patch


def _by_name(items: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(i["name"]): {k: v for k, v in i.items() if k != "name"} for i in items}


def keyed(config: MusterConfig) -> dict[str, Any]:
    """The configuration as the patch addresses it: named items as mappings keyed by name."""
    data = config.model_dump(mode="json")
    out: dict[str, Any] = {s: _by_name(data[s]) for s in _SECTIONS}
    for cluster in out["clusters"].values():
        cluster["node_groups"] = _by_name(cluster.get("node_groups", []))
    return out


def _unkeyed(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for section in _SECTIONS:
        items = []
        for name, value in (data.get(section) or {}).items():
            item = {"name": name, **(value or {})}
            if section == "clusters":
                groups = item.get("node_groups") or {}
                if not isinstance(groups, Mapping):
                    raise PatchError(f"clusters.{name}.node_groups: expected a mapping of node groups by name")
                item["node_groups"] = [{"name": g, **(v or {})} for g, v in groups.items()]
            items.append(item)
        out[section] = items
    return out


def _check_keys(patch: Mapping[str, Any]) -> None:
    """Unknown keys of the patch's sections and items, with the place and a near name when there is one."""
    def unknown(where: str, key: object, known: Sequence[str]) -> PatchError:
        near = difflib.get_close_matches(str(key), list(known), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else f"; known: {', '.join(known)}"
        return PatchError(f"{where}: unknown key {key!r}{hint}")

    for section, value in patch.items():
        if section not in PATCH_SECTIONS:
            raise unknown("config patch", section, PATCH_SECTIONS)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise PatchError(f"{section}: expected a mapping")
        if section == "scheduler":
            fields = [f.name for f in dataclasses.fields(SchedulerConfig) if f.name != "explicit"]
            for key in value:
                if key not in fields:
                    raise unknown("scheduler", key, fields)
            continue
        model = _SECTIONS[section]
        for name, item in value.items():
            if item is None:
                continue
            if not isinstance(item, Mapping):
                raise PatchError(f"{section}.{name}: expected a mapping of its fields")
            fields = [f for f in model.model_fields if f != "name"]
            for key in item:
                if key not in fields:
                    raise unknown(f"{section}.{name}", key, fields)
            if section == "clusters":
                for group, body in (item.get("node_groups") or {}).items():
                    if isinstance(body, Mapping):
                        known = [f for f in NodeGroupConfig.model_fields if f != "name"]
                        for key in body:
                            if key not in known:
                                raise unknown(f"clusters.{name}.node_groups.{group}", key, known)


def _scheduler(base: SchedulerConfig, changes: Mapping[str, Any]) -> SchedulerConfig:
    values: dict[str, Any] = {}
    for key, value in changes.items():
        default = getattr(base, key)
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            value = float(value) if ok else value
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise PatchError(f"scheduler.{key}: expected {type(default).__name__}, got {value!r}")
        values[key] = value
    # a patched flag is the operator's own setting: the policy's preset does not override it
    return dataclasses.replace(base, **values, explicit=base.explicit | (frozenset(values) - {"policy"}))


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, Mapping) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def _where(loc: Sequence[int | str], data: Mapping[str, Any]) -> str:
    """A pydantic error location in the unkeyed form, told with names instead of list indexes."""
    parts: list[str] = []
    node: Any = data
    for part in loc:
        if isinstance(part, int) and isinstance(node, list) and part < len(node):
            node = node[part]
            parts.append(str(node.get("name", part)) if isinstance(node, Mapping) else str(part))
        else:
            node = node.get(part) if isinstance(node, Mapping) else None
            parts.append(str(part))
    return ".".join(parts)


def apply_patch(config: MusterConfig, scheduler: SchedulerConfig, patch: Mapping[str, Any] | None) -> Patched:
    """``patch`` applied to ``config`` and ``scheduler``; raises ``PatchError`` saying what is wrong."""
    if not patch:
        return Patched(config, scheduler, ())
    if not isinstance(patch, Mapping):
        raise PatchError("a config patch must be a mapping")
    _check_keys(patch)
    before = keyed(config)
    after = merge_patch(before, {k: v for k, v in patch.items() if k != "scheduler"})
    raw = _unkeyed(after)
    try:
        patched = MusterConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{_where(e['loc'], raw)}: {e['msg']}" for e in exc.errors()[:5])
        raise PatchError(f"the patched configuration is not valid: {problems}") from None
    new_scheduler = _scheduler(scheduler, patch.get("scheduler") or {})
    old_flat, new_flat = _flatten(before), _flatten(keyed(patched))
    changes = [f"{k}: {old_flat.get(k, '(none)')} -> {new_flat.get(k, '(none)')}"
               for k in sorted(set(old_flat) | set(new_flat)) if old_flat.get(k) != new_flat.get(k)]
    old_s, new_s = dataclasses.asdict(scheduler), dataclasses.asdict(new_scheduler)
    old_s.pop("explicit"), new_s.pop("explicit")
    changes += [f"scheduler.{k}: {old_s[k]} -> {new_s[k]}" for k in old_s if old_s[k] != new_s[k]]
    return Patched(patched, new_scheduler, tuple(changes))


def load_patch(path: str | Path) -> dict[str, Any]:
    """A patch file (YAML); raises ``PatchError`` naming the file."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PatchError(f"{path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PatchError(f"{path}: a config patch must be a mapping")
    return data


# ---------------------------------------------------------------- the runs and the comparison


def replay(recon: Reconstruction, config: MusterConfig, scheduler: SchedulerConfig, *, name: str,
           options: SimOptions | None = None) -> SimResult:
    """The reconstructed workload through the core on ``config`` under ``scheduler``."""
    return Simulator(recon.workload, config, scheduler, options=options, policy_name=name).run()


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _capacity(config: MusterConfig) -> int:
    return sum(g.count * g.gpus_per_node for c in config.clusters for g in c.node_groups)


def compare(recon: Reconstruction, runs: Mapping[str, tuple[SimResult, MusterConfig]]) -> dict[str, Any]:
    """Actual vs each replay (``runs``: name -> result and the configuration it ran on), per queue and in all."""
    window = recon.window_s
    window_jobs = [j for j in recon.jobs.values() if not j.carried_over]
    queues = sorted({j.queue for j in recon.jobs.values() if j.replayed or not j.carried_over})
    started = [j for j in window_jobs if j.first_start is not None and j.replayed]
    succeeded = [j for j in window_jobs if j.outcome == "succeeded" and j.replayed]

    def figures(queue: str | None, name: str) -> dict[str, Any]:
        def mine(jobs: Sequence[Any]) -> list[Any]:
            return [j for j in jobs if queue is None or j.queue == queue]

        if name == "actual":
            gpus = _capacity(recon.cluster)
            held = sum(j.gpu_seconds for j in recon.jobs.values() if queue is None or j.queue == queue)
            waits = [j.wait_s for j in mine(started) if j.wait_s is not None]
            jcts = [j.jct_s for j in mine(succeeded) if j.jct_s is not None]
            preemptions = sum(j.preemptions for j in mine(window_jobs))
            waiting = sum(1 for j in mine(window_jobs) if j.first_start is None and j.outcome == "pending")
        else:
            result, config = runs[name]
            gpus = _capacity(config)
            recs = result.records
            timeline = [e for e in result.timeline if queue is None or e[1] == queue]
            held = held_gpu_seconds(timeline, 0.0, window) if window > 0 else 0.0
            waits = [recs[j.job_id].first_start - recs[j.job_id].spec.submit_time  # type: ignore[operator]
                     for j in mine(started) if recs[j.job_id].first_start is not None]
            jcts = [recs[j.job_id].end - recs[j.job_id].spec.submit_time  # type: ignore[operator]
                    for j in mine(succeeded) if recs[j.job_id].end is not None and not recs[j.job_id].killed]
            preemptions = sum(recs[j.job_id].preemptions for j in mine(window_jobs) if j.replayed)
            waiting = sum(1 for j in mine(window_jobs) if j.replayed and (
                recs[j.job_id].first_start is None or (recs[j.job_id].first_start or 0.0) > window))
        return {
            "avg_wait_s": _mean(waits),
            "avg_jct_s": _mean(jcts),
            "gpu_allocation": held / (gpus * window) if gpus and window > 0 else None,
            "preemptions": preemptions,
            "waiting_at_end": waiting,
            "capacity_gpus": gpus,
        }

    names = ["actual", *runs]
    return {
        "window": {"start": recon.origin.isoformat(), "end": recon.as_of.isoformat(), "seconds": window},
        "jobs": recon.counts(),
        "notes": list(recon.notes),
        "not_replayed": list(recon.not_replayed),
        "per_queue": {q: {n: figures(q, n) for n in names} for q in queues},
        "all": {n: figures(None, n) for n in names},
    } | ({"bought": {n: bought(result) for n, (result, _) in runs.items() if result.provisions}}
         if any(result.provisions for result, _ in runs.values()) else {})


# ---------------------------------------------------------------- output


def _cell(metric: str, value: Any) -> str:
    if value is None:
        return "-"
    if metric.endswith("_s"):
        return human_duration(float(value)) if value >= 1 else f"{value:.1f}s"
    if metric == "gpu_allocation":
        return f"{100 * value:.1f}%"
    return str(value)


_LABELS = {"avg_wait_s": "avg wait", "avg_jct_s": "avg JCT", "gpu_allocation": "GPU allocation",
           "preemptions": "preemptions", "waiting_at_end": "waiting at end"}
_HEADS = {"actual": "actual", "baseline": "baseline replay", "whatif": "what-if"}


def render_text(report: Mapping[str, Any], changes: Sequence[str] = ()) -> str:
    """The comparison as a table per queue, the window's job counts, the notes and the patch's changes."""
    lines = [f"window {report['window']['start']} .. {report['window']['end']} "
             f"({human_duration(report['window']['seconds'])})"]
    lines.append("jobs: " + ", ".join(f"{k} {v}" for k, v in sorted(report["jobs"].items())))
    if changes:
        lines.append("patch:")
        lines += [f"  {c}" for c in changes]
    names = list(report["all"])
    head = ["queue", "metric", *(_HEADS.get(n, n) for n in names)]
    rows = [head]
    for queue, runs in [*report["per_queue"].items(), ("(all)", report["all"])]:
        for metric in METRICS:
            rows.append([queue, _LABELS[metric], *(_cell(metric, runs[n][metric]) for n in names)])
            queue = ""
    caps = ["", "capacity (GPUs)", *(str(report["all"][n]["capacity_gpus"]) for n in names)]
    rows.append(caps)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines.append("")
    lines += ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
              .rstrip() for r in rows]
    for name, b in report.get("bought", {}).items():
        queues = ", ".join(f"{q} {v['gpu_hours']:.1f} GPU-hours" for q, v in b["per_queue"].items())
        lines.append(f"bought ({_HEADS.get(name, name)}): {b['nodes']} nodes for {b['requests']} jobs, "
                     f"{b['gpu_hours']:.1f} GPU-hours, {b['money']:.2f} spent ({queues})")
    if report["notes"]:
        lines.append("")
        lines += [f"note: {n}" for n in report["notes"]]
    if report.get("not_replayed"):
        lines.append("")
        lines += [f"not replayed: {n}" for n in report["not_replayed"]]
    return "\n".join(lines)


def write_plot(report: Mapping[str, Any], path: str | Path) -> None:
    """Bars per queue of each figure: actual, the baseline replay and the what-if side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    queues = list(report["per_queue"])
    names = list(report["all"])
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), squeeze=False)
    width = 0.8 / max(len(names), 1)
    for ax, metric in zip(axes.flat, METRICS[:4], strict=True):
        x = np.arange(len(queues))
        for i, name in enumerate(names):
            values = [report["per_queue"][q][name][metric] for q in queues]
            scale = 100.0 if metric == "gpu_allocation" else 1.0
            ax.bar(x + i * width, [scale * (v or 0.0) for v in values], width, label=_HEADS.get(name, name))
        ax.set_xticks(x + width * (len(names) - 1) / 2, queues)
        unit = " (%)" if metric == "gpu_allocation" else " (s)" if metric.endswith("_s") else ""
        ax.set_title(_LABELS[metric] + unit)
        ax.legend(fontsize="small")
    fig.suptitle("actual vs replayed, per queue")
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)


@dataclasses.dataclass(frozen=True, slots=True)
class WhatIf:
    report: dict[str, Any]
    changes: tuple[str, ...]
    baseline: SimResult
    whatif: SimResult | None


def what_if(recon: Reconstruction, scheduler: SchedulerConfig, patch: Mapping[str, Any] | None, *,
            options: SimOptions | None = None) -> WhatIf:
    """The baseline replay (the configuration as the log tells it) and, with a patch, the what-if replay,
    compared with what actually happened. Raises ``PatchError`` for a patch that does not apply."""
    patched = apply_patch(recon.cluster, scheduler, patch) if patch else None
    baseline = replay(recon, recon.cluster, scheduler, name="baseline", options=options)
    runs: dict[str, tuple[SimResult, MusterConfig]] = {"baseline": (baseline, recon.cluster)}
    changed = None
    if patched is not None:
        changed = replay(recon, patched.config, patched.scheduler, name="whatif", options=options)
        runs["whatif"] = (changed, patched.config)
    return WhatIf(compare(recon, runs), patched.changes if patched else (), baseline, changed)
