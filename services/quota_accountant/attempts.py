"""One attempt of a job as the ledger sees it: admission, scale changes, start and end.

Every fact is set once (the first end wins, the earliest start wins, a scale change is keyed by its
time), so a repeated or reordered input leaves the record as it was: the basis of idempotence.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Literal

from schemas.config import gpu_resource

Outcome = Literal["succeeded", "failed", "preempted", "cancelled", "evicted"]
AttemptKey = tuple[str, int]


@dataclass(frozen=True)
class Admission:
    """What the admission decision says about an attempt's resources."""

    queue: str
    tenant: str
    gpu_type: str
    #: GPUs each pod is charged: whole GPUs, or its share of one for a fractional or MIG job
    gpus_per_pod: float
    replicas: int
    admitted_at: float
    #: GPUs of a job's companion roles (a Ray head, a second worker group): charged whatever its size
    fixed_gpus: float = 0.0
    #: a job of several roles: the main role's name and each companion role's (name, GPUs), which make up
    #: ``fixed_gpus``; empty for a job of one role
    main_role: str = ""
    companions: tuple[tuple[str, float], ...] = ()

    @property
    def resource(self) -> str:
        return gpu_resource(self.gpu_type)


@dataclass(frozen=True)
class Segment:
    """``rate`` GPUs held over ``[start, end]`` (seconds)."""

    start: float
    end: float
    rate: float

    @property
    def gpu_seconds(self) -> float:
        return self.rate * max(self.end - self.start, 0.0)


@dataclass
class Attempt:
    job_id: str
    attempt: int
    admission: Admission | None = None
    scales: dict[float, int] = field(default_factory=dict)  # time -> replicas
    started_at: float | None = None
    ended_at: float | None = None
    outcome: Outcome | None = None

    @property
    def key(self) -> AttemptKey:
        return (self.job_id, self.attempt)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def holds_quota(self) -> bool:
        """Admitted and not yet ended: its GPUs count against the queue's quota."""
        return self.admission is not None and self.ended_at is None

    @property
    def accruing(self) -> bool:
        """Admitted, started and not ended: GPU time accrues."""
        return self.holds_quota and self.started_at is not None

    def gpus_at(self, t: float) -> float:
        """GPUs held at ``t``, after every scale change at or before ``t``."""
        admission = self.admission
        if admission is None:
            return 0
        replicas = admission.replicas
        for when in sorted(self.scales):
            if when > t:
                break
            replicas = self.scales[when]
        return replicas * admission.gpus_per_pod + admission.fixed_gpus

    def current_gpus(self) -> float:
        return self.gpus_at(math.inf)

    def segments(self, until: float) -> list[Segment]:
        """Constant-allocation pieces of ``[started_at, min(ended_at, until)]``."""
        if self.admission is None or self.started_at is None:
            return []
        end = until if self.ended_at is None else min(self.ended_at, until)
        if end <= self.started_at:
            return []
        cuts = [self.started_at, *sorted(t for t in self.scales if self.started_at < t < end), end]
        return [Segment(a, b, self.gpus_at(a)) for a, b in itertools.pairwise(cuts) if b > a]

    def gpu_seconds(self, until: float = math.inf) -> float:
        return sum(s.gpu_seconds for s in self.segments(until))

    def peak_gpus(self) -> float:
        """Most GPUs held at once while the attempt ran (a whole number unless the job shares GPUs)."""
        segments = self.segments(math.inf)
        peak = max((s.rate for s in segments), default=self.gpus_at(self.started_at or 0.0))
        return round(peak) if abs(peak - round(peak)) < 1e-9 else peak


@dataclass(frozen=True)
class Charge:
    """A settled attempt's GPU time: becomes one ``ChargebackRecorded``."""

    job_id: str
    attempt: int
    tenant: str
    queue: str
    gpu_type: str
    gpus: float
    started_at: float
    ended_at: float
    gpu_seconds: float
    outcome: Outcome
    #: a job of several roles: GPU-seconds per role (the companions held theirs the whole run, the main role
    #: the rest); empty for a job of one role
    roles: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> AttemptKey:
        return (self.job_id, self.attempt)

    def segments(self) -> list[Segment]:
        """The charge as one constant-rate piece (the average rate when the attempt was scaled)."""
        duration = self.ended_at - self.started_at
        if duration <= 0 or self.gpu_seconds <= 0:
            return []
        return [Segment(self.started_at, self.ended_at, self.gpu_seconds / duration)]
