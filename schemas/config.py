"""Configuration messages: queues, cohorts, quotas, priority classes, GPU types, pools, tenants, clusters.

The same models describe the cluster file a simulator run or ``muster up`` reads (YAML), and the
``ConfigurationChanged`` messages an administrator publishes on the config topic.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from schemas.envelope import Message, Name
from schemas.jobspec import JobSpec

ResourceName = Annotated[str, Field(min_length=1, max_length=80, pattern=r"^(cpu|memory|gpu:[a-z0-9][-a-z0-9.]*)$")]
#: a GPU type's quota resource is this prefix and the type: ``gpu:a100`` (the core names them the same way,
#: ``services.core.model.gpu_resource``)
GPU_PREFIX = "gpu:"


def gpu_resource(gpu_type: str) -> str:
    """The quota resource name of one GPU type, e.g. ``gpu:a100``."""
    return f"{GPU_PREFIX}{gpu_type}"


def is_gpu_resource(resource: str) -> bool:
    """Whether a quota resource name is a GPU type's (not ``cpu`` or ``memory``)."""
    return resource.startswith(GPU_PREFIX)


def gpu_type_of(resource: str) -> str | None:
    """The GPU type a quota resource name names (None: not a GPU resource)."""
    return resource[len(GPU_PREFIX):] if is_gpu_resource(resource) else None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResourceQuotaConfig(_Strict):
    """Quota of one resource (``gpu:<type>``, ``cpu`` in millicores, ``memory`` in MiB) for a queue."""

    nominal: int = Field(ge=0)
    borrowing_limit: int | None = Field(default=None, ge=0, description="None: may borrow without limit")
    lending_limit: int | None = Field(default=None, ge=0, description="None: lends all unused nominal quota")


class BurstBudgetConfig(_Strict):
    """What a queue may spend on bought nodes per window: GPU-hours and/or money (at least one). A queue
    without a burst budget never has nodes bought for it."""

    gpu_hours: float | None = Field(default=None, ge=0)
    money: float | None = Field(default=None, ge=0)
    window: Literal["day", "week", "month"] = "month"

    @model_validator(mode="after")
    def _some_limit(self) -> BurstBudgetConfig:
        if self.gpu_hours is None and self.money is None:
            raise ValueError("burst_budget: give gpu_hours, money or both")
        return self


class QueueConfig(_Strict):
    name: Name
    cohort: Name | None = None
    tenant: Name = "default"
    weight: float = Field(default=1.0, gt=0, le=1000)
    quotas: dict[ResourceName, ResourceQuotaConfig] = Field(default_factory=dict)
    user_limit_gpus: int | None = Field(default=None, ge=0)
    allow_privileged: bool = False
    pool: Name | None = Field(
        default=None,
        description="the pool whose nodes this queue's jobs run on, and whose queue-manager shard schedules them; "
                    "none: any node of the shard that owns the pool 'default'",
    )
    burst_budget: BurstBudgetConfig | None = Field(
        default=None, description="what may be spent on nodes bought for this queue's jobs (none: nothing)")


class CohortConfig(_Strict):
    name: Name
    parent: Name | None = None
    weight: float = Field(default=1.0, gt=0, le=1000)


class PriorityClassConfig(_Strict):
    name: Name
    value: int = Field(ge=-1_000_000, le=1_000_000_000)
    preemptible: bool = True
    description: str = ""


class GpuTypeConfig(_Strict):
    name: Name
    memory_gb: int | None = Field(default=None, ge=0)
    mig_profiles: list[str] = Field(default_factory=list)


class PoolConfig(_Strict):
    """A named set of nodes, selected by label, that queues name as their ``pool``. A node belongs to the
    first pool (by name) whose ``node_labels`` it carries, or to the pool ``default``; each queue-manager
    shard (``--pool``) schedules the queues and nodes of its pools only."""

    name: Name
    node_labels: dict[str, str] = Field(default_factory=dict)


class TenantConfig(_Strict):
    name: Name
    namespace: Name
    gpu_hour_budget: float | None = Field(default=None, ge=0)
    budget_window: Literal["day", "week", "month"] = "month"
    allow_non_preemptible: bool = Field(
        default=False,
        description="whether the tenant's jobs may be non-preemptible (`preemptible: false`, or a priority class "
                    "that is not preemptible); such work still runs only within its queue's nominal quota",
    )
    queue_quota: dict[ResourceName, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict,
        description="what the tenant's queues' nominal quotas may add up to, per resource, when a tenant "
                    "administrator creates or changes one of them (a resource not named: 0, so tenant "
                    "administrators may not give their queues any quota of it); administrators are not bound by it",
    )
    queue_cohorts: list[Name] = Field(
        default_factory=list,
        description="the cohorts a tenant administrator may put the tenant's queues in (none: only the cohort an "
                    "administrator gave the queue, or no cohort)",
    )


class TopologyConfig(_Strict):
    zone: str = "zone-0"
    block: str = "block-0"
    racks: int = Field(default=1, ge=1, description="nodes of the group are spread over this many racks")
    rack_prefix: str = "rack"


