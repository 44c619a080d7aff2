"""``batch/v1`` Job: one role ``main`` of ``min(parallelism, completions)`` pods (parallelism default 1,
completions default parallelism), held back by ``spec.suspend``.

Its release is a JSON merge patch: the pod template is a map (``spec.template``), not inside a list, so the
only list touched is ``schedulingGates``, which the patch gives whole (the gates it had, then the gate).
Kubernetes lets a suspended Job that never started change its template's labels, annotations, node
selector, tolerations and scheduling gates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schemas.jobspec import MAIN_ROLE
from schemas.kube import ADMISSION_GATE, ROLE
from services.spec.kinds.base import (
    KindIdentity,
    Patch,
    PodSet,
    State,
    WorkloadKind,
    count_of,
    ended_by_conditions,
    spec_of,
    template_at,
)
from services.spec.kinds.patching import gate_entry
from services.spec.kube_pods import pod_spec_of

#: the label the Job controller puts on its pods (Kubernetes 1.27 and later)
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
TEMPLATE: tuple[str, ...] = ("spec", "template")


def job_pods(job_spec: Mapping[str, Any]) -> int:
    """Pods a Job runs at once: ``parallelism`` (default 1), no more than ``completions`` when set."""
    parallelism = count_of(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    return parallelism if completions is None else min(parallelism, count_of(completions, parallelism))


class BatchJobKind(WorkloadKind):
    identity = KindIdentity("batch", "v1", "Job", "jobs")
    suspendable = True

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        template, present = template_at(obj, TEMPLATE)
        return [PodSet(MAIN_ROLE, job_pods(spec_of(obj)), template, "the pod template", TEMPLATE, present)]

    def release_patch(self, obj: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str],
                      related: Sequence[Mapping[str, Any]] = ()) -> tuple[Patch, ...] | None:
        template, _ = template_at(obj, TEMPLATE)
        gates = [g for g in pod_spec_of(template).get("schedulingGates") or [] if isinstance(g, dict)]
        if not any(g.get("name") == ADMISSION_GATE for g in gates):
            gates = [*gates, gate_entry()]
        meta: dict[str, Any] = {"labels": {**labels, ROLE: MAIN_ROLE}}
        if annotations:
            meta["annotations"] = dict(annotations)
        return (Patch("merge", {"spec": {"suspend": False, "template": {
            "metadata": meta, "spec": {"schedulingGates": gates}}}}),)

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        return [{JOB_NAME_LABEL: str((obj.get("metadata") or {}).get("name", ""))}]

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return MAIN_ROLE if labels.get(JOB_NAME_LABEL) == (obj.get("metadata") or {}).get("name") else None

    def state(self, obj: Mapping[str, Any]) -> State:
        ended = ended_by_conditions(obj)
        if ended is not None:
            return ended
        if self.suspended(obj):
            return State(None, "suspended")
        active = count_of((obj.get("status") or {}).get("active"), 0)
        return State("running", f"{active} pods active") if active else State(None, "no pod active")


JOB = BatchJobKind()
