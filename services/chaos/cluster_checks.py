"""Invariants over the simulated cluster: GPUs never over-committed, attempts never overlapping, and no
Kubernetes object left behind by a job that has ended."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from schemas.kube import JOB_ID
from services.chaos.pods import TERMINAL_PHASES, PodLife
from services.chaos.report import Violation
from services.kubesim.resources import JOBS, PODS
from services.kubesim.store import Store


def check_node_gpus(pods: list[PodLife], node_gpus: dict[str, int]) -> list[Violation]:
    """At no moment do the pods bound to a node request more GPUs than it has."""
    changes: dict[str, list[tuple[float, int, PodLife]]] = defaultdict(list)
    for pod in pods:
        held = pod.held
        if held is None or pod.node is None or pod.gpus == 0:
            continue
        changes[pod.node] += [(held[0], pod.gpus, pod), (held[1], -pod.gpus, pod)]
    found: list[Violation] = []
    for node, deltas in sorted(changes.items()):
        capacity = node_gpus.get(node, 0)
        used, over_since, over_for = 0, 0.0, 0.0
        holding: set[str] = set()
        peak: tuple[int, list[str]] = (0, [])
        for at, delta, pod in sorted(deltas, key=lambda d: (d[0], d[1])):  # releases first at equal times
            if used > capacity:
                over_for += at - over_since
            used += delta
            over_since = at
            (holding.add if delta > 0 else holding.discard)(pod.name)
            if used > peak[0]:
                peak = (used, sorted(holding))
        if peak[0] > capacity:
            found.append(Violation("capacity", None, f"node {node}: pods held {peak[0]} GPUs at once, it has "
                                   f"{capacity} (over-committed for {over_for:.3f}s in all); pods {peak[1]}"))
    return found


def check_attempt_overlap(pods: list[PodLife]) -> list[Violation]:
    """Per job, no two attempts and no two Jobs (revisions) of one attempt had running pods at the same time."""
    runs: dict[str, dict[tuple[int, str], tuple[float, float]]] = defaultdict(dict)
    for pod in pods:
        ran = pod.ran
        if ran is None:
            continue
        key = (pod.attempt, pod.owner)
        start, end = runs[pod.job_id].get(key, ran)
        runs[pod.job_id][key] = (min(start, ran[0]), max(end, ran[1]))
    found: list[Violation] = []
    for job, spans in sorted(runs.items()):
        ordered = sorted(spans.items(), key=lambda item: item[1][0])
        latest: tuple[tuple[int, str], float] | None = None  # the span that ends last so far, and its end
        for key, (start, end) in ordered:
            if latest is not None and start < latest[1]:
                both = min(end, latest[1]) - start
                found.append(Violation("overlap", job, f"attempt {key[0]} ({key[1]}) ran while attempt "
                                       f"{latest[0][0]} ({latest[0][1]}) still ran, for {both:.3f}s"))
            if latest is None or end > latest[1]:
                latest = (key, end)
    return found


def _finished(rtype_kind: str, obj: dict[str, Any]) -> bool:
    """A Job with a Complete/Failed condition, or a pod in a terminal phase: it holds nothing any more."""
    status = obj.get("status") or {}
    if rtype_kind == "Pod":
        return status.get("phase") in TERMINAL_PHASES
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in status.get("conditions") or [])


def leftovers(store: Store, ended: set[str]) -> tuple[list[str], list[str]]:
    """``kind namespace/name`` of the Jobs and pods of jobs in ``ended``: the orphans (still active: a Job
    not finished, a pod not in a terminal phase) and the finished ones kept as a record."""
    active: list[str] = []
    finished: list[str] = []
    for rtype in (JOBS, PODS):
        items, _ = store.list(rtype)
        for obj in items:
            meta = obj.get("metadata") or {}
            if (meta.get("labels") or {}).get(JOB_ID) in ended:
                name = f"{rtype.kind} {meta.get('namespace')}/{meta.get('name')}"
                (finished if _finished(rtype.kind, obj) else active).append(name)
    return active, finished
