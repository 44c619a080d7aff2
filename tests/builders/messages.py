"""One valid example of every message type, for round-trip and contract tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas.capacity import NodeRemoved, NodeState, NodeStateObserved, NodeTopology, Taint
from schemas.config import (
    AutoscaleConfig,
    ClusterConfig,
    ClusterDefined,
    CohortConfig,
    CohortDefined,
    ConfigItemDeleted,
    GpuTypeConfig,
    GpuTypeDefined,
    NodeGroupConfig,
    PoolConfig,
    PoolDefined,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    RecurringJobConfig,
    RecurringJobDefined,
    ResourceQuotaConfig,
    TenantConfig,
    TenantDefined,
)
from schemas.decisions import (
    JobAdmitted,
    JobPreemptionRequested,
    JobRejected,
    JobScaled,
    NodePods,
    NodeReleaseRequested,
    NodesRequested,
    PlacementPlan,
)
from schemas.envelope import Envelope, Message, make_envelope
from schemas.intents import CancelJob, ChangePriority, ResumeJob, ScaleJob, SubmitJob, SuspendJob
from schemas.jobs import JobRecord, JobRecorded
from schemas.jobspec import CheckpointSpec, JobSpec, TopologySpec
from schemas.runs import (
    DispatchFailed,
    JobDispatched,
    JobStopped,
    NodesProvisioned,
    PodBound,
    ProvisioningFailed,
    RunAllPodsReady,
    RunDeleted,
    RunEvicted,
    RunFailed,
    RunIdle,
    RunResized,
    RunStarted,
    RunSucceeded,
)
from schemas.status import JobStatusChanged
from schemas.topics import TOPIC_OF
from schemas.usage import BudgetStatusReported, BurstSpendReported, ChargebackRecorded, QueueUsageReported
from tests.builders.jobspecs import job_spec

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def example_spec() -> JobSpec:
    """The job of the example messages: every commonly set field set."""
    return job_spec(
        "train-llm", "team-a", replicas=4, gpus=8, gpu_type="a100", cpu="16", memory="128Gi",
        image="registry.example/train:1.4",
        pod={"command": ["python", "train.py"], "args": ["--epochs", "10"], "env": {"NCCL_DEBUG": "INFO"}},
        priority_class="normal",
        min_replicas=2,
        topology=TopologySpec(level="rack", mode="preferred"),
        runtime_estimate_s=6 * 3600,
        checkpoint=CheckpointSpec(enabled=True, grace_period_s=120, directory="/ckpt"),
        max_runtime_s=7 * 86400,
        labels={"team": "nlp"},
    )


def _placement() -> PlacementPlan:
    return PlacementPlan(cluster="east", nodes=[NodePods(node="east-a100-0", pods=2, nvlink_groups=[0, 1]),
                                                NodePods(node="east-a100-1", pods=2, nvlink_groups=[0, 1])])


def example_messages() -> list[Message]:
    job = "j-0001"
    run = {"job_id": job, "attempt": 1, "cluster": "east", "observed_at": T0}
    node = NodeState(
        cluster="east", node="east-a100-0", gpu_type="a100", gpus_allocatable=8, cpu_m=96000, memory_mb=1 << 20,
        topology=NodeTopology(zone="east-1a", block="b0", rack="rack-0", nvlink_groups=[4, 4]),
        labels={"pool": "training"}, taints=[Taint(key="nvidia.com/gpu")],
    )
    return [
        SubmitJob(job_id=job, tenant="team-a", user="alice", spec=example_spec(), submitted_at=T0,
                  idempotency_key="k1"),
        CancelJob(job_id=job, requested_by="alice", reason="wrong data"),
        SuspendJob(job_id=job, requested_by="alice"),
        ResumeJob(job_id=job, requested_by="alice"),
        ChangePriority(job_id=job, priority_class="high", requested_by="admin"),
        ScaleJob(job_id=job, replicas=2, requested_by="alice"),
        NodeStateObserved(state=node, observed_at=T0),
        NodeRemoved(cluster="east", node="east-a100-3", observed_at=T0),
        JobAdmitted(job_id=job, attempt=1, tenant="team-a", queue="team-a", namespace="team-a", priority=100,
                    replicas=4, placement=_placement(), spec=example_spec()),
        JobPreemptionRequested(job_id=job, attempt=1, reason="higher_priority", grace_period_s=120,
                               preemptor="j-0002", cluster="east"),
        JobScaled(job_id=job, attempt=1, replicas=4, placement=_placement()),
        JobRejected(job_id=job, attempt=0, reason="no_matching_nodes", message="no node has 16 GPUs"),
        NodesRequested(job_id=job, attempt=1, queue="team-a", namespace="team-a", cluster="cloud", group="a100",
                       request="j-0001-a1", nodes=4, gpus_per_node=8, gpu_type="a100", ready_by=T0, gpu_hours=96.0,
                       money=288.0, price_per_gpu_hour=3.0),
        NodeReleaseRequested(cluster="cloud", group="a100", node="cloud-a100-b1", queue="team-a"),
        JobDispatched(**run, namespace="team-a", object_name="j-0001-a1"),
        DispatchFailed(**run, reason="invalid", message="admission webhook denied", retryable=False),
        JobStopped(**run, reason="higher_priority", requeue=True, checkpointed=True),
        RunStarted(**run, pods_running=1, pods_total=4),
        RunAllPodsReady(**run, pods_total=4),
        RunSucceeded(**run),
        RunFailed(**run, reason="Error", message="exit 3", exit_code=3, pod="j-0001-a1-2-x7k2p"),
        RunEvicted(**run, reason="NodeLost", node="east-a100-1"),
        RunDeleted(**run, by="muster"),
        RunResized(**run, replicas=4, pods=[PodBound(name="web-7d9f-x2", index=0, node="east-a100-1")]),
        RunIdle(**run, idle_since=T0, pods=1),
        NodesProvisioned(**run, request="j-0001-a1", group="a100", nodes=["cloud-a100-b1", "cloud-a100-b2"]),
        ProvisioningFailed(**run, request="j-0001-a1", reason="OutOfCapacity", message="no a100 left in the zone"),
        JobStatusChanged(job_id=job, tenant="team-a", queue="team-a", name="train-llm", state="pending", attempt=0,
                         priority_class="normal", replicas=4, gpus=32, position=3, reason="queue_quota_exhausted",
                         message="team-a uses 16/16 gpu:a100", estimated_start=T0, submitted_at=T0, updated_at=T0),
        QueueUsageReported(queue="team-a", cohort="research", as_of=T0, allocated={"gpu:a100": 16},
                           nominal={"gpu:a100": 16}, decayed_gpu_seconds=3.6e6, half_life_s=604800),
        BudgetStatusReported(tenant="team-a", window="month", window_start=T0, gpu_hours_used=120.5,
                             gpu_hour_budget=500),
        BurstSpendReported(queue="team-a", window="month", window_start=T0, window_end=T0 + timedelta(days=30),
                           as_of=T0, gpu_hours=96.0, money=288.0, nodes_held=4),
        ChargebackRecorded(job_id=job, attempt=1, tenant="team-a", queue="team-a", gpu_type="a100", gpus=32,
                           started_at=T0, ended_at=T0, gpu_seconds=0, outcome="succeeded"),
        QueueDefined(item=QueueConfig(name="team-a", cohort="research", tenant="team-a",
                                      quotas={"gpu:a100": ResourceQuotaConfig(nominal=16, borrowing_limit=8)})),
        CohortDefined(item=CohortConfig(name="research")),
        PriorityClassDefined(item=PriorityClassConfig(name="high", value=1000)),
        GpuTypeDefined(item=GpuTypeConfig(name="a100", memory_gb=80, mig_profiles=["1g.10gb", "3g.40gb"])),
        PoolDefined(item=PoolConfig(name="training", node_labels={"pool": "training"})),
        TenantDefined(item=TenantConfig(name="team-a", namespace="team-a", gpu_hour_budget=500)),
        RecurringJobDefined(item=RecurringJobConfig(
            name="team-a.nightly", tenant="team-a", user="alice", created_at=T0,
            spec=example_spec().model_copy(update={"name": "nightly", "schedule": "0 2 * * *"}))),
        ConfigItemDeleted(kind="queue", name="old-queue"),
        ClusterDefined(item=ClusterConfig(name="cloud", burst=True, node_groups=[NodeGroupConfig(
            name="a100", count=0, gpus_per_node=8, gpu_type="a100",
            autoscale=AutoscaleConfig(max=8, provision_delay_s=360, price_per_gpu_hour=3.0))])),
        JobRecorded(job_id=job, queue="team-a", record=JobRecord(
            submission=SubmitJob(job_id=job, tenant="team-a", user="alice", spec=example_spec(), submitted_at=T0),
            priority=100, state="running", attempt=1, replicas=4, placement=_placement(), admitted_at=T0)),
    ]


def example_envelopes(producer: str = "test") -> list[tuple[str, Envelope]]:
    """(topic, envelope) for every message type."""
    return [(TOPIC_OF[m.TYPE], make_envelope(m, producer, occurred_at=T0)) for m in example_messages()]
