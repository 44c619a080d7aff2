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
#: a job's size by the whole GPUs it asks for: one (or a share of one), two to four, five to eight, more
SizeClass = Literal["1", "2-4", "5-8", ">8"]


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


class BurstLine(_Body):
    """What the queue's bought nodes cost in the current window of its burst budget (from the quota accountant)."""

    window: str
    gpu_hours: float
    money: float
    nodes_held: int
    gpu_hour_budget: float | None = None
    money_budget: float | None = None


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
    burst: BurstLine | None = Field(None, description="bought nodes' spend, for a queue with a burst budget or spend")
    nominal_gpus: int = Field(0, description="the queue's nominal quota of GPUs, every GPU type together")
    fair_share_gpus: float | None = Field(None, description="the queue's fair share of its cohort's GPUs: "
                                          "fair_share times the nominal GPUs of every queue of the cohort "
                                          "(its own nominal GPUs when it has no cohort)")


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


class StateSpan(_Body):
    """A stretch of time one attempt of a job spent in one state (the bars of the job's timeline)."""

    attempt: int
    state: str
    reason: str = Field(description="the reason the state began with")
    start: datetime
    end: datetime
    ongoing: bool = Field(description="the job is still in this state; end is the time of the answer")


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
    spans: list[StateSpan] = Field(default_factory=list, description="the states of the history as spans of time, "
                                   "oldest first; a finished job's last span ends when it finished")


# ---------------------------------------------------------------- plots (``/v1/dashboard/plots``)


class QueueSeries(_Body):
    queue: str
    tenant: str
    values: list[float] = Field(description="one value per step, oldest first")


class AllocationPlot(_Body):
    """GPUs allocated per queue over time (admitted, running and preempting jobs; a GPU-sharing job counts its
    share), for a stacked area."""

    as_of: datetime
    start: datetime = Field(description="the start of the first step")
    step_s: int
    points: int = Field(description="steps from start; the last one holds as_of")
    queues: list[QueueSeries] = Field(description="the queues that held the most GPUs in the window, most first; "
                                      "each value is the queue's GPUs at the end of the step")
    other: list[float] | None = Field(description="the other queues' GPUs together; null when there are none")
    other_queues: int = Field(description="how many queues `other` sums")
    capacity: int = Field(description="GPUs allocatable in the clusters now")


class PreemptionPlot(_Body):
    """Preemptions per queue in every step of the window (a running job stopped for a cancellation is not one)."""

    as_of: datetime
    start: datetime = Field(description="the start of the first step")
    step_s: int
    points: int = Field(description="steps from start; the last one holds as_of")
    queues: list[QueueSeries] = Field(description="the queues preempted most in the window, most first")
    other: list[float] | None = Field(description="the other queues' preemptions together; null when there are none")
    other_queues: int = Field(description="how many queues `other` sums")
    total: int = Field(description="preemptions in the window")
    reasons: dict[str, int] = Field(description="preemptions in the window by reason")


class WaitSizeClass(_Body):
    """The waits from submission to first admission of the jobs of one size class."""

    size: SizeClass = Field(description="whole GPUs the job asks for: 1 (or a share of one), 2-4, 5-8, >8")
    jobs: int
    counts: list[int] = Field(description="jobs per bin: below bounds_s[0], then between successive bounds, "
                                          "then at least the last bound")
    mean_s: float
    max_s: float
    p50_s: float = Field(description="half of the jobs waited at most this long (the upper edge of the bin "
                                     "of the median job, or the longest wait when that is less)")
    p90_s: float = Field(description="nine jobs in ten waited at most this long (as p50_s)")


class QueueWaitTimes(_Body):
    queue: str
    tenant: str
    sizes: list[WaitSizeClass] = Field(description="the size classes with jobs, smallest first")


class WaitPlot(_Body):
    """Wait times from submission to first admission of the jobs first admitted in the window."""

    as_of: datetime
    window_s: int
    bounds_s: list[int] = Field(description="the upper edges of the histogram's bins, in seconds; one more bin "
                                            "holds every longer wait")
    all_queues: list[WaitSizeClass] = Field(description="every queue the caller may see, together")
    queues: list[QueueWaitTimes] = Field(description="per queue, by name")

