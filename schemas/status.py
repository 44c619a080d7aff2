"""Per-job status onto ``muster.status`` (compacted, key = job id): produced by the queue manager."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from schemas.envelope import MAX_EVENT_ID, JobId, Message, Name, ReasonText, Text
from schemas.jobspec import MAX_ROLES, JobSpec, RoleName

JobState = Literal[
    "pending", "admitted", "running", "preempting", "suspended",
    "succeeded", "failed", "cancelled", "rejected",
]
TERMINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "rejected"})
#: the requests about an existing job, as ``ActionOutcome`` and the API name them
ActionName = Literal["cancel", "suspend", "resume", "change_priority", "scale"]
#: ``applied``: the job changed as asked; ``unchanged``: it already was as asked (a repeat);
#: ``refused``: it was not changed, and ``reason``/``message`` say why
OutcomeName = Literal["applied", "unchanged", "refused"]


class ActionOutcome(BaseModel):
    """The queue manager's answer to the last request about a job (cancel, suspend, resume, priority, scale),
    carried in the job's status so that whoever asked is told, and ``describe`` and the Kubernetes object show
    a refusal. ``event_id`` is the request's own envelope id, which the gateway returned when it took it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    event_id: Annotated[str, Field(min_length=1, max_length=MAX_EVENT_ID)]
    action: ActionName
    outcome: OutcomeName
    reason: ReasonText = ""
    message: Text = ""
    requested_by: Annotated[str, Field(min_length=1, max_length=128)]
    at: AwareDatetime


class RoleStatus(BaseModel):
    """One role of a job of several roles: its pods and what each asks for."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: RoleName
    replicas: int = Field(ge=0, description="pods of this role (the main role's: its current size)")
    gpus_per_pod: int = Field(ge=0)


def role_statuses(spec: JobSpec, main_replicas: int) -> list[RoleStatus]:
    """The roles of a job of several roles as its status shows them (none for a job of one role)."""
    if not spec.roles:
        return []
    main = spec.main_role().name
    return [RoleStatus(name=r.name, replicas=main_replicas if r.name == main else r.replicas,
                       gpus_per_pod=r.template.resources.gpus) for r in spec.roles]


class JobStatusChanged(Message):
    TYPE: ClassVar[str] = "JobStatusChanged"
    job_id: JobId
    tenant: Name
    queue: Name
    name: Name
    state: JobState
    attempt: int = Field(ge=0)
    priority_class: Name
    replicas: int = Field(ge=0)
    gpus: int = Field(ge=0, description="whole GPUs held or asked for; 0 for a GPU-sharing job")
    gpu_share: float | None = Field(
        default=None, ge=0,
        description="a GPU-sharing job's GPUs as charged (its pods' fractions or MIG slices' share); "
        "absent for whole-GPU jobs")
    position: int | None = Field(default=None, ge=0, description="0-based place in its queue while pending")
    reason: ReasonText = ""
    message: Text = ""
    estimated_start: AwareDatetime | None = None
    cluster: Name | None = None
    submitted_at: AwareDatetime
    updated_at: AwareDatetime
    roles: list[RoleStatus] = Field(
        default_factory=list, max_length=MAX_ROLES, exclude_if=lambda v: not v,
        description="a job of several roles: each role's pods (absent for a job of one role)")
    last_action: ActionOutcome | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="the answer to the last request about the job (absent until one is made)")

    def key(self) -> str:
        return self.job_id


STATUS: tuple[type[Message], ...] = (JobStatusChanged,)
