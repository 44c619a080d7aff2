"""Per-job status onto ``muster.status`` (compacted, key = job id): produced by the queue manager."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AwareDatetime, Field

from schemas.envelope import JobId, Message, Name, Text

JobState = Literal[
    "pending", "admitted", "running", "preempting", "suspended",
    "succeeded", "failed", "cancelled", "rejected",
]
TERMINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "rejected"})


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
    reason: Annotated[str, Field(max_length=64)] = ""
    message: Text = ""
    estimated_start: AwareDatetime | None = None
    cluster: Name | None = None
    submitted_at: AwareDatetime
    updated_at: AwareDatetime

    def key(self) -> str:
        return self.job_id


STATUS: tuple[type[Message], ...] = (JobStatusChanged,)
