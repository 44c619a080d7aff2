"""The watcher's memory: the nodes, Muster Jobs and pods it has seen, and what it already reported.

Synchronous and free of I/O: informer changes go in, the messages to publish come out, each at
most once in steady state (repeats after a restart are harmless: consumers are idempotent).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from schemas.capacity import NodeRemoved, NodeState, NodeStateObserved
from schemas.envelope import Message
from schemas.kube import JOB_ID
from services.node_watcher.nodes import node_state, ready_condition
from services.node_watcher.runs import (
    DedupKey,
    NodeDown,
    chain_of,
    job_ref,
    no_node_down,
    observe,
    observe_deleted,
    owner_job,
)
from services.spec.pod_resources import holds_node_resources

KubeObject = dict[str, Any]
DELETED = "DELETED"
JobKey = tuple[str, str]  # namespace, name
#: how many deleted node names are remembered (a pod failure seen after its node went still blames the node)
GONE_MEMORY = 1024


def _meta(obj: KubeObject) -> dict[str, Any]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return meta


def _pod_key(pod: KubeObject) -> JobKey:
    meta = _meta(pod)
    return str(meta.get("namespace") or ""), str(meta.get("name"))


class NodeTracker:
    """Node objects and the pods bound to them; publishes a node's state whenever it changes."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.nodes: dict[str, KubeObject] = {}
        self.published: dict[str, NodeState] = {}
        self._pods_on: dict[str, dict[JobKey, KubeObject]] = defaultdict(dict)
        self._node_of: dict[JobKey, str] = {}
        self._gone: dict[str, None] = {}  # deleted nodes, oldest first

    def down(self, name: str | None) -> bool:
        """Whether node ``name`` is known to be NotReady or deleted (a node never seen is not)."""
        if not name:
            return False
        node = self.nodes.get(name)
        if node is None:
            return name in self._gone
        ready = ready_condition(node)
        return ready is not None and ready.get("status") != "True"

    def on_node(self, event_type: str, node: KubeObject, now: datetime) -> list[Message]:
        name = str(_meta(node)["name"])
        self._gone.pop(name, None)
        if event_type == DELETED:
            self.nodes.pop(name, None)
            self._gone[name] = None
            if len(self._gone) > GONE_MEMORY:
                del self._gone[next(iter(self._gone))]
            if self.published.pop(name, None) is None:
                return []
            return [NodeRemoved(cluster=self.cluster, node=name, observed_at=now)]
        self.nodes[name] = node
        return self._refresh(name, now)

    def on_pod(self, event_type: str, pod: KubeObject, now: datetime) -> list[Message]:
        key = _pod_key(pod)
        old_node = self._node_of.pop(key, None)
        if old_node is not None:
            self._pods_on[old_node].pop(key, None)
        new_node = (pod.get("spec") or {}).get("nodeName")
        # only a pod that holds its node's resources counts for the node's state; a finished pod, which may
        # stay until its Job is deleted, is let go so that a node's refresh reads its running pods alone
        if event_type != DELETED and new_node and holds_node_resources(pod):
            self._node_of[key] = new_node
            self._pods_on[new_node][key] = pod
        touched = {n for n in (old_node, new_node) if n}
        return [m for n in sorted(touched) for m in self._refresh(n, now)]

    def current(self, now: datetime) -> list[Message]:
        """The state of every known node, for a full republish."""
        return [NodeStateObserved(state=s, observed_at=now) for _, s in sorted(self.published.items())]

    def _refresh(self, name: str, now: datetime) -> list[Message]:
        node = self.nodes.get(name)
        if node is None:
            return []
        state = node_state(node, self.cluster, self._pods_on.get(name, {}).values())
        if self.published.get(name) == state:
            return []
        self.published[name] = state
        return [NodeStateObserved(state=state, observed_at=now)]


