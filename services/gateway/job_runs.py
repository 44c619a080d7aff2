"""What happened to each job on its cluster, as ``muster.dispatches`` and ``muster.runs`` reported it: the
Kubernetes objects of every attempt (the Job's namespace and names, its pods and their nodes) and the
dispatcher's and node-state watcher's events. Pure: folds envelopes, no I/O.

The gateway reads both topics from their beginning (they keep a week by default), so a job's objects and
events survive a gateway restart for as long as the topics keep them. Memory is bounded: at most
``EVENTS_PER_JOB`` events and ``ATTEMPTS_PER_JOB`` attempts per job, at most ``MAX_JOBS`` jobs (the least
recently reported forgotten first), and a job is forgotten when its status is deleted.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from datetime import datetime

from schemas.api import AttemptObjects, JobEvent, JobEvents, PodView
from schemas.decisions import PlacementPlan
from schemas.envelope import Envelope
from schemas.jobs import JobRecorded
from schemas.runs import (
    DispatchFailed,
    JobDispatched,
    JobStopped,
    PodBound,
    RunAllPodsReady,
    RunDeleted,
    RunEvicted,
    RunFailed,
    RunStarted,
    RunSucceeded,
)
from services.gateway.views import HistoryEntry

EVENTS_PER_JOB = 64
ATTEMPTS_PER_JOB = 16
MAX_JOBS = 200_000
#: Job names remembered per attempt (a restart or rescale creates another)
NAMES_PER_ATTEMPT = 16


@dataclass
class _Attempt:
    cluster: str = ""
    namespace: str | None = None
    names: list[str] = field(default_factory=list)
    dispatched_at: datetime | None = None
    placement: PlacementPlan | None = None
    pods: list[PodBound] = field(default_factory=list)
    pods_of: str | None = None  # the Job the observed pods belong to

    def name(self, object_name: str) -> None:
        if object_name not in self.names:
            self.names.append(object_name)
            del self.names[:-NAMES_PER_ATTEMPT]


@dataclass
class _Job:
    attempts: dict[int, _Attempt] = field(default_factory=dict)
    events: deque[JobEvent] = field(default_factory=lambda: deque(maxlen=EVENTS_PER_JOB))

    def attempt(self, number: int) -> _Attempt:
        found = self.attempts.get(number)
        if found is None:
            found = self.attempts[number] = _Attempt()
            while len(self.attempts) > ATTEMPTS_PER_JOB:
                del self.attempts[min(self.attempts)]
        return found


class RunLog:
    """Per job: its attempts' Kubernetes objects and the run and dispatch events reported about it."""

    def __init__(self, max_jobs: int = MAX_JOBS) -> None:
        self._jobs: OrderedDict[str, _Job] = OrderedDict()
        self._max_jobs = max_jobs

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def forget(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)

    def _job(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            job = self._jobs[job_id] = _Job()
            while len(self._jobs) > self._max_jobs:
                self._jobs.popitem(last=False)
        else:
            self._jobs.move_to_end(job_id)
        return job

    def apply_record(self, envelope: Envelope | None) -> None:
        """Remember the placement the queue manager chose for the record's attempt (``muster.jobs``)."""
        payload = envelope.payload if envelope is not None else None
        if not isinstance(payload, JobRecorded) or payload.record.placement is None:
            return
        placement, number = payload.record.placement, payload.record.attempt
        attempt = self._job(payload.job_id).attempt(number)
        attempt.placement = placement
        attempt.cluster = attempt.cluster or placement.cluster

    def apply(self, envelope: Envelope | None) -> str | None:
        """Fold one ``muster.dispatches`` or ``muster.runs`` message; the job id it concerns, or None."""
        message = envelope.payload if envelope is not None else None
        event = _event(message)
        if event is None or not isinstance(message, _REPORTS):
            return None
        job = self._job(message.job_id)
        attempt = job.attempt(message.attempt)
        attempt.cluster = message.cluster
        if isinstance(message, JobDispatched):
            attempt.namespace = message.namespace
            attempt.name(message.object_name)
            if attempt.pods and attempt.pods_of != message.object_name:
                attempt.pods, attempt.pods_of = [], None  # a restart's new Job: those pods are gone
            attempt.dispatched_at = attempt.dispatched_at or message.observed_at
        elif isinstance(message, RunAllPodsReady) and message.pods:
            attempt.pods = list(message.pods)
            attempt.pods_of = message.object_name
            if message.object_name:
                attempt.name(message.object_name)
        job.events.append(event)
        return message.job_id

    def events(self, job_id: str, history: list[HistoryEntry], gpus_per_pod: int) -> JobEvents:
        """The job's objects per attempt (newest first) and its events (oldest first), Muster's own state
        changes (``history``) merged in."""
        job = self._jobs.get(job_id) or _Job()
        states = [JobEvent(at=h.at, attempt=h.attempt, source="queue_manager", kind="state", state=h.state,
                           reason=h.reason, message=h.message,
                           warning=h.state in ("failed", "rejected"))
                  for h in history]
        events = sorted([*states, *job.events], key=lambda e: e.at)
        attempts = [_objects(n, a, gpus_per_pod) for n, a in sorted(job.attempts.items(), reverse=True)]
        return JobEvents(job_id=job_id, attempts=attempts, events=events)


_REPORTS = (JobDispatched, DispatchFailed, JobStopped, RunStarted, RunAllPodsReady, RunSucceeded, RunFailed,
            RunEvicted, RunDeleted)


def _objects(number: int, attempt: _Attempt, gpus_per_pod: int) -> AttemptObjects:
    planned: list[tuple[str, int | None]] = []
    if attempt.placement is not None:
        for node in attempt.placement.nodes:
            groups = node.nvlink_groups
            planned += [(node.node, groups[i] if i < len(groups) and groups[i] >= 0 else None)
                        for i in range(node.pods)]
    pods: list[PodView]
    if attempt.pods:
        pods = [PodView(index=p.index, name=p.name, node=p.node, gpus=gpus_per_pod,
                        nvlink_group=planned[p.index][1] if p.index < len(planned) and planned[p.index][0] == p.node
                        else None) for p in attempt.pods]
    else:
        pods = [PodView(index=i, name=None, node=node, gpus=gpus_per_pod, nvlink_group=group)
                for i, (node, group) in enumerate(planned)]
    source = ("observed" if attempt.pods else "planned") if pods else None
    return AttemptObjects(attempt=number, cluster=attempt.cluster, namespace=attempt.namespace,
                          job_name=attempt.names[-1] if attempt.names else None, job_names=list(attempt.names),
                          dispatched_at=attempt.dispatched_at, pods=pods, pods_source=source)


def _event(message: object) -> JobEvent | None:
    """The timeline entry of one dispatch or run report."""
    if not isinstance(message, _REPORTS):
        return None
    base = {"at": message.observed_at, "attempt": message.attempt, "cluster": message.cluster}
    if isinstance(message, JobDispatched):
        return JobEvent(**base, source="dispatcher", kind="dispatched", reason="Created",
                        message=f"created Job {message.namespace}/{message.object_name}",
                        object_name=message.object_name)
    if isinstance(message, DispatchFailed):
        retry = "; the dispatcher retries" if message.retryable else ""
        return JobEvent(**base, source="dispatcher", kind="dispatch_failed", reason=message.reason,
                        message=message.message + retry, warning=True)
    if isinstance(message, JobStopped):
        what = "requeued" if message.requeue else "not requeued"
        saved = ", checkpointed" if message.checkpointed else ""
        return JobEvent(**base, source="dispatcher", kind="stopped", reason=message.reason,
                        message=f"stopped ({what}{saved})")
    if isinstance(message, RunStarted):
        return JobEvent(**base, source="node_watcher", kind="started", reason="Started",
                        message=f"{message.pods_running} of {message.pods_total} pods running")
    if isinstance(message, RunAllPodsReady):
        return JobEvent(**base, source="node_watcher", kind="pods_ready", reason="AllPodsReady",
                        message=f"all {message.pods_total} pods ready", object_name=message.object_name,
                        nodes=sorted({p.node for p in message.pods}))
    if isinstance(message, RunSucceeded):
        return JobEvent(**base, source="node_watcher", kind="succeeded", reason="Completed",
                        message="the Job completed")
    if isinstance(message, RunFailed):
        return JobEvent(**base, source="node_watcher", kind="failed", reason=message.reason, message=message.message,
                        pod=message.pod, nodes=list(message.nodes), exit_code=message.exit_code,
                        classification=message.classification, warning=True)
    if isinstance(message, RunEvicted):
        return JobEvent(**base, source="node_watcher", kind="evicted", reason=message.reason,
                        message=f"evicted from {message.node}" if message.node else "evicted",
                        nodes=[message.node] if message.node else [], classification="infrastructure", warning=True)
    return JobEvent(**base, source="node_watcher", kind="deleted", reason="Deleted",
                    message=f"the Job's objects were deleted ({'by Muster' if message.by == 'muster' else message.by})",
                    warning=message.by == "external")
