"""The seeded workload: single jobs, gangs, elastic jobs and failing jobs at three priorities, some cancelled."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from services.chaos.plan import GPU_TYPE, TENANTS, ChaosPlan
from services.kubesim.kubelet import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION

KINDS = ("single", "gang", "elastic", "failing")
KIND_WEIGHTS = (40, 25, 20, 15)
PRIORITIES = ("low", "normal", "high")
PRIORITY_WEIGHTS = (40, 40, 20)
CANCEL_SHARE = 0.15
MAX_JOB_GPUS = 16  # a queue's nominal quota: every job can be admitted on its own


@dataclass(frozen=True)
class PlannedJob:
    """One submission: when (seconds into the run), as which tenant, its spec, and when to cancel it."""

    index: int
    at_s: float
    tenant: str
    kind: str
    spec: dict[str, Any]
    cancel_after_s: float | None = None

    @property
    def key(self) -> str:
        """The Idempotency-Key of the submission: retries of it are the same job."""
        return f"chaos-{self.index}"


def _spec(rng: random.Random, index: int, tenant: str, kind: str) -> dict[str, Any]:
    duration = round(rng.uniform(2.0, 10.0), 1)
    annotations = {DURATION_ANNOTATION: f"{duration:g}"}
    replicas, gpus, extra = 1, rng.choice((1, 2, 4, 8)), dict[str, Any]()
    max_restarts = rng.choice((0, 1, 2))
    if kind == "gang":
        replicas = rng.randint(2, 4)
        gpus = rng.choice([g for g in (2, 4, 8) if replicas * g <= MAX_JOB_GPUS])
    elif kind == "elastic":
        replicas, gpus = rng.randint(2, 4), rng.choice((2, 4))
        extra["min_replicas"] = 1
    elif kind == "failing":
        replicas, gpus = rng.randint(1, 2), rng.choice((1, 2, 4))
        annotations[EXIT_CODE_ANNOTATION] = str(rng.choice((1, 137)))
        max_restarts = rng.choice((0, 1))
    return {
        "name": f"chaos-{kind}-{index}",
        "queue": tenant,
        "priority_class": rng.choices(PRIORITIES, PRIORITY_WEIGHTS)[0],
        "replicas": replicas,
        "template": {"image": "registry.example/chaos:1", "command": ["train"],
                     "resources": {"gpus": gpus, "gpu_type": GPU_TYPE, "cpu": "1", "memory": "1Gi"}},
        "runtime_estimate_s": duration,
        "max_restarts": max_restarts,
        "checkpoint": {"enabled": False, "grace_period_s": rng.randint(0, 3)},
        "annotations": annotations,
        **extra,
    }


def plan_workload(plan: ChaosPlan, rng: random.Random) -> list[PlannedJob]:
    """``plan.jobs`` submissions spread over the run's window, in submission order. Every kind of job and
    at least one cancel appear whenever there are enough jobs; the rest are drawn by weight."""
    count = plan.jobs
    kinds = list(KINDS[:count]) + rng.choices(KINDS, KIND_WEIGHTS, k=max(0, count - len(KINDS)))
    rng.shuffle(kinds)
    cancels = [True] + [rng.random() < CANCEL_SHARE for _ in range(count - 1)]
    rng.shuffle(cancels)
    times = sorted(rng.uniform(0.0, plan.duration_s * 0.9) for _ in range(count))
    jobs: list[PlannedJob] = []
    for index, (at, kind, cancel) in enumerate(zip(times, kinds, cancels, strict=True)):
        tenant = rng.choice(TENANTS)
        cancel_after = round(rng.uniform(0.2, 8.0), 2) if cancel else None
        jobs.append(PlannedJob(index, round(at, 3), tenant, kind, _spec(rng, index, tenant, kind), cancel_after))
    return jobs
