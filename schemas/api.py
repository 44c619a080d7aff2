"""Request and response bodies of the gateway's HTTP API: its OpenAPI document is generated from them, and
the Python client (``muster.client``) reads and writes the very same models."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.config import (
    CohortConfig,
    GpuTypeConfig,
    PoolConfig,
    PriorityClassConfig,
    QueueConfig,
    ResourceName,
    ResourceQuotaConfig,
    TenantConfig,
)
from schemas.envelope import Name, Text
from schemas.jobspec import JobSpec
from schemas.status import ActionName, ActionOutcome, JobState, RoleStatus

ViewState = JobState | Literal["submitted"]
Action = ActionName
#: a request's outcome as the API tells it: ``pending`` until the queue manager answered
Outcome = Literal["pending", "applied", "unchanged", "refused"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """Every error answer: a short machine-readable ``error``, the offending ``field``, a ``detail`` for
    people; a 422 lists each invalid field in ``errors`` (``{"field", "detail"}``)."""

    error: str
    field: str | None = None
    detail: str = ""
    errors: list[dict[str, Any]] | None = None


class SubmitAccepted(_Body):
    job_id: str
    state: ViewState
    location: str
    duplicate: bool = Field(description="true when this repeats an earlier submission with the same key")


class JobView(_Body):
    job_id: str
    tenant: str
    queue: str
    name: str
    state: ViewState
    attempt: int = 0
    priority_class: str
    replicas: int
    gpus: int
    gpu_share: float | None = Field(
        default=None, description="a GPU-sharing job's GPUs as charged (fractions, MIG slices' share); gpus is 0")
    position: int | None = None
    reason: str = ""
    message: str = ""
    estimated_start: datetime | None = None
    cluster: str | None = None
    submitted_at: datetime
    updated_at: datetime
    roles: list[RoleStatus] = Field(default_factory=list,
                                    description="a job of several roles: each role's pods and GPUs per pod")
    last_action: ActionOutcome | None = Field(
        default=None, description="the queue manager's answer to the last request about the job (cancel, "
        "suspend, resume, priority, scale): applied, unchanged, or refused with the reason")


class JobRow(JobView):
    """A job as the dashboard and the live stream (``/v1/stream``) carry it: the job view and who submitted it
    (when known)."""

    user: str | None = None


class StreamReady(_Body):
    """The first event of a stream: from here on every change the caller may see is sent."""

    at: datetime
    kinds: list[str]


class JobList(_Body):
    items: list[JobView]
    total: int = Field(description="matching jobs before the limit was applied")


class HistoryItem(_Body):
    state: str
    reason: str
    message: str
    attempt: int
    at: datetime


class Explanation(_Body):
    job: JobView
    summary: str = Field(description="one line, human readable: why the job is where it is")
    reason: str
    message: str
    position: int | None
    estimated_start: datetime | None
    history: list[HistoryItem]


PodsSource = Literal["observed", "planned"]
EventSource = Literal["queue_manager", "dispatcher", "node_watcher"]
EventKind = Literal["state", "dispatched", "dispatch_failed", "stopped", "started", "pods_ready", "succeeded",
                    "failed", "evicted", "deleted"]


class PodView(_Body):
    index: int = Field(description="the pod's completion index in the gang")
    name: str | None = Field(description="the pod's name; null while only planned (the node-state watcher names "
                                         "the pods once the whole gang is ready)")
    node: str
    gpus: int = Field(description="GPUs the pod holds")
    nvlink_group: int | None = Field(default=None, description="the NVLink group planned for the pod, when any")


class AttemptObjects(_Body):
    """The Kubernetes objects of one attempt: its ``batch/v1`` Job(s) and their pods."""

    attempt: int
    cluster: str
    namespace: str | None = Field(description="null until the dispatcher reports the Job")
    job_name: str | None = Field(description="the attempt's current Job (a restart or rescale creates another)")
    job_names: list[str] = Field(description="every Job of the attempt, oldest first")
    dispatched_at: datetime | None
    pods: list[PodView]
    pods_source: PodsSource | None = Field(description="`observed`: pods as the node-state watcher saw them ready; "
                                                       "`planned`: the placement the queue manager chose")


class JobEvent(_Body):
    """One event of a job: a state Muster gave it, or what the dispatcher or node-state watcher reported."""

    at: datetime
    attempt: int
    source: EventSource
    kind: EventKind
    state: str | None = Field(default=None, description="the job's state (`kind` = `state`)")
    reason: str = ""
    message: str = ""
    cluster: str | None = None
    object_name: str | None = Field(default=None, description="the Kubernetes Job concerned")
    pod: str | None = None
    nodes: list[str] = Field(default_factory=list, description="nodes concerned (a failure's blamed nodes)")
    exit_code: int | None = None
    classification: Literal["job", "infrastructure"] | None = Field(
        default=None, description="whose fault a failure is: the job's own or the node's / the platform's")
    warning: bool = Field(default=False, description="a failure, eviction, external deletion or refused dispatch")


class JobEvents(_Body):
    """A job's Kubernetes objects per attempt and its events, oldest first, as Muster's topics reported them
    (the run and dispatch reports are kept for the topics' retention, a week by default)."""

    job_id: str
    attempts: list[AttemptObjects]
    events: list[JobEvent]


class ActionAccepted(_Body):
    """A request about a job and, once the queue manager answered it, its outcome. ``event_id`` names the
    request: ``GET /v1/jobs/{job_id}/actions/{event_id}`` tells its outcome later."""

    job_id: str
    action: Action
    event_id: str
    outcome: Outcome = Field(default="pending", description="pending: not answered yet (or not within `wait`)")
    reason: str = Field(default="", description="why it was refused (machine-readable)")
    message: str = Field(default="", description="what was done or why not, for people")


class CancelRequest(_Body):
    reason: Text = ""


class PriorityPatch(_Body):
    priority_class: Name


class ScaleRequest(_Body):
    replicas: int = Field(ge=1, le=4096)


class QueueUsage(_Body):
    as_of: datetime
    allocated: dict[ResourceName, int | float]
    nominal: dict[ResourceName, int]
    borrowed: dict[ResourceName, int | float]
    decayed_gpu_seconds: float


class QueueView(_Body):
    name: str
    tenant: str
    cohort: str | None
    weight: float
    quotas: dict[ResourceName, ResourceQuotaConfig]
    allow_privileged: bool
    usage: QueueUsage | None
    jobs: dict[str, int] = Field(description="jobs in the status view by state")
    gpus_running: int = Field(description="GPUs of admitted and running jobs")
    gpus_pending: int = Field(description="GPUs asked for by pending jobs")


class QueueList(_Body):
    items: list[QueueView]


class ConfigDocument(_Body):
    queues: list[QueueConfig]
    cohorts: list[CohortConfig]
    priority_classes: list[PriorityClassConfig]
    gpu_types: list[GpuTypeConfig]
    pools: list[PoolConfig]
    tenants: list[TenantConfig]


class ConfigChange(_Body):
    kind: str
    name: str
    changed: bool = Field(description="false when the item already had this value (nothing was published)")
    event_id: Annotated[str, Field(description="the published event; empty when unchanged")] = ""


class RecurringAccepted(_Body):
    """The answer to a submission with ``schedule``: the recurring job it defines."""

    name: str = Field(description="`<tenant>.<spec name>`: re-posting the same spec names the same recurring job")
    tenant: str
    schedule: str
    suspended: bool
    next_firings: list[datetime] = Field(description="the next firing times (UTC); empty while suspended")
    location: str
    created: bool = Field(description="false when a recurring job of this name already existed")
    changed: bool = Field(description="false when it already had this spec (nothing was published)")


class FiringView(_Body):
    job_id: str
    fired_at: datetime
    state: ViewState


class RecurringView(_Body):
    name: str
    tenant: str
    user: str
    queue: str
    schedule: str
    suspended: bool
    created_at: datetime
    next_firings: list[datetime] = Field(description="the next firing times (UTC); empty while suspended")
    recent_firings: list[FiringView] = Field(description="firings the status view shows, newest first")
    spec: JobSpec


class RecurringList(_Body):
    items: list[RecurringView]
    total: int


class RecurringChange(_Body):
    name: str
    action: Literal["suspend", "resume", "delete"]
    changed: bool = Field(description="false when it already was in that state (nothing was published)")
    event_id: Annotated[str, Field(description="the published event; empty when unchanged")] = ""
