"""Node state onto ``muster.capacity`` (compacted, one key per node): produced by the node-state watcher."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from schemas.envelope import Message, Name, Text

NodeName = Annotated[str, Field(min_length=1, max_length=253)]


class Taint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    key: Annotated[str, Field(min_length=1, max_length=253)]
    value: Annotated[str, Field(max_length=63)] = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class NodeTopology(BaseModel):
    """Where a node sits between nodes (zone / block / rack) and how its GPUs are grouped inside it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    zone: Annotated[str, Field(max_length=63)] = ""
    block: Annotated[str, Field(max_length=63)] = ""
    rack: Annotated[str, Field(max_length=63)] = ""
    nvlink_groups: list[Annotated[int, Field(ge=1, le=64)]] = Field(default_factory=list, max_length=16)
    numa_nodes: int = Field(default=1, ge=1, le=16)


class NodeState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    cluster: Name
    node: NodeName
    gpu_type: Name
    gpus_allocatable: int = Field(ge=0, le=64)
    gpus_in_use: int = Field(default=0, ge=0, le=64)
    cpu_m: int = Field(default=0, ge=0)
    memory_mb: int = Field(default=0, ge=0)
    topology: NodeTopology = Field(default_factory=NodeTopology)
    labels: dict[Annotated[str, Field(max_length=253)], Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict
    )
    taints: list[Taint] = Field(default_factory=list, max_length=64)
    healthy: bool = True
    schedulable: bool = True
    health_reason: Text = ""
    #: GPU sharing: how many of ``gpus_allocatable`` may hold fractional pods, and the MIG slices per
    #: profile (the ``nvidia.com/mig-<profile>`` resources of the device plugin's mixed strategy, on GPUs
    #: that are not in ``gpus_allocatable``)
    gpus_shared: int = Field(default=0, ge=0, le=64, exclude_if=lambda v: not v)  # unset: out of the JSON
    mig: dict[Annotated[str, Field(max_length=32)], Annotated[int, Field(ge=0, le=448)]] = Field(
        default_factory=dict, max_length=16, exclude_if=lambda v: not v
    )
    #: when the node stopped being Ready (its Ready condition's lastTransitionTime); None while healthy
    unhealthy_since: AwareDatetime | None = None

    @model_validator(mode="after")
    def _groups_fit(self) -> NodeState:
        if self.topology.nvlink_groups and sum(self.topology.nvlink_groups) != self.gpus_allocatable:
            raise ValueError("nvlink_groups must add up to gpus_allocatable")
        return self


class NodeStateObserved(Message):
    TYPE: ClassVar[str] = "NodeStateObserved"
    state: NodeState
    observed_at: AwareDatetime

    def key(self) -> str:
        return f"{self.state.cluster}/{self.state.node}"


class NodeRemoved(Message):
    TYPE: ClassVar[str] = "NodeRemoved"
    cluster: Name
    node: NodeName
    observed_at: AwareDatetime

    def key(self) -> str:
        return f"{self.cluster}/{self.node}"


CAPACITY: tuple[type[Message], ...] = (NodeStateObserved, NodeRemoved)
