"""The figures of Kueue's scheduler performance test, read from its runner's output and computed the same way
for Muster's run of the same scenario.

Kueue's recorder (``test/performance/scheduler/runner/recorder``) gives, per workload class, the average time
from a workload's first event (its creation) to its admission (to the last admission, when it was evicted and
admitted again) and to its finish, and the evictions; per ClusterQueue class, the quota used over time
(the integral of the queue's usage between its status updates) and the nominal quota. Its checker
(``checker_test.go``) turns that into a usage percentage: used / (nominal x (last event - first event)).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from bench.peers.kueue_scenario import Arrival, Scenario
from bench.system.measure import Timeline


@dataclass(frozen=True)
class ClassFigures:
    count: int
    admitted: int
    avg_admission_s: float
    avg_finish_s: float
    evictions: int


@dataclass(frozen=True)
class Figures:
    """One system's figures for one run of the scenario."""

    classes: dict[str, ClassFigures]
    usage: dict[str, float]  # queue class -> percent of its nominal quota used over the run
    wall_s: float | None  # the scheduler's command wall time (Kueue) or first submission to last finish (Muster)
    cpu_s: dict[str, float] = field(default_factory=dict)  # process -> CPU seconds
    verdict: dict[str, bool] | None = None  # Kueue's checker: subtest -> passed


def usage_percent(used: float, nominal: float, elapsed: float) -> float:
    """The checker's usage: ``used`` (quota x time) over ``nominal`` x ``elapsed``, in percent."""
    if nominal <= 0 or elapsed <= 0:
        return 0.0
    return used * 100.0 / (nominal * elapsed)


def read_kueue(summary: Path, cmd_stats: Path | None = None) -> Figures:
    """Kueue's ``summary.yaml`` (and ``minimalkueue.stats.yaml``) as written by its runner."""
    data: dict[str, Any] = yaml.safe_load(summary.read_text()) or {}
    classes = {
        name: ClassFigures(count=int(c.get("count", 0)), admitted=int(c.get("count", 0)),
                           avg_admission_s=int(c.get("averageTimeToAdmissionMs", 0)) / 1000,
                           avg_finish_s=int(c.get("averageTimeToFinishMs", 0)) / 1000,
                           evictions=int(c.get("totalEvictions", 0)))
        for name, c in (data.get("workloadClasses") or {}).items()
    }
    usage = {}
    for name, q in (data.get("clusterQueueClasses") or {}).items():
        elapsed_ms = (_time(q["lastEventTime"]) - _time(q["firstEventTime"])) * 1000
        # cpuUsed is mCPU x ms and nominalQuota mCPU, as the checker reads them
        usage[name] = usage_percent(float(q.get("cpuUsed", 0)), float(q.get("nominalQuota", 0)), elapsed_ms)
    wall = cpu = None
    if cmd_stats is not None and cmd_stats.exists():
        stats: dict[str, Any] = yaml.safe_load(cmd_stats.read_text()) or {}
        wall = int(stats.get("wallMs", 0)) / 1000
        cpu = (int(stats.get("userMs", 0)) + int(stats.get("sysMs", 0))) / 1000
    return Figures(classes, usage, wall, {"minimalkueue": cpu} if cpu is not None else {})


def _time(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def muster_figures(scenario: Scenario, arrivals: Iterable[Arrival], timeline: Timeline, *, started: float,
                   cpu_s: Mapping[str, float] | None = None) -> Figures:
    """The same figures from a Muster run's timeline: time to admission from submission to the last
    JobAdmitted; a queue's usage from its jobs' admitted intervals (until they finished or were stopped),
    over the time from the start until the queue's last job ended."""
    by_class: dict[str, list[Arrival]] = {}
    arrivals = list(arrivals)
    for a in arrivals:
        by_class.setdefault(a.template.class_name, []).append(a)
    classes = {}
    for name in scenario.classes:
        chosen = by_class.get(name, [])
        admitted = [a for a in chosen if a.job_id in timeline.admitted_last and a.job_id in timeline.submitted]
        waits = [timeline.admitted_last[a.job_id] - timeline.submitted[a.job_id] for a in admitted]
        finishes = [timeline.finished[a.job_id] - timeline.submitted[a.job_id]
                    for a in chosen if a.job_id in timeline.finished and a.job_id in timeline.submitted]
        classes[name] = ClassFigures(
            count=len(chosen), admitted=len(admitted),
            avg_admission_s=statistics.fmean(waits) if waits else float("nan"),
            avg_finish_s=statistics.fmean(finishes) if finishes else float("nan"),
            evictions=sum(timeline.evictions.get(a.job_id, 0) for a in chosen))
    used: dict[str, float] = {}
    last: dict[str, float] = {}
    for a in arrivals:
        for begin, end in timeline.held.get(a.job_id, ()):
            used[a.queue] = used.get(a.queue, 0.0) + a.amount * (end - begin)
            last[a.queue] = max(last.get(a.queue, started), end)
    usage: dict[str, float] = {}
    for queue_class in sorted(set(scenario.queue_classes.values())):
        queues = [q for q in scenario.queues if q.class_name == queue_class]
        elapsed = max((last.get(q.name, started) for q in queues), default=started) - started
        usage[queue_class] = usage_percent(sum(used.get(q.name, 0.0) for q in queues),
                                           sum(q.nominal for q in queues), elapsed)
    ends = [e for spans in timeline.held.values() for _, e in spans]
    wall = max(ends) - started if ends else None
    return Figures(classes, usage, wall, dict(cpu_s or {}))
