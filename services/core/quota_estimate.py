"""When quota frees up for a job blocked by its queue's or its cohort's quota.

Running jobs in the same scope (the queue for ``queue_quota_exhausted`` and
``non_preemptible_over_nominal``, every queue under the same root cohort for ``cohort_quota_exhausted``
and ``nominal_quota_lent``) end by their runtime estimates; the job can start once enough of them have
ended for its request to pass the quota check (for a non-preemptible job over nominal: once its own
queue has nominal room for it; quota others borrowed from that room is reclaimed by preemption).
Jobs ahead of it in line are not modelled here (the capacity estimate accounts for them), so the
later of the two estimates is used.

Per (scope, queue) the releases are walked at most once per cycle, lazily, keeping after each one
the queue's allocation and its root pool's usage; a request binary-searches the snapshots already
taken (the check is monotone: releasing more never makes it fail) and extends the walk only when
none of them passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from .model import Amount, Job, PendingReason, RunningJob
from .quota import QuotaBook, job_request
from .state import SchedulerState

MAX_RELEASES = 512  # bound the walk; beyond it the estimate is unknown

Snapshot = tuple[float, dict[str, Amount], dict[str, Amount]]  # (time, queue allocation, root pool usage)


def _end(rj: RunningJob, now: float, default_estimate: float) -> float:
    if rj.terminating:
        return now + rj.job.grace_period_s
    est = rj.job.runtime_estimate
    return max(now, rj.start_time + (default_estimate if est is None else est))


class _Walker:
    """Releases of one scope applied one by one to a scratch book, for one queue's point of view."""

    __slots__ = ("book", "ends", "next", "queue", "root", "snapshots", "source", "st")

    def __init__(self, st: SchedulerState, book: QuotaBook, queue: str, ends: list[tuple[float, str]]) -> None:
        self.st = st
        self.source = book
        self.book = book.scratch_for(queue)
        self.queue = queue
        self.root = book.root_of.get(queue)
        self.ends = ends
        self.next = 0
        self.snapshots: list[Snapshot] = []

    def extend(self) -> bool:
        """Apply the next release; False when there is none left."""
        while self.next < len(self.ends):
            end, job_id = self.ends[self.next]
            self.next += 1
            rj = self.st.running.get(job_id)
            run_type = self.st.run_type.get(job_id)
            if rj is None or run_type is None:
                continue
            self.book.adopt(self.source, rj.job.queue)
            self.book.add(rj.job.queue, job_request(rj.job, run_type, rj.replicas), rj.job.user, -1)
            pool: Mapping[str, Amount] = self.book.pool_used.get(self.root, {}) if self.root is not None else {}
            self.snapshots.append((end, dict(self.book.alloc.get(self.queue, {})), dict(pool)))
            return True
        return False


#: whose quota a waiting job waits for: its queue's, or its cohort tree's (named by the root)
QuotaScope = tuple[Literal["queue", "cohort"], str]


class QuotaReleases:
    """Per-cycle cache of quota snapshots as running jobs end, per (scope, queue)."""

    def __init__(self, state: SchedulerState, book: QuotaBook, now: float, default_estimate: float) -> None:
        self._st = state
        self._book = book
        self._now = now
        self._default = default_estimate
        self._ends: dict[QuotaScope, list[tuple[float, str]]] = {}
        self._walkers: dict[tuple[QuotaScope, str], _Walker] = {}
        self._answers: dict[tuple[object, ...], float | None] = {}

    def _scope(self, job: Job, reason: PendingReason) -> QuotaScope | None:
        if reason in (PendingReason.QUEUE_QUOTA, PendingReason.NON_PREEMPTIBLE_QUOTA):
            return ("queue", job.queue)
        root = self._book.root_of.get(job.queue)
        return None if root is None else ("cohort", root)

    def _sorted_ends(self, scope: QuotaScope) -> list[tuple[float, str]]:
        ends = self._ends.get(scope)
        if ends is None:
            kind, name = scope
            members = {name} if kind == "queue" else {q for q, r in self._book.root_of.items() if r == name}
            running = self._st.running
            ends = sorted(
                (_end(running[job_id], self._now, self._default), job_id)
                for queue in sorted(members)
                for job_id in self._st.running_by_queue.get(queue, {})
                if job_id in running
            )[:MAX_RELEASES]
            self._ends[scope] = ends
        return ends

    def start_time(self, job: Job, reason: PendingReason, gpu_types: list[str]) -> float | None:
        """Earliest estimated time the job's request passes the quota check; None when unknown."""
        scope = self._scope(job, reason)
        if scope is None:
            return None
        key = (scope, job.queue)
        walker = self._walkers.get(key)
        if walker is None:
            walker = self._walkers[key] = _Walker(self._st, self._book, job.queue, self._sorted_ends(scope))
        pods = max(job.min_size, 1)
        mode = "nominal" if reason is PendingReason.NON_PREEMPTIBLE_QUOTA else "borrow" if job.preemptible else "own"
        best: float | None = None
        for gpu_type in gpu_types:
            req = job_request(job, gpu_type, pods)
            answer_key = (scope, job.queue, mode, tuple(sorted(req.items())))
            if answer_key not in self._answers:
                self._answers[answer_key] = self._first_passing(walker, job.queue, req, mode)
            found = self._answers[answer_key]
            if found is not None and (best is None or found < best):
                best = found
        return best

    def _first_passing(self, walker: _Walker, queue: str, req: Mapping[str, Amount], mode: str) -> float | None:
        """``mode``: "borrow" (the full check), "own" (the full check, no borrowing) or "nominal" (only
        the queue's nominal room, for a non-preemptible job over nominal)."""

        def passes(i: int) -> bool:
            _, alloc, pool = walker.snapshots[i]
            if mode == "nominal":
                return self._book.within_nominal(queue, req, alloc=alloc)
            return self._book.check(queue, req, alloc=alloc, pool_used=pool, may_borrow=mode == "borrow")[0] is None

        snaps = walker.snapshots
        if not snaps or not passes(len(snaps) - 1):
            while walker.extend():  # walk further only as far as this request needs
                if passes(len(snaps) - 1):
                    return snaps[-1][0]
            return None
        lo, hi = 0, len(snaps) - 1  # the last snapshot passes: binary search the first that does
        while lo < hi:
            mid = (lo + hi) // 2
            if passes(mid):
                hi = mid
            else:
                lo = mid + 1
        return snaps[lo][0]
