"""The usage ledger: a pure fold of attempt facts into per-queue and per-tenant usage. No I/O, no clock.

State:

- open attempts (admitted, started or ended but not yet settled), keyed by (job id, attempt);
- per queue, the decayed GPU-seconds and the plain GPU-seconds of every settled attempt;
- per tenant, the GPU-seconds of settled attempts in each day / week / month window (UTC);
- the keys of settled attempts (for idempotence) until ``horizon_s`` after they ended.

An attempt settles once it is admitted, started and ended: its GPU time is folded into its queue and
tenant, and a ``Charge`` comes out. An end releases the attempt's quota at once, even before its start
is seen (the start travels on another topic and may come later); the first end seen is the end.
Usage read at time ``t`` adds the running attempts' GPU time up to ``t`` to the settled part, exactly
(piecewise-constant allocations, closed-form decay), whatever order the facts arrived in.
The whole state can be read out (``attempts``, ``settled``, ``book``, ``buckets``) and put back
(``Ledger.load``); how the service keeps it in changelog-backed tables is described in
``services.quota_accountant.accountant``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from services.core.fairshare import interval_value
from services.quota_accountant.attempts import Admission, Attempt, AttemptKey, Charge, Outcome, Segment
from services.quota_accountant.burst import BurstLedger
from services.quota_accountant.decay import DecayedTotal
from services.quota_accountant.windows import (
    BUCKET_KEEP_S,
    WINDOW_KINDS,
    WindowKind,
    split_by_window,
    window_end,
    window_start,
)

DEFAULT_HALF_LIFE_S = 7 * 24 * 3600.0
DEFAULT_HORIZON_S = 8 * 24 * 3600.0  # longer than the input topics' retention (7 days)


@dataclass(frozen=True)
class Effect:
    """What one fact changed: the queues and tenants whose reports are stale, and a charge if it settled."""

    queues: frozenset[str] = frozenset()
    tenants: frozenset[str] = frozenset()
    charge: Charge | None = None
    burst: frozenset[str] = frozenset()  # queues whose burst spend changed

    @property
    def changed(self) -> bool:
        return bool(self.queues or self.tenants or self.charge or self.burst)


NO_EFFECT = Effect()


@dataclass(frozen=True)
class QueueUsage:
    as_of: float
    allocated: dict[str, float]  # resource (gpu:<type>) -> GPUs held (or shares of them) by unfinished attempts
    decayed_gpu_seconds: float
    gpu_seconds: float  # undecayed, since the ledger's history begins
    accruing: int  # attempts of the queue currently accruing GPU time


@dataclass
class _QueueBook:
    decayed: DecayedTotal
    gpu_seconds: float = 0.0


@dataclass(frozen=True)
class Book:
    """A queue's settled history: decayed GPU-seconds (``decayed`` as of ``as_of``) and plain GPU-seconds."""

    decayed: float
    as_of: float
    gpu_seconds: float


Buckets = Mapping[tuple[WindowKind, float], float]
"""A tenant's settled GPU-seconds per (window kind, window start)."""


