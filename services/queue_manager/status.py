"""Per-job status for ``muster.status``: built from a job's entry, published only when it changed."""

from __future__ import annotations

from collections.abc import Iterable

from schemas.envelope import MAX_REASON, MAX_TEXT
from schemas.status import ActionOutcome, JobStatusChanged, role_statuses
from services.core import PendingInfo
from services.queue_manager.entries import JobEntry, utc

#: Estimated starts are compared at this granularity so drifting estimates do not republish every cycle.
ESTIMATE_GRANULARITY_S = 60.0
#: A waiting job whose queue position is published already gets a new position, estimate or wait reason
#: at most this often (changes of state, attempt, size or priority class are published at once). Without
#: it a queue draining fast republishes every waiting job's position every cycle: with 1,000 queues and
#: ``status_depth`` 100 that is up to 100,000 statuses a cycle.
WAITING_REFRESH_S = 5.0
WAITING = frozenset({"pending", "suspended"})


def _queue_info(entry: JobEntry) -> PendingInfo | None:
    """The core's word on a pending job (position, reason, estimate). A suspended job shows why it was
    suspended (by whom, or released for idleness and how to resume it), not the core's bare "suspended"."""
    return entry.info if entry.state == "pending" else None

StatusKey = tuple[object, ...]


def _bucket(ts: float | None) -> int | None:
    return None if ts is None else int(ts // ESTIMATE_GRANULARITY_S)


#: in a ``StatusKey``: the fields a waiting job's refresh never holds back (an answer to a request among
#: them: whoever asked waits for it), and where the position is
_IDENTITY = slice(0, 5)
_POSITION = 5


def _answered(entry: JobEntry) -> str | None:
    return entry.last_action.event_id if entry.last_action is not None else None


def status_key(s: JobStatusChanged) -> StatusKey:
    """What must differ for a status to be worth publishing again (identity fields first, then the detail)."""
    est = None if s.estimated_start is None else s.estimated_start.timestamp()
    answered = s.last_action.event_id if s.last_action is not None else None
    return (s.state, s.attempt, s.replicas, s.priority_class, answered, s.position, s.reason, s.message,
            _bucket(est), s.cluster)


def entry_key(entry: JobEntry) -> StatusKey:
    """``status_key(build_status(entry, now))`` without building the status (most entries a cycle marks
    dirty publish nothing new)."""
    spec = entry.spec
    info = entry.info if entry.state == "pending" else None  # as ``_queue_info``, inline: called per dirty job
    replicas = entry.replicas if entry.holding else spec.main_replicas
    if info is None:
        return (entry.state, entry.attempt, replicas, spec.priority_class, _answered(entry), None,
                entry.reason[:MAX_REASON], entry.message[:MAX_TEXT], None,
                entry.placement.cluster if entry.placement is not None else None)
    est = None if info.estimated_start is None else utc(info.estimated_start).timestamp()
    return (entry.state, entry.attempt, replicas, spec.priority_class, _answered(entry), info.position,
            info.reason.value[:MAX_REASON], info.message[:MAX_TEXT], _bucket(est),
            entry.placement.cluster if entry.placement is not None else None)


def build_status(entry: JobEntry, now: float) -> JobStatusChanged:
    spec = entry.spec
    info = _queue_info(entry)
    replicas = entry.replicas if entry.holding else spec.main_replicas
    res = (spec.template or spec.main_template).resources
    return JobStatusChanged(
        job_id=entry.job_id,
        tenant=entry.submission.tenant,
        queue=spec.queue,
        name=spec.name,
        state=entry.state,
        attempt=entry.attempt,
        priority_class=spec.priority_class,
        replicas=replicas,
        gpus=replicas * res.gpus if spec.template is not None else spec.gpus_for(replicas),
        gpu_share=res.gpu_share(replicas) if res.shares_gpus else None,
        position=info.position if info is not None else None,
        reason=(info.reason.value if info is not None else entry.reason)[:MAX_REASON],
        message=(info.message if info is not None else entry.message)[:MAX_TEXT],
        estimated_start=utc(info.estimated_start) if info is not None and info.estimated_start is not None else None,
        cluster=entry.placement.cluster if entry.placement is not None else None,
        submitted_at=entry.submission.submitted_at,
        updated_at=utc(now),
        roles=role_statuses(spec, replicas) if spec.roles else [],
        last_action=entry.last_action,
    )


class StatusBook:
    """The last status published per job; ``changed`` returns only the statuses worth publishing."""

    def __init__(self, waiting_refresh_s: float = WAITING_REFRESH_S) -> None:
        self.waiting_refresh_s = waiting_refresh_s
        self._published: dict[str, StatusKey] = {}
        self._detail_at: dict[str, float] = {}  # when a waiting job's position was last published
        self._answers: dict[str, ActionOutcome] = {}  # read back after a restart, until the job is rebuilt

    def seed(self, statuses: Iterable[JobStatusChanged]) -> None:
        """Remember statuses already on the topic (read back after a restart), and the answers they carry
        (``answer``: the records of ``muster.jobs`` do not keep them)."""
        for s in statuses:
            self._published[s.job_id] = status_key(s)
            if s.last_action is not None:
                self._answers[s.job_id] = s.last_action

    def answer(self, job_id: str) -> ActionOutcome | None:
        """The answer a status read back at a restart carries for the job (once)."""
        return self._answers.pop(job_id, None)

    def _detail_only(self, entry: JobEntry, now: float) -> bool:
        """Whether the waiting job's published status can differ only in its detail, published recently."""
        last = self._published.get(entry.job_id)
        return (last is not None and entry.state in WAITING and last[_POSITION] is not None
                and last[_IDENTITY] == (entry.state, entry.attempt, entry.spec.main_replicas,
                                        entry.spec.priority_class, _answered(entry))
                and now - self._detail_at.get(entry.job_id, float("-inf")) < self.waiting_refresh_s)

    def changed(self, entries: Iterable[JobEntry], now: float) -> list[JobStatusChanged]:
        out: list[JobStatusChanged] = []
        for entry in entries:
            if self._detail_only(entry, now):
                continue
            key = entry_key(entry)
            last = self._published.get(entry.job_id)
            if last != key:
                self._published[entry.job_id] = key
                out.append(build_status(entry, now))
                if last is not None and last[_IDENTITY] == key[_IDENTITY] and key[_POSITION] is not None:
                    self._detail_at[entry.job_id] = now  # a new position: the next one waits for the refresh
                else:
                    self._detail_at.pop(entry.job_id, None)  # a new state: its first position goes out at once
        return out

    def __len__(self) -> int:
        return len(self._published)
