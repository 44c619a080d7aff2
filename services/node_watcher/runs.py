"""Run observations derived from one Muster Job and its pods. Pure: objects in, messages out.

A failure is classified (``failures``): an infrastructure failure names the nodes to blame.
Each ``Observation`` carries a deduplication key. Started / all-ready / succeeded are keyed by
(job, attempt, kind): a gang restarted under a new object name keeps its attempt, and has already
started. A failure (``RunFailed`` or ``RunEvicted``, whichever is seen first) and a deletion are
keyed by the Job object as well, because every restart of an attempt can fail again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas.envelope import Message, clip_reason, clip_text
from schemas.kube import (
    ATTEMPT,
    CORRELATION,
    DECISION_EVENT,
    DELETE_REASON,
    DELETED_BY,
    GANG_SIZE,
    JOB_ID,
    PREEMPT_REQUESTED,
    RESTARTS,
)
from schemas.runs import (
    MAX_FAILED_NODES,
    MAX_NAMED_PODS,
    PodBound,
    RunAllPodsReady,
    RunDeleted,
    RunEvicted,
    RunFailed,
    RunStarted,
    RunSucceeded,
)
from services.node_watcher.failures import classify_pod_failure

KubeObject = dict[str, Any]

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
#: deletions after which the attempt goes on in another Job object: no RunDeleted for them
CONTINUING_DELETE_REASONS = frozenset({"restart", "rescale"})
#: pod-level reasons of a pod that failed because its node went away or it was evicted
EVICTION_REASONS = frozenset({"NodeLost", "Evicted", "Preempted", "Shutdown", "NodeShutdown", "Terminated",
                              "DeletionByTaintManager", "TerminationByKubelet"})
#: Job-level failure reasons that explain the pods' failures better than the pods do
JOB_LEVEL_FAILURES = frozenset({"DeadlineExceeded"})

DedupKey = tuple[str, ...]
NodeDown = Callable[[str | None], bool]


def no_node_down(_: str | None) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class JobRef:
    """The Muster identity of one Job object."""

    job_id: str
    attempt: int
    namespace: str
    name: str
    uid: str
    gang: int
    #: whole-gang restarts done before this Job (revision) was created; None on a Job without the annotation
    restarts: int | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    key: DedupKey
    message: Message


def _annotations(obj: KubeObject) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def job_ref(job: KubeObject) -> JobRef | None:
    """The job id and attempt of a Job Muster created (None for any other Job)."""
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = _annotations(job)
    job_id = annotations.get(JOB_ID) or labels.get(JOB_ID)
    attempt = annotations.get(ATTEMPT) or labels.get(ATTEMPT)
    if not job_id or attempt is None or not str(attempt).isdigit():
        return None
    spec = job.get("spec") or {}
    gang = annotations.get(GANG_SIZE)
    size = int(gang) if gang and gang.isdigit() else int(spec.get("parallelism") or spec.get("completions") or 1)
    restarts = annotations.get(RESTARTS)
    return JobRef(job_id=job_id, attempt=int(attempt), namespace=str(meta.get("namespace") or ""),
                  name=str(meta["name"]), uid=str(meta.get("uid") or ""), gang=max(1, size),
                  restarts=int(restarts) if restarts and restarts.isdigit() else None)


def chain_of(job: KubeObject | None) -> tuple[str | None, str | None]:
    """The correlation id and the causing decision's event id the dispatcher wrote on a Muster Job, so the
    run observations about it continue the job's chain of messages (and its trace)."""
    if job is None:
        return None, None
    annotations = _annotations(job)
    return annotations.get(CORRELATION) or None, annotations.get(DECISION_EVENT) or None


