"""Response bodies of the dashboard's read API (``/v1/dashboard``) and of the live stream (``/v1/stream``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.api import Action, AttemptObjects, HistoryItem, JobEvent, JobRow
from schemas.decisions import PlacementPlan
from schemas.jobspec import JobSpec
from services.gateway.auth import Role

JobSort = Literal["submitted_at", "updated_at", "name", "state", "queue", "tenant", "gpus", "position",
                  "estimated_start", "priority_class"]
JobGroup = Literal["queue", "state"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WhoAmI(_Body):
    tenant: str
    user: str
    role: Role
    may_act: bool = Field(description="whether the caller may cancel, suspend, resume, re-prioritise or scale "
                                      "its tenant's jobs")


class Facets(_Body):
    """The values each filter of the jobs table can take among the jobs the caller may see."""

    tenant: list[str]
    queue: list[str]
    state: list[str]
    priority_class: list[str]
    cluster: list[str]
    user: list[str]


class JobPage(_Body):
    items: list[JobRow]
    total: int = Field(description="matching jobs")
    offset: int
    limit: int
    groups: dict[str, int] = Field(default_factory=dict, description="matching jobs per group, when grouped")
    facets: Facets


class GpuCount(_Body):
    cluster: str
    gpu_type: str
    nodes: int
    allocatable: int
    in_use: int
    free: int
    unhealthy_nodes: int = 0


class QueueWait(_Body):
    queue: str
    tenant: str
    pending: int
    oldest_wait_s: float = Field(description="how long the queue's oldest pending job has waited")


class Overview(_Body):
    as_of: datetime
    jobs_by_state: dict[str, int]
    gpus: list[GpuCount]
    admissions_per_minute: list[int] = Field(description="jobs admitted in each of the last 15 minutes, oldest first")
    longest_waits: list[QueueWait]


class QuotaLine(_Body):
    resource: str
    nominal: int
    in_use: int
    borrowed: int
    lent: int = Field(description="nominal quota other queues of the cohort are using")
    borrowing_limit: int | None
    lending_limit: int | None


class QueueRow(_Body):
    name: str
    tenant: str
    cohort: str | None
    weight: float
    quotas: list[QuotaLine]
    running: int
    waiting: int
    gpus_in_use: int
    fair_share: float | None = Field(description="the queue's weight over the weights of its cohort's busy queues")
    actual_share: float | None = Field(description="the queue's GPUs in use over its cohort's")
    budget_window: str | None = None
    gpu_hours_used: float | None = None
    gpu_hour_budget: float | None = None


class CohortNode(_Body):
    name: str
    parent: str | None
    weight: float
    queues: list[str]
    children: list[str]


class QueuesPage(_Body):
    cohorts: list[CohortNode]
    queues: list[QueueRow]


class GpuSlot(_Body):
    job_id: str | None = Field(description="the job on this GPU; null when free, or when it is another tenant's")
    name: str | None = None
    tenant: str | None = None
    busy: bool


class NodeCell(_Body):
    node: str
    gpu_type: str
    healthy: bool
    schedulable: bool
    health_reason: str
    gpus: list[GpuSlot]


class RackGroup(_Body):
    cluster: str
    block: str
    rack: str
    nodes: list[NodeCell]


class ClusterMap(_Body):
    racks: list[RackGroup]


class Charge(_Body):
    attempt: int
    gpu_type: str
    gpus: int | float  # a share of one GPU for a fractional or MIG job
    started_at: datetime
    ended_at: datetime
    gpu_seconds: float
    outcome: str


class JobDetail(_Body):
    job: JobRow
    summary: str
    spec: JobSpec | None = Field(description="as submitted; null when the gateway has not seen it")
    history: list[HistoryItem]
    placement: PlacementPlan | None
    admitted_at: datetime | None
    finished_at: datetime | None
    charges: list[Charge]
    gpu_hours: float
    actions: list[Action] = Field(description="what the caller may do to the job now")
    attempts: list[AttemptObjects] = Field(default_factory=list, description="the Kubernetes objects of each "
                                           "attempt, newest first (as `GET /v1/jobs/{job_id}/events`)")
    events: list[JobEvent] = Field(default_factory=list, description="state changes and run reports, oldest first")

