"""The queue manager's durable record of every job onto ``muster.jobs`` (compacted, key = job id).

The queue manager writes a job's record whenever it changes and rebuilds its state from this topic
after a restart, before it resumes its inputs from their committed offsets. Internal to Muster, but
described like every other topic so operators can read it.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from schemas.capacity import NodeName
from schemas.decisions import PlacementPlan
from schemas.envelope import JobId, Message, Name, ReasonText, Text
from schemas.intents import SubmitJob
from schemas.status import JobState

#: how many avoided nodes a job remembers (the most recent ones)
MAX_AVOIDED_NODES = 64


class JobRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    submission: SubmitJob
    priority: int
    state: JobState
    attempt: int = Field(default=0, ge=0)
    attained_gpu_s: float = Field(default=0.0, ge=0, description="GPU-seconds of service its earlier attempts received")
    restarts: int = Field(default=0, ge=0, description="whole-gang restarts after the job's own failures, in "
                          "this attempt and the attempts requeued after infrastructure failures before it")
    infrastructure_retries: int = Field(default=0, ge=0, description="requeues after infrastructure failures")
    avoid_nodes: list[NodeName] = Field(default_factory=list, max_length=MAX_AVOIDED_NODES,
                                        description="nodes where the job's pods failed for infrastructure reasons, "
                                        "oldest first: later attempts are placed elsewhere when anything else fits")
    replicas: int = Field(default=0, ge=0)
    placement: PlacementPlan | None = None
    borrowed: bool = False
    bought: bool = Field(default=False, exclude_if=lambda v: not v,
                         description="runs on nodes bought for it: paid by its queue's burst budget, outside quota")
    admitted_at: AwareDatetime | None = None
    finished_at: AwareDatetime | None = None
    reason: ReasonText = ""
    message: Text = ""


class JobRecorded(Message):
    TYPE: ClassVar[str] = "JobRecorded"
    job_id: JobId
    queue: Name
    record: JobRecord

    def key(self) -> str:
        return self.job_id


JOBS: tuple[type[Message], ...] = (JobRecorded,)