class ReportedKeys:
    """The observations already reported, by attempt (a key's first two parts: job id and attempt), so that an
    object's or an attempt's keys are forgotten without reading every key the watcher holds."""

    def __init__(self) -> None:
        self._by_attempt: dict[tuple[str, ...], set[DedupKey]] = {}

    def __contains__(self, key: DedupKey) -> bool:
        return key in self._by_attempt.get(tuple(key[:2]), ())

    def __len__(self) -> int:
        return sum(len(keys) for keys in self._by_attempt.values())

    def __iter__(self) -> Iterator[DedupKey]:
        for keys in self._by_attempt.values():
            yield from keys

    def add(self, key: DedupKey) -> None:
        self._by_attempt.setdefault(tuple(key[:2]), set()).add(key)

    def forget(self, attempt: tuple[str, str], name: str | None) -> None:
        """Forget the attempt's keys of the object ``name`` (its last part), or all of them (None)."""
        if name is None:
            self._by_attempt.pop(attempt, None)
            return
        keys = self._by_attempt.get(attempt)
        if keys is None:
            return
        keys.difference_update([k for k in keys if k[-1] == name])
        if not keys:
            del self._by_attempt[attempt]


class RunTracker:
    """Muster Jobs and their pods; derives run observations and drops the ones already reported."""

    def __init__(self, cluster: str, node_down: NodeDown = no_node_down) -> None:
        self.cluster = cluster
        self.node_down = node_down
        self.jobs: dict[JobKey, KubeObject] = {}
        self.reported = ReportedKeys()
        self._pods: dict[JobKey, dict[JobKey, KubeObject]] = defaultdict(dict)
        self._owner_of: dict[JobKey, JobKey] = {}

    def on_job(self, event_type: str, job: KubeObject, now: datetime) -> list[Message]:
        ref = job_ref(job)
        if ref is None:
            return []
        key = (ref.namespace, ref.name)
        if event_type == DELETED:
            self.jobs.pop(key, None)
            for pod_key in self._pods.pop(key, {}):
                self._owner_of.pop(pod_key, None)
            deleted = observe_deleted(job, self.cluster, now)
            messages = self._fresh([deleted] if deleted else [])
            self._forget(ref.job_id, ref.attempt, ref.name, whole_attempt=deleted is not None)
            return messages
        self.jobs[key] = job
        return self._evaluate(key, now)

    def chain_of_pod(self, pod: KubeObject) -> tuple[str | None, str | None]:
        """The chain (correlation id, causing decision) of the Job that owns ``pod``, when it is known."""
        owner = owner_job(pod)
        return chain_of(self.jobs.get(owner) if owner is not None else None)

    def on_pod(self, event_type: str, pod: KubeObject, now: datetime) -> list[Message]:
        if JOB_ID not in (_meta(pod).get("labels") or {}):
            return []
        pod_key = _pod_key(pod)
        owner = owner_job(pod)
        if event_type == DELETED or owner is None:
            old = self._owner_of.pop(pod_key, None)
            if old is not None:
                self._pods[old].pop(pod_key, None)
            return []
        self._owner_of[pod_key] = owner
        self._pods[owner][pod_key] = pod
        return self._evaluate(owner, now)

    def _evaluate(self, key: JobKey, now: datetime) -> list[Message]:
        job = self.jobs.get(key)
        if job is None:
            return []
        return self._fresh(observe(job, self._pods.get(key, {}).values(), self.cluster, now, self.node_down))

    def _fresh(self, observations: list[Any]) -> list[Message]:
        messages: list[Message] = []
        for obs in observations:
            if obs.key not in self.reported:
                self.reported.add(obs.key)
                messages.append(obs.message)
        return messages

    def _forget(self, job_id: str, attempt: int, name: str, *, whole_attempt: bool) -> None:
        """Drop the keys of a deleted object (of the whole attempt once it is over) to bound memory."""
        self.reported.forget((job_id, str(attempt)), None if whole_attempt else name)
