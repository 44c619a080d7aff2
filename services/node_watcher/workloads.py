"""Run observations of jobs that are workload objects (JobSet, RayJob, LeaderWorkerSet...). Pure: objects and
pods in, messages out.

The dispatcher marks an admitted object with Muster's identity (``muster.dev/job-id`` label and
annotation, ``muster.dev/attempt``, ``muster.dev/gang-size``: the pods of every role) and labels each pod it
releases with the job id, attempt and role. From those:

- ``RunStarted`` once a pod of the attempt runs, ``RunAllPodsReady`` once as many are ready (or done) as the
  gang has pods, naming them;
- ``RunSucceeded`` / ``RunFailed`` when the kind's status says so (``WorkloadKind.state``): the kind's
  controller has used its own retries by then; a failure while Muster stops the object is expected and
  not reported;
- ``RunDeleted`` when the object goes (``by=muster`` when the dispatcher marked it first).

Serving kinds never end: their runs only start and become ready. A serving object of one role (a Deployment,
a StatefulSet) scaled by its owner is reported as ``RunResized`` (see ``WorkloadTracker._resize``); an object with
an idle timeout whose GPUs read idle that long, as ``RunIdle`` (``WorkloadTracker.on_gpu_samples``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas.envelope import Message, clip_reason, clip_text
from schemas.kube import (
    ATTEMPT,
    DELETED_BY,
    GANG_SIZE,
    IDLE_TIMEOUT,
    JOB_ID,
    POD_GROUP,
    POD_GROUP_SIZE,
    PREEMPT_REQUESTED,
    ROLE,
    WORKLOAD,
)
from schemas.runs import (
    MAX_NAMED_PODS,
    PodBound,
    RunAllPodsReady,
    RunDeleted,
    RunFailed,
    RunIdle,
    RunResized,
    RunStarted,
    RunSucceeded,
)
from services.node_watcher.runs import condition_true
from services.spec.kinds import NotQueueable, WorkloadKind, pod_group
from services.spec.kinds.pods import POD_GROUP_KIND
from services.spec.pod_resources import holds_node

KubeObject = dict[str, Any]
#: (namespace, job-id label, attempt): how a released pod names its job
PodKey = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """The Muster identity an admitted workload object carries."""

    job_id: str
    attempt: int
    namespace: str
    name: str
    gang: int
    label: str  # the job id as a label value (pods carry only that)

    @property
    def pod_key(self) -> PodKey:
        return (self.namespace, self.label, str(self.attempt))


def workload_ref(obj: Mapping[str, Any]) -> WorkloadRef | None:
    meta = obj.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    job_id, attempt = annotations.get(JOB_ID), annotations.get(ATTEMPT) or labels.get(ATTEMPT)
    label = labels.get(JOB_ID)
    if not job_id or not label or not str(attempt or "").isdigit():
        return None
    if annotations.get(WORKLOAD) != f"{obj.get('kind')}/{meta.get('name')}":
        return None  # made by the job's object's controller, with its labels and annotations copied
    gang = str(annotations.get(GANG_SIZE) or "1")
    return WorkloadRef(str(job_id), int(str(attempt)), str(meta.get("namespace") or ""), str(meta.get("name")),
                       max(int(gang) if gang.isdigit() else 1, 1), str(label))


def _group_ref(key: PodKey, pods: Mapping[str, KubeObject]) -> WorkloadRef | None:
    """The identity of a group of plain pods, from its released pods (labelled with the group and its size)."""
    for pod in pods.values():
        meta = pod.get("metadata") or {}
        group = (meta.get("labels") or {}).get(POD_GROUP)
        size = str((meta.get("annotations") or {}).get(POD_GROUP_SIZE) or "")
        if group and size.isdigit():
            namespace, label, attempt = key
            return WorkloadRef(label, int(attempt), namespace, str(group), max(int(size), 1), label)
    return None


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _seconds(text: object) -> float | None:
    """The idle timeout the dispatcher wrote (seconds), or None when absent or unreadable."""
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if value > 0 else None


def _ready(pod: KubeObject) -> bool:
    return _phase(pod) == "Succeeded" or (_phase(pod) == "Running" and condition_true(pod, "Ready"))


class WorkloadTracker:
    """The workload objects of the kinds watched and the pods Muster released; drops repeated observations."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.objects: dict[tuple[str, str, str], tuple[WorkloadKind, KubeObject]] = {}  # (ns, kind, name)
        self._by_pods: dict[PodKey, tuple[str, str, str]] = {}
        self._pod_key_of: dict[tuple[str, str, str], PodKey] = {}  # object -> the attempt it is at
        self._pods: dict[PodKey, dict[str, KubeObject]] = defaultdict(dict)
        self.reported: set[tuple[str, ...]] = set()
        self._sizes: dict[tuple[str, int], tuple[int, int]] = {}  # attempt -> the (asked, admitted) pods last told
        self._idle_since: dict[tuple[str, int], datetime] = {}  # attempt -> since when its GPUs read idle

    def on_object(self, kind: WorkloadKind, event_type: str, obj: KubeObject, now: datetime) -> list[Message]:
        ref = workload_ref(obj)
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), kind.identity.kind, str(meta.get("name")))
        if event_type == "DELETED":
            self.objects.pop(key, None)
            self._by_pods.pop(self._pod_key_of.pop(key, ("", "", "")), None)
            if ref is None:
                return []
            by = "muster" if (meta.get("annotations") or {}).get(DELETED_BY) == "muster" else "external"
            out = self._fresh((ref.job_id, str(ref.attempt), RunDeleted.TYPE), RunDeleted(
                job_id=ref.job_id, attempt=ref.attempt, cluster=self.cluster, observed_at=now, by=by))
            self.reported = {k for k in self.reported if k[0] != ref.job_id}  # bounded memory
            self._sizes.pop((ref.job_id, ref.attempt), None)
            self._idle_since.pop((ref.job_id, ref.attempt), None)
            return out
        if ref is None:
            return []
        previous = self._pod_key_of.get(key)
        if previous is not None and previous != ref.pod_key:  # released again as a later attempt
            self._by_pods.pop(previous, None)
        self.objects[key] = (kind, obj)
        self._by_pods[ref.pod_key] = key
        self._pod_key_of[key] = ref.pod_key
        return self._evaluate(ref.pod_key, now)

    def on_pod(self, event_type: str, pod: KubeObject, now: datetime) -> list[Message]:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if ROLE not in labels or JOB_ID not in labels or ATTEMPT not in labels:
            return []  # not a released workload pod (a Job's pods carry no role)
        key: PodKey = (str(meta.get("namespace") or ""), str(labels[JOB_ID]), str(labels[ATTEMPT]))
        uid = str(meta.get("uid") or meta.get("name"))
        if event_type == "DELETED":
            self._pods[key].pop(uid, None)
            if not self._pods[key]:
                del self._pods[key]
            return []
        self._pods[key][uid] = pod
        return self._evaluate(key, now)

    def _evaluate(self, key: PodKey, now: datetime) -> list[Message]:
        where = self._by_pods.get(key)
        if where is not None and where in self.objects:
            kind, obj = self.objects[where]
            ref = workload_ref(obj)
        else:  # a group of plain pods has no object: the pods are the run
            members = self._pods.get(key, {})
            kind, obj, ref = POD_GROUP_KIND, pod_group(list(members.values())), _group_ref(key, members)
        if ref is None:
            return []
        base: dict[str, Any] = {"job_id": ref.job_id, "attempt": ref.attempt, "cluster": self.cluster,
                                "observed_at": now}
        attempt = (ref.job_id, str(ref.attempt))
        pods = list(self._pods.get(key, {}).values())
        out: list[Message] = []
        running = [p for p in pods if _phase(p) in ("Running", "Succeeded")]
        if running:
            out += self._fresh((*attempt, RunStarted.TYPE), RunStarted(
                **base, pods_running=sum(_phase(p) == "Running" for p in pods), pods_total=ref.gang))
        ready = [p for p in pods if _ready(p)]
        if len(ready) >= ref.gang:
            out += self._fresh((*attempt, RunAllPodsReady.TYPE), RunAllPodsReady(
                **base, pods_total=ref.gang, object_name=ref.name[:63], pods=bound(ready)))
        stopping = PREEMPT_REQUESTED in ((obj.get("metadata") or {}).get("annotations") or {})
        if kind.serving and not stopping:
            out += self._resize(kind, obj, ref, pods, base)
        state = kind.state(obj)
        if state.phase == "succeeded":
            out += self._fresh((*attempt, "end"), RunSucceeded(**base))
        elif state.phase == "failed" and not stopping:
            reason = clip_reason(state.reason.split(":", 1)[0].strip()) or "Failed"
            out += self._fresh((*attempt, "end"), RunFailed(**base, reason=reason, message=clip_text(state.reason)))
        return out

    def _resize(self, kind: WorkloadKind, obj: KubeObject, ref: WorkloadRef, pods: list[KubeObject],
                base: dict[str, Any]) -> list[Message]:
        """``RunResized`` when a serving object of one role asks for another number of pods than admitted
        (``muster.dev/gang-size``): at once when it asks for more; when it asks for fewer, once no more than
        that many of its pods are left, naming where they run. Each (asked, admitted) pair is told once."""
        try:
            sets = kind.read_pod_sets(obj)
        except NotQueueable:
            return []
        if len(sets) != 1 or sets[0].count < 1:
            return []  # a leader and its workers (resized whole groups) or scaled to zero: not resized here
        asked = sets[0].count
        key = (ref.job_id, ref.attempt)
        if asked == ref.gang or self._sizes.get(key) == (asked, ref.gang):
            return []
        live = [p for p in pods if holds_node(p)]
        if asked < ref.gang and len(live) > asked:
            return []  # not yet: the pods still go
        self._sizes[key] = (asked, ref.gang)
        return [RunResized(**base, replicas=asked, pods=bound(live))]

    def on_gpu_samples(self, samples: Mapping[tuple[str, str], float], now: datetime,
                       idle_at_most: float = 0.0) -> list[Message]:
        """``RunIdle`` for each released object with an idle timeout (``muster.dev/idle-timeout``) whose pods'
        GPUs have all been at most ``idle_at_most`` percent busy, at every reading, for that long. A pod of
        the attempt that runs but was not measured (no GPU, or no exporter on its node) is not counted; an
        attempt none of whose pods was measured is not idle (no signal, no release)."""
        out: list[Message] = []
        for (namespace, _, _), (_, obj) in list(self.objects.items()):
            ref = workload_ref(obj)
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            timeout = _seconds(annotations.get(IDLE_TIMEOUT))
            if ref is None or timeout is None or PREEMPT_REQUESTED in annotations:
                continue
            key = (ref.job_id, ref.attempt)
            running = [p for p in self._pods.get(ref.pod_key, {}).values() if _phase(p) == "Running"]
            measured = [samples[(namespace, name)] for p in running
                        if (name := str((p.get("metadata") or {}).get("name"))) and (namespace, name) in samples]
            if not measured or max(measured) > idle_at_most:
                self._idle_since.pop(key, None)
                continue
            since = self._idle_since.setdefault(key, now)
            if (now - since).total_seconds() >= timeout:
                out += self._fresh((ref.job_id, str(ref.attempt), RunIdle.TYPE, since.isoformat()), RunIdle(
                    job_id=ref.job_id, attempt=ref.attempt, cluster=self.cluster, observed_at=now, idle_since=since,
                    pods=len(measured)))
        return out

    def _fresh(self, key: tuple[str, ...], message: Message) -> list[Message]:
        if key in self.reported:
            return []
        self.reported.add(key)
        return [message]


def bound(pods: Iterable[KubeObject]) -> list[PodBound]:
    """The pods with a node, numbered in name order (a workload's pods have no completion index of Muster's)."""
    named = sorted((str((p.get("metadata") or {}).get("name")), str((p.get("spec") or {}).get("nodeName") or ""))
                   for p in pods)
    return [PodBound(name=n, index=i, node=node) for i, (n, node) in enumerate(named) if node][:MAX_NAMED_PODS]
