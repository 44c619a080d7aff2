"""When quota frees up for a job blocked by its queue's or its cohort's quota.

Running jobs in the same scope (the queue for ``queue_quota_exhausted``, every queue under the same
root cohort for ``cohort_quota_exhausted``) end by their runtime estimates; the job can start once
enough of them have ended for its request to pass the quota check. Jobs ahead of it in line are not
modelled here (the capacity estimate accounts for them), so the later of the two estimates is used.
"""

from __future__ import annotations

from .model import Job, PendingReason, RunningJob
from .quota import QuotaBook, job_request
from .state import SchedulerState

MAX_RELEASES = 512  # bound the walk; beyond it the estimate is unknown


def _end(rj: RunningJob, now: float, default_estimate: float) -> float:
    if rj.terminating:
        return now + rj.job.grace_period_s
    est = rj.job.runtime_estimate
    return max(now, rj.start_time + (default_estimate if est is None else est))


class QuotaReleases:
    """Per-cycle cache of running jobs by estimated end, per scope (queue or root cohort)."""

    def __init__(self, state: SchedulerState, book: QuotaBook, now: float, default_estimate: float) -> None:
        self._st = state
        self._book = book
        self._now = now
        self._default = default_estimate
        self._ends: dict[str, list[tuple[float, str]]] = {}
        self._answers: dict[tuple[object, ...], float | None] = {}

    def _scope(self, job: Job, reason: PendingReason) -> str | None:
        if reason is PendingReason.QUEUE_QUOTA:
            return "queue:" + job.queue
        root = self._book.root_of.get(job.queue)
        return None if root is None else "cohort:" + root

    def _sorted_ends(self, scope: str) -> list[tuple[float, str]]:
        ends = self._ends.get(scope)
        if ends is None:
            kind, name = scope.split(":", 1)
            members = (
                {name} if kind == "queue" else {q for q, r in self._book.root_of.items() if r == name}
            )
            ends = sorted(
                (_end(rj, self._now, self._default), job_id)
                for job_id, rj in self._st.running.items()
                if rj.job.queue in members
            )
            self._ends[scope] = ends
        return ends

    def start_time(self, job: Job, reason: PendingReason, gpu_types: list[str]) -> float | None:
        """Earliest estimated time the job's request passes the quota check; None when unknown."""
        scope = self._scope(job, reason)
        if scope is None:
            return None
        pods = max(job.min_size, 1)
        requests = [job_request(job, t, pods) for t in gpu_types]
        key = (scope, job.queue, tuple(tuple(sorted(r.items())) for r in requests))
        if key not in self._answers:
            self._answers[key] = self._walk(job.queue, scope, requests)
        return self._answers[key]

    def _walk(self, queue: str, scope: str, requests: list[dict[str, int]]) -> float | None:
        book = self._book.clone()
        for end, job_id in self._sorted_ends(scope)[:MAX_RELEASES]:
            rj = self._st.running.get(job_id)
            run_type = self._st.run_type.get(job_id)
            if rj is None or run_type is None:
                continue
            book.add(rj.job.queue, job_request(rj.job, run_type, rj.replicas), rj.job.user, -1)
            if any(book.check(queue, req)[0] is None for req in requests):
                return end
        return None
