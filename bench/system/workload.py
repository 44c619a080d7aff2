"""What the benchmarks submit and the configuration they run under: queues, cohorts, nodes, job specs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from schemas.capacity import NodeState, NodeStateObserved, NodeTopology
from schemas.config import (
    CohortConfig,
    CohortDefined,
    PoolConfig,
    PoolDefined,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    ResourceQuotaConfig,
    TenantConfig,
    TenantDefined,
    gpu_resource,
)
from schemas.envelope import Message
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec, PodTemplate, ResourceRequest, TopologySpec

CLUSTER = "bench"
GPU_TYPE = "h100"
TENANT = "bench"
PRIORITIES = {"low": 10, "normal": 100, "high": 1000, "small": 50, "medium": 100, "large": 200}


@dataclass(frozen=True)
class Fleet:
    """``nodes`` identical GPU nodes, ``nodes_per_rack`` to a rack, ``racks_per_block`` racks to a block;
    with ``pools`` > 0, node i carries the label ``pool=p<i % pools>``."""

    nodes: int
    gpus_per_node: int = 8
    nodes_per_rack: int = 32
    racks_per_block: int = 8
    pools: int = 0
    cpu_m: int = 128_000
    memory_mb: int = 1_048_576

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_name(self, index: int) -> str:
        return f"gpu-{index:05d}"

    def rack_of(self, node: str) -> str:
        return f"r{int(node.rsplit('-', 1)[1]) // self.nodes_per_rack}"

    def node_states(self) -> list[NodeStateObserved]:
        """One ``NodeStateObserved`` per node, as the node-state watcher would publish it."""
        now = datetime.now(UTC)
        out = []
        for i in range(self.nodes):
            rack = i // self.nodes_per_rack
            topology = NodeTopology(zone="z0", block=f"b{rack // self.racks_per_block}", rack=f"r{rack}")
            labels = {"pool": pool_name(i % self.pools)} if self.pools else {}
            state = NodeState(cluster=CLUSTER, node=self.node_name(i), gpu_type=GPU_TYPE,
                              gpus_allocatable=self.gpus_per_node, cpu_m=self.cpu_m, memory_mb=self.memory_mb,
                              topology=topology, labels=labels)
            out.append(NodeStateObserved(state=state, observed_at=now))
        return out


@dataclass(frozen=True)
class QueueLayout:
    """``cohorts`` cohorts of ``queues_per_cohort`` queues, each with ``nominal`` GPUs (borrowing up to
    ``borrowing_limit``); with ``pools`` > 0, pools ``p0``... select the nodes labelled with their name and
    queue i (counting over all cohorts) belongs to pool ``p<i % pools>``."""

    cohorts: int = 1
    queues_per_cohort: int = 1
    nominal: int = 100_000
    borrowing_limit: int | None = None
    pools: int = 0

    def queue_names(self) -> list[str]:
        return [queue_name(c, q) for c in range(self.cohorts) for q in range(self.queues_per_cohort)]

    def messages(self) -> list[Message]:
        """The configuration items in the order the gateway publishes them (referenced items first)."""
        items: list[Message] = [CohortDefined(item=CohortConfig(name=f"cohort-{c}")) for c in range(self.cohorts)]
        items += [PriorityClassDefined(item=PriorityClassConfig(name=n, value=v)) for n, v in PRIORITIES.items()]
        items.append(TenantDefined(item=TenantConfig(name=TENANT, namespace=TENANT)))
        items += [PoolDefined(item=PoolConfig(name=pool_name(p), node_labels={"pool": pool_name(p)}))
                  for p in range(self.pools)]
        quota = ResourceQuotaConfig(nominal=self.nominal, borrowing_limit=self.borrowing_limit)
        items += [
            QueueDefined(item=QueueConfig(name=queue_name(c, q), cohort=f"cohort-{c}", tenant=TENANT,
                                          quotas={gpu_resource(GPU_TYPE): quota},
                                          pool=pool_name(i % self.pools) if self.pools else None))
            for i, (c, q) in enumerate((c, q) for c in range(self.cohorts) for q in range(self.queues_per_cohort))
        ]
        return items


def pool_name(index: int) -> str:
    return f"p{index}"


def queue_name(cohort: int, queue: int) -> str:
    return f"q-{cohort}-{queue}"


def submission(job_id: str, queue: str, *, gpus: int = 1, replicas: int = 1, priority_class: str = "normal",
               runtime_s: float = 1.0, rack: bool = False) -> SubmitJob:
    """A ``SubmitJob`` stamped with this moment as its submission time."""
    spec = JobSpec(
        name=job_id, queue=queue, priority_class=priority_class, replicas=replicas,
        template=PodTemplate(image="registry.example/bench:1",
                             resources=ResourceRequest(gpus=gpus, gpu_type=GPU_TYPE, cpu="1", memory="1Gi")),
        topology=TopologySpec(level="rack") if rack else None,
        runtime_estimate_s=max(runtime_s, 1.0),
    )
    return SubmitJob(job_id=job_id, tenant=TENANT, user="bench", spec=spec, submitted_at=datetime.now(UTC))
