"""Decisions as the queue manager sends them, for the dispatcher's tests."""

from __future__ import annotations

from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobScaled, NodePods, PlacementPlan
from schemas.jobspec import CheckpointSpec, JobSpec, PodTemplate, ResourceRequest

CLUSTER = "east"
DURATION = "kubesim.muster.dev/duration-seconds"
EXIT_CODE = "kubesim.muster.dev/exit-code"


def placement(*nodes: str, pods_per_node: int = 1, cluster: str = CLUSTER) -> PlacementPlan:
    chosen = nodes or ("east-a100-0", "east-a100-1")
    return PlacementPlan(cluster=cluster, nodes=[NodePods(node=n, pods=pods_per_node) for n in chosen])


def spec(*, replicas: int = 2, gpus: int = 4, seconds: float | None = 30.0, exit_code: int | None = None,
         max_restarts: int = 3, annotations: dict[str, str] | None = None, checkpoint_dir: str | None = "/ckpt",
         grace_s: int = 30) -> JobSpec:
    extra = dict(annotations or {})
    if seconds is not None:
        extra[DURATION] = str(seconds)
    if exit_code is not None:
        extra[EXIT_CODE] = str(exit_code)
    return JobSpec(
        name="train", queue="team-a", replicas=replicas,
        template=PodTemplate(image="registry.example/train:1", command=["python", "train.py"],
                             env={"EPOCHS": "3"},
                             resources=ResourceRequest(gpus=gpus, gpu_type="a100", cpu="2", memory="8Gi")),
        checkpoint=CheckpointSpec(enabled=checkpoint_dir is not None, grace_period_s=grace_s,
                                  directory=checkpoint_dir),
        max_restarts=max_restarts, labels={"team": "nlp"}, annotations=extra,
    )


def admitted(job_id: str, attempt: int = 0, *, plan: PlacementPlan | None = None, job_spec: JobSpec | None = None,
             namespace: str = "team-a", restarts: int = 0) -> JobAdmitted:
    where = plan or placement()
    return JobAdmitted(job_id=job_id, attempt=attempt, tenant="team-a", queue="team-a", namespace=namespace,
                       priority=100, replicas=where.pods, placement=where, spec=job_spec or spec(replicas=where.pods),
                       restarts=restarts)


def preempt(job_id: str, attempt: int = 0, *, grace_s: float = 1.0, requeue: bool = True,
            cluster: str = CLUSTER) -> JobPreemptionRequested:
    return JobPreemptionRequested(job_id=job_id, attempt=attempt, reason="higher_priority", grace_period_s=grace_s,
                                  requeue=requeue, cluster=cluster, preemptor="urgent-1")


def scaled(job_id: str, attempt: int = 0, *, plan: PlacementPlan) -> JobScaled:
    return JobScaled(job_id=job_id, attempt=attempt, replicas=plan.pods, placement=plan)
