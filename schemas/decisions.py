"""Decisions onto ``muster.decisions``: produced only by the queue manager, consumed by dispatchers."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from schemas.capacity import NodeName
from schemas.envelope import JobId, Message, Name, Reason, Text
from schemas.jobspec import JobSpec, RoleName

PreemptReasonName = Literal[
    "higher_priority",
    "quota_reclaim",
    "fair_share",
    "max_runtime_exceeded",
    "node_unhealthy",
    "queue_order",
    "consolidation",
    "cancelled",
    "idle",  # an interactive session whose GPUs were idle for its idle timeout: released, then suspended
]


class NodePods(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    node: NodeName
    pods: int = Field(ge=1, le=4096)
    nvlink_groups: list[Annotated[int, Field(ge=-1, le=64)]] = Field(
        default_factory=list, description="NVLink group of each pod on this node; -1 when none"
    )
    # GPU sharing; left out of the JSON when unset, so whole-GPU plans read and serialize as before
    gpu_fraction: float | None = Field(default=None, gt=0, lt=1, description="GPU sharing: fraction of a GPU per pod",
                                       exclude_if=lambda v: v is None)
    gpu_slots: list[Annotated[int, Field(ge=0, le=64)]] = Field(
        default_factory=list, description="the shared GPU (index among the node's shared GPUs) of each pod",
        exclude_if=lambda v: not v,
    )
    mig_profile: Annotated[str, Field(max_length=32)] | None = Field(default=None, description="MIG profile",
                                                                     exclude_if=lambda v: v is None)
    mig_slices: int = Field(default=0, ge=0, le=56, description="MIG slices of mig_profile per pod",
                            exclude_if=lambda v: not v)
    role: RoleName | None = Field(default=None, exclude_if=lambda v: v is None,
                                  description="the role these pods belong to (a job of several roles); None: the "
                                              "job's only role")


class PlacementPlan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    cluster: Name
    nodes: list[NodePods] = Field(min_length=1, max_length=4096)

    @property
    def pods(self) -> int:
        return sum(n.pods for n in self.nodes)

    def of_role(self, role: str | None) -> list[NodePods]:
        """The entries of one role (None or the only role's name: the entries without a role)."""
        return [n for n in self.nodes if n.role == role or (n.role is None and role in (None, ""))]

    def pods_of(self, role: str | None) -> int:
        return sum(n.pods for n in self.of_role(role))


class _JobDecision(Message):
    job_id: JobId
    attempt: int = Field(ge=0)

    def key(self) -> str:
        return self.job_id


class JobAdmitted(_JobDecision):
    """Run ``replicas`` pods of the job on ``placement``; self-contained so a dispatcher needs nothing else."""

    TYPE: ClassVar[str] = "JobAdmitted"
    tenant: Name
    queue: Name
    namespace: Name
    priority: int
    replicas: int = Field(ge=1, le=4096)
    placement: PlacementPlan
    borrowed: bool = False
    spec: JobSpec
    #: whole-gang restarts the job already spent on its own failures in earlier attempts that ended with an
    #: infrastructure failure: the attempt starts with that many of its ``spec.max_restarts`` used
    restarts: int = Field(default=0, ge=0)
    bought: bool = Field(default=False, exclude_if=lambda v: not v,
                         description="runs on nodes bought for it: its queue's burst budget pays for them, so the "
                                     "attempt is charged neither to the queue's quota nor to its usage")


class JobPreemptionRequested(_JobDecision):
    """Stop the whole gang after its grace period (checkpoint first); ``requeue`` says whether it comes back."""

    TYPE: ClassVar[str] = "JobPreemptionRequested"
    reason: PreemptReasonName
    grace_period_s: float = Field(ge=0, le=3600)
    preemptor: JobId | None = None
    requeue: bool = True
    cluster: Name


class JobScaled(_JobDecision):
    TYPE: ClassVar[str] = "JobScaled"
    replicas: int = Field(ge=1, le=4096)
    placement: PlacementPlan


class JobRejected(_JobDecision):
    TYPE: ClassVar[str] = "JobRejected"
    reason: Reason
    message: Text


class NodesRequested(_JobDecision):
    """Buy ``nodes`` nodes of node group ``group`` of ``cluster`` for the waiting job (its attempt): the dispatcher
    asks the cluster's autoscaler with a ``ProvisioningRequest`` named ``request`` in ``namespace``. Each node is
    expected to look like the group's (``gpus_per_node`` GPUs of ``gpu_type``) by ``ready_by``; the queue's
    burst budget was charged ``gpu_hours`` and ``money`` for it up front (the quota accountant charges the nodes'
    real time from their answer to their release at ``price_per_gpu_hour``)."""

    TYPE: ClassVar[str] = "NodesRequested"
    queue: Name
    namespace: Name
    cluster: Name
    group: Name
    request: Name
    nodes: int = Field(ge=1, le=4096)
    gpus_per_node: int = Field(ge=0, le=64)
    gpu_type: Name
    ready_by: AwareDatetime
    gpu_hours: float = Field(ge=0)
    money: float = Field(ge=0)
    price_per_gpu_hour: float | None = Field(default=None, ge=0, exclude_if=lambda v: v is None,
                                             description="what a node of the group costs per GPU and hour")


class NodeReleaseRequested(Message):
    """Give back a bought node of ``group`` that has held no pod for the group's idle time: the dispatcher marks
    it for scale-down (``muster.dev/scale-down`` taint), and the cluster's autoscaler removes it. ``queue`` is
    the queue whose burst budget paid for the node (None for a node of the group that was not bought)."""

    TYPE: ClassVar[str] = "NodeReleaseRequested"
    cluster: Name
    group: Name
    node: NodeName
    queue: Name | None = Field(default=None, exclude_if=lambda v: v is None)

    def key(self) -> str:
        return f"{self.cluster}/{self.node}"


DECISIONS: tuple[type[Message], ...] = (JobAdmitted, JobPreemptionRequested, JobScaled, JobRejected, NodesRequested,
                                        NodeReleaseRequested)
