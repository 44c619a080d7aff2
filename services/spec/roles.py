"""Rules about a job's roles that the gateway and the queue manager both apply (one copy)."""

from __future__ import annotations

from schemas.jobspec import JobSpec

#: a spec of several roles must name the workload object that runs them
ROLES_NEED_WORKLOAD = "roles_need_a_workload"
ROLES_NEED_WORKLOAD_TEXT = (
    "a job of several roles runs as the Kubernetes object whose controller starts them (a JobSet, TrainJob, "
    "RayJob, RayCluster, LeaderWorkerSet...): give workload with the object (its manifest, or the name of the "
    "object you created held back); Muster renders a Job itself only for a job of one role (replicas + template)")


def roles_refusal(spec: JobSpec) -> tuple[str, str] | None:
    """(reason, message) when the spec's roles cannot be run as given; None when they can."""
    if spec.roles and spec.workload is None:
        return ROLES_NEED_WORKLOAD, ROLES_NEED_WORKLOAD_TEXT
    return None