def owner_job(pod: KubeObject) -> tuple[str, str] | None:
    """``(namespace, job name)`` of the Job controlling ``pod``."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller"):
            return str(meta.get("namespace") or ""), str(ref.get("name"))
    return None


def condition_true(obj: KubeObject, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def condition(obj: KubeObject, kind: str) -> KubeObject | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def stopping_by_muster(job: KubeObject) -> bool:
    """The Job is being stopped on purpose (preemption handshake, deletion): pod failures are expected."""
    annotations = _annotations(job)
    return (PREEMPT_REQUESTED in annotations or DELETED_BY in annotations
            or bool((job.get("metadata") or {}).get("deletionTimestamp")))


def _phase(pod: KubeObject) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _index(pod: KubeObject, fallback: str) -> str:
    return str(_annotations(pod).get(INDEX_KEY) or fallback)


def _terminated(pod: KubeObject) -> KubeObject:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (status.get("state") or {}).get("terminated")
        if term:
            return dict(term)
    return {}


def _evicted(pod: KubeObject) -> bool:
    reason = (pod.get("status") or {}).get("reason")
    return reason in EVICTION_REASONS or condition_true(pod, "DisruptionTarget")


def _finish_order(pod: KubeObject) -> tuple[str, str]:
    return str(_terminated(pod).get("finishedAt") or ""), str((pod.get("metadata") or {}).get("name"))


def _clip(text: str) -> str:
    """A reason for a ``Reason`` field: cut to its length, never empty."""
    return clip_reason(text) or "Unknown"


def _node(pod: KubeObject) -> str | None:
    return (pod.get("spec") or {}).get("nodeName") or None


def _failure(ref: JobRef, job: KubeObject, pods: list[KubeObject], base: dict[str, Any],
             node_down: NodeDown) -> Observation | None:
    key: DedupKey = (ref.job_id, str(ref.attempt), "failure", ref.name)
    failed_base = {**base, "restarts": ref.restarts}
    failed = sorted((p for p in pods if _phase(p) == "Failed"), key=_finish_order)
    evicted = [p for p in failed if _evicted(p)]
    if evicted:
        pod = evicted[0]
        status = pod.get("status") or {}
        return Observation(key, RunEvicted(**base, reason=_clip(str(status.get("reason") or "DisruptionTarget")),
                                           node=_node(pod)))
    job_failed = condition(job, "Failed")
    if job_failed is not None and job_failed.get("reason") in JOB_LEVEL_FAILURES:
        return Observation(key, RunFailed(**failed_base, reason=_clip(str(job_failed["reason"])),
                                          message=clip_text(str(job_failed.get("message") or ""))))
    if failed:
        # one infrastructure failure explains the gang's others (peers of a lost pod exit with errors too)
        infra = [p for p in failed if classify_pod_failure(p, node_down(_node(p))) == "infrastructure"]
        pod = infra[0] if infra else failed[0]
        term = _terminated(pod)
        status = pod.get("status") or {}
        reason = status.get("reason") if infra and status.get("reason") else term.get("reason")
        reason = reason or status.get("reason") or "Failed"
        message = term.get("message") or status.get("message") or ""
        exit_code = term.get("exitCode")
        blame: dict[str, Any] = {}
        if infra:
            nodes = sorted({n for p in infra if (n := _node(p))})[:MAX_FAILED_NODES]
            blame = {"classification": "infrastructure", "nodes": nodes}
        return Observation(key, RunFailed(**failed_base, reason=_clip(str(reason)), message=clip_text(str(message)),
                                          exit_code=int(exit_code) if exit_code is not None else None,
                                          pod=str((pod.get("metadata") or {}).get("name")), **blame))
    if job_failed is not None:
        return Observation(key, RunFailed(**failed_base, reason=_clip(str(job_failed.get("reason") or "JobFailed")),
                                          message=clip_text(str(job_failed.get("message") or ""))))
    return None


def bound_pods(pods: Iterable[KubeObject]) -> list[PodBound]:
    """The running or finished pods that have a node, by completion index (what the dashboard shows)."""
    bound = []
    for i, pod in enumerate(pods):
        name, node, index = (pod.get("metadata") or {}).get("name"), _node(pod), _index(pod, str(i))
        if name and node and index.isdigit() and _phase(pod) in ("Running", "Succeeded"):
            bound.append(PodBound(name=str(name), index=int(index), node=node))
    return sorted(bound, key=lambda p: (p.index, p.name))[:MAX_NAMED_PODS]


def observe(job: KubeObject, pods: Iterable[KubeObject], cluster: str, now: datetime,
            node_down: NodeDown = no_node_down) -> list[Observation]:
    """Every observation that holds for ``job`` given its ``pods`` (the caller drops repeats by key);
    ``node_down(name)`` says whether a node is known to be NotReady or deleted."""
    ref = job_ref(job)
    if ref is None:
        return []
    owned = [p for p in pods if not ref.uid or any(
        r.get("uid") == ref.uid for r in (p.get("metadata") or {}).get("ownerReferences") or [])]
    base: dict[str, Any] = {"job_id": ref.job_id, "attempt": ref.attempt, "cluster": cluster, "observed_at": now}
    attempt_key = (ref.job_id, str(ref.attempt))
    result: list[Observation] = []
    running = [p for p in owned if _phase(p) == "Running"]
    succeeded = [p for p in owned if _phase(p) == "Succeeded"]
    if running or succeeded:
        result.append(Observation((*attempt_key, RunStarted.TYPE),
                                  RunStarted(**base, pods_running=len(running), pods_total=ref.gang)))
    ready = {_index(p, str(i)) for i, p in enumerate(owned)
             if (_phase(p) == "Running" and condition_true(p, "Ready")) or _phase(p) == "Succeeded"}
    if len(ready) >= ref.gang:
        result.append(Observation((*attempt_key, RunAllPodsReady.TYPE), RunAllPodsReady(
            **base, pods_total=ref.gang, object_name=ref.name, pods=bound_pods(owned))))
    if condition_true(job, "Complete"):
        result.append(Observation((*attempt_key, RunSucceeded.TYPE), RunSucceeded(**base)))
    elif not stopping_by_muster(job):
        failure = _failure(ref, job, owned, base, node_down)
        if failure is not None:
            result.append(failure)
    return result


def observe_deleted(job: KubeObject, cluster: str, now: datetime) -> Observation | None:
    """``RunDeleted`` for a Job that disappeared, unless Muster replaced it within the same attempt."""
    ref = job_ref(job)
    if ref is None:
        return None
    annotations = _annotations(job)
    if annotations.get(DELETE_REASON) in CONTINUING_DELETE_REASONS:
        return None
    by = "muster" if annotations.get(DELETED_BY) == "muster" else "external"
    return Observation((ref.job_id, str(ref.attempt), RunDeleted.TYPE, ref.name),
                       RunDeleted(job_id=ref.job_id, attempt=ref.attempt, cluster=cluster, observed_at=now, by=by))
