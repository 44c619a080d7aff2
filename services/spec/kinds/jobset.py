"""JobSet (``jobset.x-k8s.io/v1alpha2``, checked against jobset v0.10.1).

- Roles: one per ``spec.replicatedJobs[i]``, named after it, ``replicas`` (default 1) Jobs of
  ``min(parallelism, completions)`` pods each (``batch.job_pods``: parallelism default 1).
- Held by ``spec.suspend``. While it is (or was) suspended, JobSet's webhook lets a replicatedJob's pod
  template change only its labels, annotations, node selector, tolerations and scheduling gates: what the
  release patch touches. At resume the JobSet controller merges those into the child Jobs it suspended.
- Pods carry ``jobset.sigs.k8s.io/jobset-name`` and ``jobset.sigs.k8s.io/replicatedjob-name``.
- State: condition ``Completed`` (reason ``AllJobsCompleted``) or ``Failed`` (``FailedJobs``,
  ``ReachedMaxRestarts``, ``FailJobSetFailurePolicyAction``) with status True; running while a replicated
  job has active Jobs (``status.replicatedJobsStatus[].active``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
from services.spec.kinds.batch import job_pods
from services.spec.kinds.names import role_name

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def replicated_job_sets(jobset_spec: Mapping[str, Any], base: tuple[str | int, ...] = ("spec",)) -> list[PodSet]:
    """The pod sets of a JobSet spec whose path in the object is ``base``."""
    sets: list[PodSet] = []
    for i, rj in enumerate(jobset_spec.get("replicatedJobs") or []):
        if not isinstance(rj, dict):
            continue
        name = str(rj.get("name", ""))
        where = (*base, "replicatedJobs", i)
        job_spec = ((rj.get("template") or {}).get("spec")) or {}
        count = count_of(rj.get("replicas"), 1) * job_pods(job_spec)
        template, present = template_at(rj, ("template", "spec", "template"))
        sets.append(PodSet(name, count, template, f"replicatedJob {name}", (*where, "template", "spec", "template"),
                           present, guards=(((*where, "name"), name),)))
    return sets


def pod_set_label_role(pod: Mapping[str, Any], owner_label: str, owner: str, names: Sequence[str]) -> str | None:
    """The role of a JobSet pod: its replicatedJob's, when the pod belongs to JobSet ``owner``."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(owner_label) != owner:
        return None
    name = labels.get(REPLICATED_JOB_LABEL)
    return role_name(str(name)) if name is not None and name in names else None


def jobset_state(obj: Mapping[str, Any]) -> State | None:
    """The verdict of a JobSet's own status conditions, or None when it gives none."""
    if (cond := true_condition(obj, "Completed")) is not None:
        return State("succeeded", condition_reason(cond))
    if (cond := true_condition(obj, "Failed")) is not None:
        return State("failed", condition_reason(cond))
    return None


class JobSetKind(WorkloadKind):
    identity = KindIdentity("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
    suspendable = True

    def pod_sets(self, obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]] = ()) -> list[PodSet]:
        return replicated_job_sets(spec_of(obj))

    def pod_selectors(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        return [{JOBSET_NAME_LABEL: str((obj.get("metadata") or {}).get("name", ""))}]

    def pod_role(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
        names = [str(rj.get("name")) for rj in spec_of(obj).get("replicatedJobs") or [] if isinstance(rj, dict)]
        return pod_set_label_role(pod, JOBSET_NAME_LABEL, str((obj.get("metadata") or {}).get("name", "")), names)

    def state(self, obj: Mapping[str, Any]) -> State:
        ended = jobset_state(obj)
        if ended is not None:
            return ended
        if self.suspended(obj):
            return State(None, "suspended")
        jobs = [s for s in (obj.get("status") or {}).get("replicatedJobsStatus") or [] if isinstance(s, dict)]
        active = sum(count_of(s.get("active"), 0) for s in jobs)
        return State("running", f"{active} Jobs active") if active else State(None, "no Job active yet")


JOBSET = JobSetKind()
