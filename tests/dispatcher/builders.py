"""Decisions as the queue manager sends them, for the dispatcher's tests."""

from __future__ import annotations

from typing import Any

from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobScaled, NodePods, PlacementPlan
from schemas.jobspec import CheckpointSpec, JobSpec
from tests.builders import jobspecs

CLUSTER = "east"
DURATION = "kubesim.muster.dev/duration-seconds"
EXIT_CODE = "kubesim.muster.dev/exit-code"


def placement(*nodes: str, pods_per_node: int = 1, cluster: str = CLUSTER) -> PlacementPlan:
    chosen = nodes or ("east-a100-0", "east-a100-1")
    return PlacementPlan(cluster=cluster, nodes=[NodePods(node=n, pods=pods_per_node) for n in chosen])


#: what the dispatcher's tests find in the manifests of a job, as ``job_spec(**TRAINING, ...)`` gives it: a
#: command, an env var and a label of its own, 2 CPUs and 8Gi a pod, a checkpoint directory and 30 s to stop
TRAINING: dict[str, Any] = {
    "cpu": "2", "memory": "8Gi",
    "pod": {"command": ["python", "train.py"], "env": {"EPOCHS": "3"}},
    "checkpoint": CheckpointSpec(enabled=True, grace_period_s=30, directory="/ckpt"),
    "labels": {"team": "nlp"},
}


def runs_for(seconds: float, *, exit_code: int | None = None) -> dict[str, str]:
    """The annotations by which kubesim runs a job's pods ``seconds`` then has them exit (with ``exit_code``)."""
    annotations = {DURATION: str(seconds)}
    if exit_code is not None:
        annotations[EXIT_CODE] = str(exit_code)
    return annotations


def admitted(job_id: str, attempt: int = 0, *, plan: PlacementPlan | None = None, job_spec: JobSpec | None = None,
             namespace: str = "team-a", restarts: int = 0) -> JobAdmitted:
    """The admission of ``job_id`` onto ``plan`` (two east a100 nodes, a pod each); unless ``job_spec`` says
    otherwise, the job is the ``TRAINING`` one, a pod for each of the plan's, its pods running 30 s on kubesim."""
    where = plan or placement()
    return JobAdmitted(job_id=job_id, attempt=attempt, tenant="team-a", queue="team-a", namespace=namespace,
                       priority=100, replicas=where.pods, placement=where, restarts=restarts,
                       spec=job_spec or jobspecs.job_spec(replicas=where.pods, **TRAINING, annotations=runs_for(30.0)))


def preempt(job_id: str, attempt: int = 0, *, grace_s: float = 1.0, requeue: bool = True,
            cluster: str = CLUSTER) -> JobPreemptionRequested:
    return JobPreemptionRequested(job_id=job_id, attempt=attempt, reason="higher_priority", grace_period_s=grace_s,
                                  requeue=requeue, cluster=cluster, preemptor="urgent-1")


def scaled(job_id: str, attempt: int = 0, *, plan: PlacementPlan) -> JobScaled:
    return JobScaled(job_id=job_id, attempt=attempt, replicas=plan.pods, placement=plan)
