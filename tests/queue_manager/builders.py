"""Builders for queue-manager tests: configuration, nodes, submissions, run events, a folded state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schemas.capacity import NodeState, NodeStateObserved
from schemas.config import (
    CohortConfig,
    CohortDefined,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    ResourceQuotaConfig,
    TenantConfig,
    TenantDefined,
)
from schemas.envelope import Message
from schemas.intents import SubmitJob
from schemas.jobspec import CheckpointSpec
from services.queue_manager.queue_state import Out, QueueState
from tests.builders.jobspecs import job_spec

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
NOW = T0.timestamp() + 10.0
CLUSTER = "east"


def config_messages(gpus: int = 64) -> list[Message]:
    return [
        CohortDefined(item=CohortConfig(name="research")),
        QueueDefined(item=QueueConfig(name="team-a", cohort="research", tenant="team-a",
                                      quotas={"gpu:a100": ResourceQuotaConfig(nominal=gpus),
                                              "cpu": ResourceQuotaConfig(nominal=1_000_000),
                                              "memory": ResourceQuotaConfig(nominal=1 << 30)})),
        PriorityClassDefined(item=PriorityClassConfig(name="normal", value=100)),
        PriorityClassDefined(item=PriorityClassConfig(name="high", value=1000)),
        TenantDefined(item=TenantConfig(name="team-a", namespace="ns-team-a")),
    ]


def node(name: str = "east-a100-0", gpus: int = 8, *, healthy: bool = True,
         unhealthy_since: datetime | None = None) -> NodeStateObserved:
    state = NodeState(cluster=CLUSTER, node=name, gpu_type="a100", gpus_allocatable=gpus, cpu_m=96_000,
                      memory_mb=1 << 20, healthy=healthy, unhealthy_since=unhealthy_since)
    return NodeStateObserved(state=state, observed_at=T0)


def submit(job_id: str, *, gpus: int = 8, replicas: int = 1, priority_class: str = "normal",
           queue: str = "team-a", offset_s: float = 0.0, **spec: Any) -> SubmitJob:
    """alice's submission of job ``job_id`` (also its name), ``offset_s`` after T0: ``replicas`` pods of
    ``gpus`` a100 GPUs, 1 CPU and 1Gi each, checkpointing with a 5 s grace period; ``spec``: other fields."""
    job = job_spec(job_id, queue, replicas=replicas, gpus=gpus, cpu="1", memory="1Gi", priority_class=priority_class,
                   checkpoint=CheckpointSpec(enabled=True, grace_period_s=5), **spec)
    return SubmitJob(job_id=job_id, tenant="team-a", user="alice", spec=job,
                     submitted_at=datetime.fromtimestamp(T0.timestamp() + offset_s, UTC))


def run_fields(job_id: str, attempt: int = 0) -> dict[str, Any]:
    return {"job_id": job_id, "attempt": attempt, "cluster": CLUSTER, "observed_at": T0}


def folded_state(nodes: int = 1, gpus_per_node: int = 8, quota: int = 64) -> QueueState:
    qs = QueueState()
    for msg in config_messages(quota):
        qs.fold_config(msg.key(), msg)
    for i in range(nodes):
        n = node(f"east-a100-{i}", gpus_per_node)
        qs.fold_capacity(n.key(), n)
    return qs


def of_type(outs: list[Out], cls: type[Message]) -> list[Any]:
    return [o.message for o in outs if isinstance(o.message, cls)]


def queue_manager() -> Any:
    """A ``QueueManager`` (no broker) holding the test configuration and one node."""
    from services.queue_manager.service import QueueManager
    from services.runtime.kafka import KafkaSettings

    qm = QueueManager(KafkaSettings(bootstrap="127.0.0.1:1"), clock=lambda: NOW)
    for msg in config_messages():
        qm.state.fold_config(msg.key(), msg)
    n = node()
    qm.state.fold_capacity(n.key(), n)
    return qm
