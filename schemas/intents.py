"""Requests onto ``muster.intents``: produced by the gateway and by external pipelines."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import AwareDatetime, Field

from schemas.envelope import JobId, Message, Name, Text
from schemas.jobspec import JobSpec
from schemas.status import ActionName

Actor = Annotated[str, Field(min_length=1, max_length=128)]


class _JobIntent(Message):
    job_id: JobId

    def key(self) -> str:
        return self.job_id


class SubmitJob(_JobIntent):
    TYPE: ClassVar[str] = "SubmitJob"
    tenant: Name
    user: Actor
    spec: JobSpec
    submitted_at: AwareDatetime
    idempotency_key: Annotated[str, Field(min_length=1, max_length=128)] | None = None


class CancelJob(_JobIntent):
    TYPE: ClassVar[str] = "CancelJob"
    requested_by: Actor
    reason: Text = ""


class SuspendJob(_JobIntent):
    TYPE: ClassVar[str] = "SuspendJob"
    requested_by: Actor


class ResumeJob(_JobIntent):
    TYPE: ClassVar[str] = "ResumeJob"
    requested_by: Actor


class ChangePriority(_JobIntent):
    TYPE: ClassVar[str] = "ChangePriority"
    priority_class: Name
    requested_by: Actor


class ScaleJob(_JobIntent):
    TYPE: ClassVar[str] = "ScaleJob"
    replicas: int = Field(ge=1, le=4096)
    requested_by: Actor


INTENTS: tuple[type[Message], ...] = (SubmitJob, CancelJob, SuspendJob, ResumeJob, ChangePriority, ScaleJob)
#: the requests about an existing job by message type, named as their answers (``ActionOutcome``) name them
ACTION_OF: dict[str, ActionName] = {
    CancelJob.TYPE: "cancel", SuspendJob.TYPE: "suspend", ResumeJob.TYPE: "resume",
    ChangePriority.TYPE: "change_priority", ScaleJob.TYPE: "scale",
}
