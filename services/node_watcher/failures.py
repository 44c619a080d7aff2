"""Whose fault a failed pod is: the job's own, or its node's / the platform's. Pure.

``infrastructure``: the pod never got a fair chance, so retrying elsewhere may well succeed, and the node
is to blame: it was evicted or preempted by Kubernetes, its node was lost, shut down, NotReady or deleted,
the kubelet refused it at admission (``UnexpectedAdmissionError``, e.g. the GPU device plugin could not
allocate its devices; ``OutOf<resource>``), the container runtime could not start it because of the GPU
stack, or the kubelet lost track of its container (``ContainerStatusUnknown``).

``job``: the pod's own program failed: a container exited non-zero (``Error``), was ``OOMKilled`` (the
job asked for too little memory: running it elsewhere will not help), or the job ran past its deadline
(``DeadlineExceeded``). Anything not recognised as infrastructure is the job's: a wrong guess the other
way would retry a broken job for free and blame healthy nodes.
"""

from __future__ import annotations

import re
from typing import Any, Literal

KubeObject = dict[str, Any]
FailureClass = Literal["job", "infrastructure"]

#: pod-level ``status.reason`` values set by the kubelet, the node lifecycle or the eviction machinery
INFRASTRUCTURE_POD_REASONS = frozenset({
    "NodeLost", "Evicted", "Preempted", "Shutdown", "NodeShutdown", "Terminated", "DeletionByTaintManager",
    "TerminationByKubelet", "UnexpectedAdmissionError", "NodeAffinity", "NodeAffinityMismatch",
})
#: container termination reasons that mean the node lost the container, not that the program failed
INFRASTRUCTURE_CONTAINER_REASONS = frozenset({"ContainerStatusUnknown"})
#: container start failures that are the node's fault when the GPU stack is named in the message
START_FAILURES = frozenset({"StartError", "ContainerCannotRun", "RunContainerError"})
_GPU_STACK = re.compile(r"nvidia|\bgpu\b|device plugin|cuda driver|\bnvml\b", re.IGNORECASE)


def _terminated(pod: KubeObject) -> list[KubeObject]:
    status = pod.get("status") or {}
    states = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return [dict(t) for s in states if (t := (s.get("state") or {}).get("terminated"))]


def _disrupted(pod: KubeObject) -> bool:
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def classify_pod_failure(pod: KubeObject, node_down: bool = False) -> FailureClass:
    """The classification of one failed pod; ``node_down``: its node is NotReady or was deleted."""
    reason = str((pod.get("status") or {}).get("reason") or "")
    if reason in INFRASTRUCTURE_POD_REASONS or reason.startswith("OutOf") or _disrupted(pod) or node_down:
        return "infrastructure"
    for term in _terminated(pod):
        why = str(term.get("reason") or "")
        if why in INFRASTRUCTURE_CONTAINER_REASONS:
            return "infrastructure"
        if why in START_FAILURES and _GPU_STACK.search(str(term.get("message") or "")):
            return "infrastructure"
    return "job"