class AutoscaleConfig(_Strict):
    """A node group that can grow: nodes are bought for waiting jobs (within their queues' burst budgets) and
    given back after ``idle_s`` without pods, never below ``min`` nor above ``max``."""

    min: int = Field(default=0, ge=0, le=100_000)
    max: int = Field(ge=0, le=100_000)
    provision_delay_s: float = Field(
        default=300.0, ge=0, description="how long the cloud takes from a request to a ready node")
    price_per_gpu_hour: float = Field(default=0.0, ge=0, description="what a bought node costs per GPU and hour")
    idle_s: float = Field(default=600.0, ge=0, description="a bought node without pods this long is given back")

    @model_validator(mode="after")
    def _min_below_max(self) -> AutoscaleConfig:
        if self.min > self.max:
            raise ValueError("autoscale: min must not exceed max")
        return self


class NodeGroupConfig(_Strict):
    name: Name
    count: int = Field(ge=0, le=100_000)
    gpus_per_node: int = Field(ge=0, le=64)
    gpu_type: Name = "generic"
    cpu: int = Field(default=64, ge=0, description="cores per node")
    memory_gb: int = Field(default=512, ge=0)
    nvlink_groups: list[int] = Field(default_factory=list)
    topology: TopologyConfig = Field(default_factory=TopologyConfig)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[str] = Field(default_factory=list)
    shared_gpus: int = Field(
        default=0, ge=0, le=64,
        description="GPU sharing: how many whole GPUs of each node may hold fractional pods (gpu_fraction)",
    )
    mig_gpus: int = Field(default=0, ge=0, le=64, description="GPUs of each node cut into MIG slices (mig_layout)")
    mig_layout: dict[str, int] = Field(
        default_factory=dict,
        description="the MIG slices one MIG GPU is cut into, per profile: {1g.10gb: 7}, {3g.40gb: 1, 1g.10gb: 4}",
    )
    autoscale: AutoscaleConfig | None = Field(
        default=None, description="the group can grow and shrink (count: the nodes it starts with)")

    @model_validator(mode="after")
    def _groups_match_gpus(self) -> NodeGroupConfig:
        if self.nvlink_groups and sum(self.nvlink_groups) != self.gpus_per_node - self.mig_gpus:
            raise ValueError("nvlink_groups must add up to gpus_per_node (less mig_gpus)")
        if self.mig_gpus > self.gpus_per_node:
            raise ValueError("mig_gpus must not exceed gpus_per_node")
        if bool(self.mig_gpus) != bool(self.mig_layout):
            raise ValueError("mig_gpus and mig_layout go together")
        if self.shared_gpus > self.gpus_per_node - self.mig_gpus:
            raise ValueError("shared_gpus must not exceed the whole GPUs (gpus_per_node less mig_gpus)")
        for profile, n in self.mig_layout.items():
            m = re.match(r"^([1-9][0-9]?)g\.[0-9]+gb(\+[a-z0-9]+)?$", profile)
            if m is None or n < 1:
                raise ValueError(f"mig_layout: not a MIG profile and a count: {profile}: {n}")
        if sum(int(p.split("g.", 1)[0]) * n for p, n in self.mig_layout.items()) > 7:
            raise ValueError("mig_layout takes more than the seven compute slices of one GPU")
        if self.autoscale is not None and self.count > self.autoscale.max:
            raise ValueError("count must not exceed autoscale.max")
        return self

    @property
    def whole_gpus(self) -> int:
        """The GPUs of each node advertised as whole nvidia.com/gpu (those not cut into MIG slices)."""
        return self.gpus_per_node - self.mig_gpus

    @property
    def mig_slices(self) -> dict[str, int]:
        """MIG slices per profile of each node (its MIG GPUs times the layout)."""
        return {p: n * self.mig_gpus for p, n in self.mig_layout.items()}


class ClusterConfig(_Strict):
    name: Name
    node_groups: list[NodeGroupConfig] = Field(default_factory=list)
    burst: bool = Field(
        default=False,
        description="a cloud cluster to pour over into: every node group of it must be able to grow (autoscale); "
                    "it usually starts empty (count 0)",
    )

    @property
    def grows(self) -> bool:
        """Whether a node group of the cluster can grow (``autoscale``)."""
        return any(g.autoscale is not None for g in self.node_groups)

    @model_validator(mode="after")
    def _burst_groups_grow(self) -> ClusterConfig:
        if self.burst:
            fixed = [g.name for g in self.node_groups if g.autoscale is None]
            if fixed:
                raise ValueError(f"cluster {self.name!r} is a burst cluster: node group(s) {', '.join(fixed)} "
                                 "need autoscale")
        return self


