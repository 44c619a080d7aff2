"""LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``, checked against lws v0.7.0).

One Muster job per LeaderWorkerSet: ``spec.replicas`` groups (default 1) of
``spec.leaderWorkerTemplate.size`` pods (default 1). With a ``leaderTemplate``, roles ``leader``
(``replicas`` pods) and ``worker`` (``replicas * (size - 1)``, from ``workerTemplate``); without one, role
``main`` (``replicas * size``, the leader made from ``workerTemplate`` too).

It cannot be suspended: it is held by the gate in ``leaderTemplate`` and ``workerTemplate``, so the leader
StatefulSet and the worker StatefulSets create gated pods. Preemption deletes the pods; the StatefulSets
recreate them, gated again.

Pods carry ``leaderworkerset.sigs.k8s.io/name``; LWS's pod webhook gives each ``worker-index``, ``"0"``
for the leader. State: never ends (a serving kind); running while condition ``Available`` is True.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schemas.jobspec import MAIN_ROLE
from services.spec.kinds.base import (
    KindIdentity,
    PodSet,
    State,
    WorkloadKind,
    condition_reason,
    count_of,
    spec_of,
    template_at,
    true_condition,
)

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LEADER = "leader"
WORKER = "worker"
_TEMPLATES = ("spec", "leaderWorkerTemplate")


class LeaderWorkerSetKind(WorkloadKind):
    identity = KindIdentity("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets")
    suspendable = False
    serving = True

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        spec = spec_of(obj)
        groups = count_of(spec.get("replicas"), 1)
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = count_of(lwt.get("size"), 1)
        worker, worker_present = template_at(lwt, ("workerTemplate",))
        worker_path = (*_TEMPLATES, "workerTemplate")
        if "leaderTemplate" not in lwt or lwt["leaderTemplate"] is None:
            return [PodSet(MAIN_ROLE, groups * size, worker, "the worker template (leaders too)", worker_path,
                           worker_present)]
        leader, leader_present = template_at(lwt, ("leaderTemplate",))
        return [PodSet(LEADER, groups, leader, "the leader template", (*_TEMPLATES, "leaderTemplate"), leader_present),
                PodSet(WORKER, groups * max(size - 1, 0), worker, "the worker template", worker_path, worker_present)]

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        return [{NAME_LABEL: str((obj.get("metadata") or {}).get("name", ""))}]

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(NAME_LABEL) != (obj.get("metadata") or {}).get("name") or WORKER_INDEX_LABEL not in labels:
            return None
        if (spec_of(obj).get("leaderWorkerTemplate") or {}).get("leaderTemplate") is None:
            return MAIN_ROLE
        return LEADER if labels[WORKER_INDEX_LABEL] == "0" else WORKER

    def state(self, obj: Mapping[str, Any]) -> State:
        cond = true_condition(obj, "Available")
        return State("running", condition_reason(cond)) if cond is not None else State(None, "not available")


LEADERWORKERSET = LeaderWorkerSetKind()
