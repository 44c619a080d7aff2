"""Hand-made log messages for the replay tests: a tiny cluster's nodes and configuration, jobs' histories."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from schemas.capacity import NodeState, NodeStateObserved, NodeTopology
from schemas.config import (
    CohortConfig,
    CohortDefined,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
)
from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobRejected, NodePods, PlacementPlan
from schemas.envelope import Envelope, Message, make_envelope
from schemas.intents import SubmitJob
from schemas.jobspec import CheckpointSpec, JobSpec
from schemas.kube import NODE_GROUP
from schemas.runs import JobStopped, RunDeleted, RunFailed, RunStarted, RunSucceeded
from schemas.status import JobState, JobStatusChanged
from tests.builders.jobspecs import job_spec

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@dataclass
class Log:
    """Envelopes in the order a test adds them (the reconstruction orders them by time itself)."""

    envelopes: list[Envelope] = field(default_factory=list)
    specs: dict[str, JobSpec] = field(default_factory=dict)
    submitted: dict[str, float] = field(default_factory=dict)
    t0: datetime = T0  # time 0 of the log's seconds

    def at(self, seconds: float) -> datetime:
        return self.t0 + timedelta(seconds=seconds)

    def add(self, message: Message, t: float) -> Log:
        self.envelopes.append(make_envelope(message, "test", occurred_at=self.at(t)))
        return self

    def cluster(self, nodes: int = 2, gpus: int = 8, quota: int = 8, t: float = -100.0) -> Log:
        for i in range(nodes):
            state = NodeState(cluster="east", node=f"east-a100-{i}", gpu_type="a100", gpus_allocatable=gpus,
                              cpu_m=96_000, memory_mb=1024 * 1024, labels={NODE_GROUP: "a100", "pool": "training"},
                              topology=NodeTopology(zone="z", block="b", rack=f"rack-{i % 2}"))
            self.add(NodeStateObserved(state=state, observed_at=self.at(t)), t)
        self.add(CohortDefined(item=CohortConfig(name="research")), t)
        self.add(PriorityClassDefined(item=PriorityClassConfig(name="normal", value=100)), t)
        for q in ("team-a", "team-b"):
            self.add(QueueDefined(item=QueueConfig(name=q, cohort="research", tenant=q,
                                                   quotas={"gpu:a100": {"nominal": quota}})), t)  # type: ignore[dict-item]
        return self

    def submit(self, job_id: str, queue: str, t: float, *, pods: int = 1, gpus: int = 8, checkpoint: bool = False,
               estimate: float | None = None, priority_class: str = "normal") -> Log:
        """A submission of job ``job_id`` (also its name) at ``t``: ``pods`` pods of ``gpus`` a100 GPUs (one
        whole node of ``cluster``'s each, by default), checkpointing or not, with a runtime ``estimate``."""
        spec = job_spec(job_id, queue, replicas=pods, gpus=gpus, gpu_type="a100", image="img",
                        priority_class=priority_class, checkpoint=CheckpointSpec(enabled=checkpoint),
                        runtime_estimate_s=estimate)
        return self.submit_spec(job_id, spec, t)

    def submit_spec(self, job_id: str, s: JobSpec, t: float, user: str = "u") -> Log:
        """A submission of ``s`` by ``user`` of the tenant named like its queue."""
        self.specs[job_id] = s
        self.submitted[job_id] = t
        return self.add(SubmitJob(job_id=job_id, tenant=s.queue, user=user, spec=s, submitted_at=self.at(t)), t)

    def node(self, name: str, t: float = -100.0, **fields: object) -> Log:
        """One more node of cluster ``east`` (an 8-GPU a100 unless ``fields`` say otherwise)."""
        state = NodeState.model_validate({"cluster": "east", "node": name, "gpu_type": "a100", "gpus_allocatable": 8,
                                          "cpu_m": 96_000, "memory_mb": 1024 * 1024, **fields})
        return self.add(NodeStateObserved(state=state, observed_at=self.at(t)), t)

    def admit(self, job_id: str, t: float, attempt: int = 0) -> Log:
        s = self.specs[job_id]
        plan = PlacementPlan(cluster="east", nodes=[NodePods(node="east-a100-0", pods=s.replicas)])
        return self.add(JobAdmitted(job_id=job_id, attempt=attempt, tenant=s.queue, queue=s.queue,
                                    namespace=s.queue, priority=100, replicas=s.replicas, placement=plan, spec=s), t)

    def start(self, job_id: str, t: float, attempt: int = 0) -> Log:
        pods = self.specs[job_id].replicas
        return self.add(RunStarted(job_id=job_id, attempt=attempt, cluster="east", observed_at=self.at(t),
                                   pods_running=pods, pods_total=pods), t)

    def succeed(self, job_id: str, t: float, attempt: int = 0) -> Log:
        self.add(RunSucceeded(job_id=job_id, attempt=attempt, cluster="east", observed_at=self.at(t)), t)
        return self.status(job_id, "succeeded", t, attempt)

    def fail(self, job_id: str, t: float, attempt: int = 0) -> Log:
        self.add(RunFailed(job_id=job_id, attempt=attempt, cluster="east", observed_at=self.at(t),
                           reason="DeadlineExceeded"), t)
        return self.status(job_id, "failed", t, attempt)

    def preempt(self, job_id: str, t: float, stopped: float, attempt: int = 0) -> Log:
        self.add(JobPreemptionRequested(job_id=job_id, attempt=attempt, reason="quota_reclaim", grace_period_s=30,
                                        cluster="east"), t)
        return self.add(JobStopped(job_id=job_id, attempt=attempt, cluster="east", observed_at=self.at(stopped),
                                   reason="preempted", requeue=True, checkpointed=True), stopped)

    def cancel(self, job_id: str, t: float, attempt: int = 0, running: bool = False) -> Log:
        if running:
            self.add(JobPreemptionRequested(job_id=job_id, attempt=attempt, reason="cancelled", grace_period_s=0,
                                            requeue=False, cluster="east"), t)
            self.add(RunDeleted(job_id=job_id, attempt=attempt, cluster="east", observed_at=self.at(t), by="muster"), t)
        return self.status(job_id, "cancelled", t, attempt)

    def reject(self, job_id: str, t: float) -> Log:
        self.add(JobRejected(job_id=job_id, attempt=0, reason="unschedulable", message="never fits"), t)
        return self.status(job_id, "rejected", t)

    def status(self, job_id: str, state: JobState, t: float, attempt: int = 0) -> Log:
        s = self.specs[job_id]
        return self.add(JobStatusChanged(job_id=job_id, tenant=s.queue, queue=s.queue, name=s.name, state=state,
                                         attempt=attempt, priority_class=s.priority_class, replicas=s.replicas,
                                         gpus=s.total_gpus, submitted_at=self.at(self.submitted[job_id]),
                                         updated_at=self.at(t)), t)