class MusterConfig(_Strict):
    """The whole configuration: clusters with their node groups, queues, cohorts and the rest."""

    clusters: list[ClusterConfig] = Field(default_factory=list)
    queues: list[QueueConfig] = Field(default_factory=list)
    cohorts: list[CohortConfig] = Field(default_factory=list)
    priority_classes: list[PriorityClassConfig] = Field(default_factory=list)
    gpu_types: list[GpuTypeConfig] = Field(default_factory=list)
    pools: list[PoolConfig] = Field(default_factory=list)
    tenants: list[TenantConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references_resolve(self) -> MusterConfig:
        cohorts = {c.name for c in self.cohorts}
        for q in self.queues:
            if q.cohort is not None and q.cohort not in cohorts:
                raise ValueError(f"queue {q.name!r}: unknown cohort {q.cohort!r}")
        for c in self.cohorts:
            if c.parent is not None and c.parent not in cohorts:
                raise ValueError(f"cohort {c.name!r}: unknown parent {c.parent!r}")
        for kind, names in (
            ("queue", [q.name for q in self.queues]),
            ("cohort", [c.name for c in self.cohorts]),
            ("cluster", [c.name for c in self.clusters]),
        ):
            dupes = {n for n in names if names.count(n) > 1}
            if dupes:
                raise ValueError(f"duplicate {kind} names: {sorted(dupes)}")
        profiles = {g.name: set(g.mig_profiles) for g in self.gpu_types if g.mig_profiles}
        for cluster in self.clusters:
            for group in cluster.node_groups:
                unknown = set(group.mig_layout) - profiles.get(group.gpu_type, set(group.mig_layout))
                if unknown:
                    raise ValueError(f"node group {group.name!r}: MIG profiles {sorted(unknown)} are not among "
                                     f"the mig_profiles of GPU type {group.gpu_type!r}")
        return self

    def priority_value(self, name: str) -> int | None:
        for pc in self.priority_classes:
            if pc.name == name:
                return pc.value
        return None


# ---------------------------------------------------------------- messages on muster.config (compacted)


class _Defined(Message):
    KIND: ClassVar[str] = ""

    def key(self) -> str:
        item = getattr(self, "item", None)
        name = getattr(self, "name", None) if item is None else item.name
        return f"{self.KIND}/{name}"


class QueueDefined(_Defined):
    TYPE: ClassVar[str] = "QueueDefined"
    KIND: ClassVar[str] = "queue"
    item: QueueConfig


class CohortDefined(_Defined):
    TYPE: ClassVar[str] = "CohortDefined"
    KIND: ClassVar[str] = "cohort"
    item: CohortConfig


class PriorityClassDefined(_Defined):
    TYPE: ClassVar[str] = "PriorityClassDefined"
    KIND: ClassVar[str] = "priority-class"
    item: PriorityClassConfig


class GpuTypeDefined(_Defined):
    TYPE: ClassVar[str] = "GpuTypeDefined"
    KIND: ClassVar[str] = "gpu-type"
    item: GpuTypeConfig


class PoolDefined(_Defined):
    TYPE: ClassVar[str] = "PoolDefined"
    KIND: ClassVar[str] = "pool"
    item: PoolConfig


class TenantDefined(_Defined):
    TYPE: ClassVar[str] = "TenantDefined"
    KIND: ClassVar[str] = "tenant"
    item: TenantConfig


class ClusterDefined(_Defined):
    """A cluster with node groups that can grow (``autoscale``): the queue manager buys nodes of them for waiting
    jobs of queues with a burst budget. The gateway publishes the clusters of its configuration file that have
    such a group (a cluster of fixed groups needs no definition: its nodes are observed)."""

    TYPE: ClassVar[str] = "ClusterDefined"
    KIND: ClassVar[str] = "cluster"
    item: ClusterConfig


class RecurringJobConfig(_Strict):
    """A job spec submitted again on its cron ``spec.schedule`` (UTC), like a Kubernetes CronJob.

    ``name`` is unique across tenants (the gateway uses ``<tenant>.<spec name>``). Each firing becomes a
    ``SubmitJob`` whose job id is derived from (name, firing time), so replicas and restarts that fire
    the same time produce the same job, which the queue manager admits once.
    """

    name: Name
    tenant: Name
    user: Annotated[str, Field(min_length=1, max_length=128)]
    spec: JobSpec
    suspended: bool = False
    created_at: AwareDatetime

    @model_validator(mode="after")
    def _has_schedule(self) -> RecurringJobConfig:
        if self.spec.schedule is None:
            raise ValueError("a recurring job needs spec.schedule (a cron expression)")
        return self


class RecurringJobDefined(_Defined):
    TYPE: ClassVar[str] = "RecurringJobDefined"
    KIND: ClassVar[str] = "recurring-job"
    item: RecurringJobConfig


class ConfigItemDeleted(Message):
    TYPE: ClassVar[str] = "ConfigItemDeleted"
    kind: Literal["queue", "cohort", "priority-class", "gpu-type", "pool", "tenant", "recurring-job"]
    name: Name

    def key(self) -> str:
        return f"{self.kind}/{self.name}"


CONFIG: tuple[type[Message], ...] = (
    QueueDefined, CohortDefined, PriorityClassDefined, GpuTypeDefined, PoolDefined, TenantDefined,
    RecurringJobDefined, ConfigItemDeleted, ClusterDefined,
)