@dataclass
class Ledger:
    half_life_s: float = DEFAULT_HALF_LIFE_S
    horizon_s: float = DEFAULT_HORIZON_S
    attempts: dict[AttemptKey, Attempt] = field(default_factory=dict)
    settled: dict[AttemptKey, float] = field(default_factory=dict)  # key -> end time (or settle time)
    _queues: dict[str, _QueueBook] = field(default_factory=dict)
    _windows: dict[str, dict[tuple[WindowKind, float], float]] = field(default_factory=dict)
    burst: BurstLedger = field(init=False)

    def __post_init__(self) -> None:
        if self.half_life_s <= 0:
            raise ValueError("half_life_s must be positive")
        self.burst = BurstLedger(self.horizon_s)

    # ------------------------------------------------------------------ facts

    def admit(self, job_id: str, attempt: int, admission: Admission) -> Effect:
        record = self._open(job_id, attempt)
        if record is None or record.admission is not None:
            return NO_EFFECT
        record.admission = admission
        return self._after(record)

    def scale(self, job_id: str, attempt: int, replicas: int, at: float) -> Effect:
        record = self._open(job_id, attempt)
        if record is None or record.ended or record.scales.get(at) == replicas:
            return NO_EFFECT
        record.scales[at] = replicas
        return self._after(record)

    def start(self, job_id: str, attempt: int, at: float) -> Effect:
        record = self._open(job_id, attempt)
        if record is None or (record.started_at is not None and record.started_at <= at):
            return NO_EFFECT
        record.started_at = at
        return self._after(record)

    def end(self, job_id: str, attempt: int, at: float, outcome: Outcome) -> Effect:
        record = self._open(job_id, attempt)
        if record is None or record.ended:
            return NO_EFFECT
        record.ended_at = at
        record.outcome = outcome
        return self._after(record)

    def exempt(self, job_id: str, attempt: int, at: float) -> Effect:
        """An attempt that is not the queue's to pay (it runs on nodes bought for it): its facts are ignored, as a
        settled attempt's are (an open record of facts that came first is dropped; they charged nothing yet,
        having no admission)."""
        key = (job_id, attempt)
        if key in self.settled:
            return NO_EFFECT
        self.attempts.pop(key, None)
        self.settled[key] = at
        return NO_EFFECT

    def restore(self, charge: Charge) -> Effect:
        """Fold a charge recorded before (read back from the usage topic); a settled key is ignored."""
        if charge.key in self.settled:
            return NO_EFFECT
        self.attempts.pop(charge.key, None)
        self._fold(charge.queue, charge.tenant, charge.segments())
        self.settled[charge.key] = charge.ended_at
        return Effect(frozenset({charge.queue}), frozenset({charge.tenant}))

    # ------------------------------------------------------------------ whole state

    @classmethod
    def load(
        cls,
        half_life_s: float,
        horizon_s: float,
        *,
        attempts: Iterable[Attempt] = (),
        settled: Mapping[AttemptKey, float] | None = None,
        books: Mapping[str, Book] | None = None,
        buckets: Mapping[str, Buckets] | None = None,
        burst: BurstLedger | None = None,
    ) -> Ledger:
        """A ledger holding exactly the state read out of another one (see ``book`` and ``buckets``)."""
        ledger = cls(half_life_s, horizon_s)
        ledger.attempts = {a.key: a for a in attempts}
        ledger.settled = dict(settled or {})
        for queue, book in (books or {}).items():
            ledger._queues[queue] = _QueueBook(DecayedTotal(half_life_s, book.decayed, book.as_of), book.gpu_seconds)
        ledger._windows = {tenant: dict(b) for tenant, b in (buckets or {}).items() if b}
        if burst is not None:
            ledger.burst = burst
        return ledger

    def book(self, queue: str) -> Book | None:
        """The queue's settled history, None before its first settled attempt."""
        book = self._queues.get(queue)
        if book is None:
            return None
        return Book(book.decayed.value, book.decayed.as_of, book.gpu_seconds)

    def buckets(self, tenant: str) -> dict[tuple[WindowKind, float], float]:
        """The tenant's settled GPU-seconds per window (a copy; empty when none is kept)."""
        return dict(self._windows.get(tenant, {}))

    def booked_queues(self) -> set[str]:
        return set(self._queues)

    def allocation(self, queue: str) -> dict[str, float]:
        """GPUs held per ``gpu:<type>`` by the queue's admitted, unfinished attempts."""
        allocated: dict[str, float] = {}
        for record in self.attempts.values():
            admission = record.admission
            if admission is not None and admission.queue == queue and record.holds_quota:
                allocated[admission.resource] = allocated.get(admission.resource, 0) + record.current_gpus()
        return allocated

    # ------------------------------------------------------------------ reads

    def queue_names(self) -> set[str]:
        names = set(self._queues)
        names.update(a.admission.queue for a in self.attempts.values() if a.admission is not None)
        return names

    def tenant_names(self) -> set[str]:
        names = set(self._windows)
        names.update(a.admission.tenant for a in self.attempts.values() if a.admission is not None)
        return names

    @property
    def active_accruals(self) -> int:
        return sum(1 for a in self.attempts.values() if a.accruing)

    def queue_usage(self, queue: str, now: float) -> QueueUsage:
        """Allocation and GPU time of ``queue`` as of ``now`` (or as of its latest settled end, if later)."""
        book = self._queues.get(queue)
        at = max(now, book.decayed.as_of) if book is not None else now
        decayed = book.decayed.value_at(at) if book is not None else 0.0
        plain = book.gpu_seconds if book is not None else 0.0
        allocated: dict[str, float] = defaultdict(int)
        accruing = 0
        for record in self.attempts.values():
            admission = record.admission
            if admission is None or admission.queue != queue or not record.holds_quota:
                continue
            allocated[admission.resource] += record.current_gpus()
            if record.accruing:
                accruing += 1
            for seg in record.segments(at):
                decayed += interval_value(seg.rate, seg.start, seg.end, at, self.half_life_s)
                plain += seg.gpu_seconds
        return QueueUsage(at, dict(allocated), decayed, plain, accruing)

    def window_usage(self, tenant: str, kind: WindowKind, now: float) -> tuple[float, float]:
        """(window start, GPU-seconds the tenant used in the ``kind`` window holding ``now``, up to ``now``)."""
        start = window_start(kind, now)
        used = self._windows.get(tenant, {}).get((kind, start), 0.0)
        for record in self.attempts.values():
            admission = record.admission
            if admission is None or admission.tenant != tenant or record.ended:
                continue
            for seg in record.segments(now):
                used += seg.rate * max(0.0, seg.end - max(seg.start, start))
        return start, used

    # ------------------------------------------------------------------ upkeep

    def prune(self, now: float) -> None:
        """Forget settled keys, unmatched facts and window buckets older than the horizon (and what the burst
        ledger no longer needs)."""
        self.burst.prune(now)
        cutoff = now - self.horizon_s
        self.settled = {k: t for k, t in self.settled.items() if t >= cutoff}
        for key, record in list(self.attempts.items()):
            last = max((t for t in (record.started_at, record.ended_at) if t is not None), default=math.inf)
            unmatched = record.admission is None or (record.ended and record.started_at is None)
            if unmatched and last < cutoff:
                del self.attempts[key]
        for tenant, buckets in list(self._windows.items()):
            kept = {b: v for b, v in buckets.items() if window_end(b[0], b[1]) >= now - BUCKET_KEEP_S}
            if kept:
                self._windows[tenant] = kept
            else:
                del self._windows[tenant]

    # ------------------------------------------------------------------ internals

    def _open(self, job_id: str, attempt: int) -> Attempt | None:
        key = (job_id, attempt)
        if key in self.settled:
            return None
        record = self.attempts.get(key)
        if record is None:
            record = self.attempts[key] = Attempt(job_id, attempt)
        return record

    def _after(self, record: Attempt) -> Effect:
        admission = record.admission
        if admission is None:
            return NO_EFFECT  # nothing attributable yet
        queues, tenants = frozenset({admission.queue}), frozenset({admission.tenant})
        if record.ended_at is None or record.outcome is None:
            return Effect(queues, tenants)
        if record.started_at is None:
            # ended with no start seen: quota is released, but the start may still come from another
            # topic, so the attempt stays open (``prune`` drops it after the horizon, uncharged)
            return Effect(queues, tenants)
        del self.attempts[record.key]
        self.settled[record.key] = record.ended_at
        segments = record.segments(record.ended_at)
        self._fold(admission.queue, admission.tenant, segments)
        ended_at = max(record.ended_at, record.started_at)
        gpu_seconds = sum(s.gpu_seconds for s in segments)
        charge = Charge(
            job_id=record.job_id,
            attempt=record.attempt,
            tenant=admission.tenant,
            queue=admission.queue,
            gpu_type=admission.gpu_type,
            gpus=record.peak_gpus(),
            started_at=record.started_at,
            ended_at=ended_at,
            gpu_seconds=gpu_seconds,
            outcome=record.outcome,
            roles=role_split(admission, gpu_seconds, ended_at - record.started_at),
        )
        return Effect(queues, tenants, charge)

    def _fold(self, queue: str, tenant: str, segments: list[Segment]) -> None:
        book = self._queues.get(queue)
        if book is None:
            book = self._queues[queue] = _QueueBook(DecayedTotal(self.half_life_s))
        buckets = self._windows.setdefault(tenant, {})
        for seg in segments:
            book.decayed.add_interval(seg.rate, seg.start, seg.end)
            book.gpu_seconds += seg.gpu_seconds
            for kind in WINDOW_KINDS:
                for start, seconds in split_by_window(kind, seg.start, seg.end):
                    buckets[(kind, start)] = buckets.get((kind, start), 0.0) + seg.rate * seconds


def role_split(admission: Admission, gpu_seconds: float, ran_s: float) -> dict[str, float]:
    """GPU-seconds per role of a job of several roles: each companion held its GPUs for the whole run, the
    main role (the one that may grow and shrink) the rest. Empty for a job of one role."""
    if not admission.companions:
        return {}
    out = {name: gpus * max(ran_s, 0.0) for name, gpus in admission.companions}
    out[admission.main_role] = max(gpu_seconds - sum(out.values()), 0.0)
    return out
