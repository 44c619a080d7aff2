"""What happened to each job on its cluster, as ``muster.dispatches`` and ``muster.runs`` reported it: the
Kubernetes objects of every attempt (the Job's namespace and names, its pods and their nodes) and the
dispatcher's and node-state watcher's events. Pure: folds envelopes, no I/O.

The gateway reads both topics from their beginning (they keep a week by default), so a job's objects and
events survive a gateway restart for as long as the topics keep them. Memory is bounded: at most
``EVENTS_PER_JOB`` events and ``ATTEMPTS_PER_JOB`` attempts per job, at most ``MAX_JOBS`` jobs (the least
recently reported forgotten first), and a job is forgotten when its status is deleted.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from schemas.api import AttemptObjects, EventKind, EventSource, JobEvent, JobEvents, PodView
from schemas.decisions import PlacementPlan
from schemas.envelope import Envelope
from schemas.jobs import JobRecorded
from schemas.runs import (
    DispatchFailed,
    FailureClass,
    JobDispatched,
    JobStopped,
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


@dataclass(slots=True)
class _Report:
    """One report, compactly (a gateway holds hundreds of thousands); a ``JobEvent`` once asked for."""

    at: datetime
    attempt: int
    cluster: str
    source: EventSource
    kind: EventKind
    reason: str
    message: str
    object_name: str | None = None
    pod: str | None = None
    nodes: tuple[str, ...] = ()
    exit_code: int | None = None
    classification: FailureClass | None = None
    warning: bool = False

    def event(self) -> JobEvent:
        return JobEvent(at=self.at, attempt=self.attempt, source=self.source, kind=self.kind, reason=self.reason,
                        message=self.message, cluster=self.cluster, object_name=self.object_name, pod=self.pod,
                        nodes=list(self.nodes), exit_code=self.exit_code, classification=self.classification,
                        warning=self.warning)


Pod = tuple[int, str, str]  # (completion index, pod name, node)


@dataclass(slots=True)
class _Attempt:
    cluster: str = ""
    namespace: str | None = None
    names: list[str] = field(default_factory=list)
    dispatched_at: datetime | None = None
    placement: PlacementPlan | None = None  # the record's own object, shared with RecordView
    pods: tuple[Pod, ...] = ()
    pods_of: str | None = None  # the Job the observed pods belong to

    def name(self, object_name: str) -> None:
        if object_name not in self.names:
            self.names.append(object_name)
            del self.names[:-NAMES_PER_ATTEMPT]


@dataclass(slots=True)
class _Job:
    attempts: dict[int, _Attempt] = field(default_factory=dict)
    reports: list[_Report] = field(default_factory=list)

    def attempt(self, number: int) -> _Attempt:
        found = self.attempts.get(number)
        if found is None:
            found = self.attempts[number] = _Attempt()
            while len(self.attempts) > ATTEMPTS_PER_JOB:
                del self.attempts[min(self.attempts)]
        return found

    def report(self, report: _Report) -> None:
        self.reports.append(report)
        if len(self.reports) > EVENTS_PER_JOB:
            del self.reports[0]


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
        report = _report(message)
        if report is None or not isinstance(message, _REPORTS):
            return None
        job = self._job(message.job_id)
        attempt = job.attempt(message.attempt)
        attempt.cluster = message.cluster
        if isinstance(message, JobDispatched):
            attempt.namespace = message.namespace
            attempt.name(message.object_name)
            if attempt.pods and attempt.pods_of != message.object_name:
                attempt.pods, attempt.pods_of = (), None  # a restart's new Job: those pods are gone
            attempt.dispatched_at = attempt.dispatched_at or message.observed_at
        elif isinstance(message, RunAllPodsReady) and message.pods:
            attempt.pods = tuple((p.index, p.name, sys.intern(p.node)) for p in message.pods)
            attempt.pods_of = message.object_name
            if message.object_name:
                attempt.name(message.object_name)
        job.report(report)
        return message.job_id

    def events(self, job_id: str, history: list[HistoryEntry], gpus_per_pod: int) -> JobEvents:
        """The job's objects per attempt (newest first) and its events (oldest first), Muster's own state
        changes (``history``) merged in."""
        job = self._jobs.get(job_id) or _Job()
        states = [JobEvent(at=h.at, attempt=h.attempt, source="queue_manager", kind="state", state=h.state,
                           reason=h.reason, message=h.message,
                           warning=h.state in ("failed", "rejected"))
                  for h in history]
        events = sorted([*states, *(r.event() for r in job.reports)], key=lambda e: e.at)
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
        pods = [PodView(index=index, name=name, node=node, gpus=gpus_per_pod,
                        nvlink_group=planned[index][1] if index < len(planned) and planned[index][0] == node else None)
                for index, name, node in attempt.pods]
    else:
        pods = [PodView(index=i, name=None, node=node, gpus=gpus_per_pod, nvlink_group=group)
                for i, (node, group) in enumerate(planned)]
    source = ("observed" if attempt.pods else "planned") if pods else None
    return AttemptObjects(attempt=number, cluster=attempt.cluster, namespace=attempt.namespace,
                          job_name=attempt.names[-1] if attempt.names else None, job_names=list(attempt.names),
                          dispatched_at=attempt.dispatched_at, pods=pods, pods_source=source)


def _report(message: object) -> _Report | None:
    """The timeline entry of one dispatch or run report."""
    if not isinstance(message, _REPORTS):
        return None
    at, attempt, cluster = message.observed_at, message.attempt, sys.intern(message.cluster)
    if isinstance(message, JobDispatched):
        return _Report(at, attempt, cluster, "dispatcher", "dispatched", "Created",
                       f"created Job {message.namespace}/{message.object_name}", object_name=message.object_name)
    if isinstance(message, DispatchFailed):
        # schemas.runs.ends_attempt: a retryable failure requeues a job not yet started; a running one goes on
        retry = ("; retryable: requeued if the run had not started, else the run goes on" if message.retryable
                 else "")
        return _Report(at, attempt, cluster, "dispatcher", "dispatch_failed", message.reason, message.message + retry,
                       warning=True)
    if isinstance(message, JobStopped):
        what = "requeued" if message.requeue else "not requeued"
        saved = ", checkpointed" if message.checkpointed else ""
        return _Report(at, attempt, cluster, "dispatcher", "stopped", message.reason, f"stopped ({what}{saved})")
    if isinstance(message, RunStarted):
        return _Report(at, attempt, cluster, "node_watcher", "started", "Started",
                       f"{message.pods_running} of {message.pods_total} pods running")
    if isinstance(message, RunAllPodsReady):
        return _Report(at, attempt, cluster, "node_watcher", "pods_ready", "AllPodsReady",
                       f"all {message.pods_total} pods ready", object_name=message.object_name,
                       nodes=tuple(sorted({sys.intern(p.node) for p in message.pods})))
    if isinstance(message, RunSucceeded):
        return _Report(at, attempt, cluster, "node_watcher", "succeeded", "Completed", "the Job completed")
    if isinstance(message, RunFailed):
        return _Report(at, attempt, cluster, "node_watcher", "failed", message.reason, message.message,
                       pod=message.pod, nodes=tuple(message.nodes), exit_code=message.exit_code,
                       classification=message.classification, warning=True)
    if isinstance(message, RunEvicted):
        return _Report(at, attempt, cluster, "node_watcher", "evicted", message.reason,
                       f"evicted from {message.node}" if message.node else "evicted",
                       nodes=(message.node,) if message.node else (), classification="infrastructure", warning=True)
    by = "by Muster" if message.by == "muster" else message.by
    return _Report(at, attempt, cluster, "node_watcher", "deleted", "Deleted",
                   f"the Job's objects were deleted ({by})", warning=message.by == "external")
