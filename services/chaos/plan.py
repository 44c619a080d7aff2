"""The size and pacing of a chaos run, and the cluster file it runs on."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.config import (
    ClusterConfig,
    CohortConfig,
    MusterConfig,
    NodeGroupConfig,
    PriorityClassConfig,
    QueueConfig,
    ResourceQuotaConfig,
    TenantConfig,
    TopologyConfig,
    gpu_resource,
)
from schemas.kube import GPU_RESOURCE

TENANTS = ("team-a", "team-b")
GPU_TYPE = "a100"
CLUSTER = "chaos"


@dataclass(frozen=True)
class ChaosPlan:
    """How many jobs and faults, over how long. Times are seconds from the start of the workload."""

    seed: int = 1
    jobs: int = 300
    kills: int = 20
    broker_restarts: int = 1
    outages: int = 4
    watch_drops: int = 4
    duration_s: float = 300.0  # jobs and faults are spread over this window
    drain_timeout_s: float = 300.0  # after the window: how long every job may take to end
    orphan_grace_s: float = 20.0  # how long Kubernetes objects of ended jobs may linger
    nodes: int = 4
    gpus_per_node: int = 8
    nominal: int = 16
    borrowing_limit: int = 8
    min_runtime_s: float = 1.0
    #: Kafka brokers; with more than one, a broker restart stops one node (chosen by the seed) while the
    #: others serve, and the topics have replication factor 3 and min.insync.replicas 2 from three on
    brokers: int = 1
    #: kill -9 of a broker of a cluster (alternately the leader of most partitions and the active
    #: controller, by the seed), restarted after a few seconds; none with one broker
    broker_kills: int = 0

    @classmethod
    def quick(cls, seed: int = 1, brokers: int = 1) -> ChaosPlan:
        """About 30 jobs, 5 kills and one broker restart; about two minutes on a small machine."""
        return cls(seed=seed, jobs=30, kills=5, broker_restarts=1, outages=2, watch_drops=2, duration_s=45.0,
                   drain_timeout_s=120.0, orphan_grace_s=15.0, brokers=brokers,
                   broker_kills=2 if brokers > 1 else 0)

    @classmethod
    def sized(cls, seed: int, jobs: int, kills: int, nodes: int = 4, brokers: int = 1) -> ChaosPlan:
        """A run of ``jobs`` and ``kills`` on ``nodes`` 8-GPU nodes (each tenant's nominal quota is half the
        cluster, its borrowing limit a quarter): the window grows with the jobs, shrinks with the cluster,
        and grows with the kills, so faults and jobs interleave. The drain may take twice the window: the
        window is sized to the cluster's throughput with no faults, and a drain ends as soon as every job
        has, so a longer bound costs a run that holds nothing (a 5,000-job run on three brokers with 30
        broker kills was still ending 46 jobs a minute when a drain as long as the window ran out)."""
        duration = max(45.0, jobs * 4.0 / nodes, kills * 8.0)  # about the cluster's throughput of this workload
        gpus = nodes * cls.gpus_per_node
        return cls(seed=seed, jobs=jobs, kills=kills, broker_restarts=max(1, kills // 15),
                   outages=max(2, kills // 4), watch_drops=max(2, kills // 4), duration_s=duration,
                   drain_timeout_s=max(180.0, 2 * duration), nodes=nodes, nominal=gpus // 2,
                   borrowing_limit=gpus // 4, brokers=brokers,
                   broker_kills=max(2, kills // 3) if brokers > 1 else 0)


def chaos_config(plan: ChaosPlan) -> MusterConfig:
    """One cluster of identical GPU nodes, two tenants' queues in one cohort with borrowing, three priorities."""
    cluster = ClusterConfig(name=CLUSTER, node_groups=[NodeGroupConfig(
        name=GPU_TYPE, count=plan.nodes, gpus_per_node=plan.gpus_per_node, gpu_type=GPU_TYPE, cpu=96,
        memory_gb=1024, topology=TopologyConfig(zone=f"{CLUSTER}-z", block="b0", racks=2),
        taints=[GPU_RESOURCE],
    )])
    quota = ResourceQuotaConfig(nominal=plan.nominal, borrowing_limit=plan.borrowing_limit)
    return MusterConfig(
        clusters=[cluster],
        cohorts=[CohortConfig(name="research")],
        queues=[QueueConfig(name=t, cohort="research", tenant=t, quotas={gpu_resource(GPU_TYPE): quota})
                for t in TENANTS],
        priority_classes=[PriorityClassConfig(name="low", value=10), PriorityClassConfig(name="normal", value=100),
                          PriorityClassConfig(name="high", value=1000)],
        tenants=[TenantConfig(name=t, namespace=t) for t in TENANTS],
    )
