"""Usage ledger onto ``muster.usage`` (compacted): produced by the quota accountant."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AwareDatetime, Field

from schemas.config import ResourceName
from schemas.envelope import JobId, Message, Name
from schemas.jobspec import MAX_ROLES, RoleName


class QueueUsageReported(Message):
    """Current allocation against quota, and decayed history for fair share."""

    TYPE: ClassVar[str] = "QueueUsageReported"
    queue: Name
    cohort: Name | None = None
    as_of: AwareDatetime
    #: whole GPUs, or (with GPU sharing) fractions of them: a MIG slice or a fraction is charged its share
    allocated: dict[ResourceName, int | float] = Field(default_factory=dict)
    nominal: dict[ResourceName, int] = Field(default_factory=dict)
    borrowed: dict[ResourceName, int | float] = Field(default_factory=dict)
    decayed_gpu_seconds: float = Field(ge=0)
    half_life_s: float = Field(gt=0)

    def key(self) -> str:
        return f"queue/{self.queue}"


class BudgetStatusReported(Message):
    """GPU-hours a tenant used in the current window against its budget."""

    TYPE: ClassVar[str] = "BudgetStatusReported"
    tenant: Name
    window: Literal["day", "week", "month"]
    window_start: AwareDatetime
    gpu_hours_used: float = Field(ge=0)
    gpu_hour_budget: float | None = Field(default=None, ge=0)
    exhausted: bool = False

    def key(self) -> str:
        return f"budget/{self.tenant}"


class ChargebackRecorded(Message):
    """One finished (or stopped) attempt's GPU time, for a charging model."""

    TYPE: ClassVar[str] = "ChargebackRecorded"
    job_id: JobId
    attempt: int = Field(ge=0)
    tenant: Name
    queue: Name
    gpu_type: Annotated[str, Field(max_length=63)]
    gpus: int | float = Field(ge=0, description="GPUs held at most; a share of one for a fractional or MIG job")
    started_at: AwareDatetime
    ended_at: AwareDatetime
    gpu_seconds: float = Field(ge=0)
    outcome: Literal["succeeded", "failed", "preempted", "cancelled", "evicted"]
    roles: dict[RoleName, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict, max_length=MAX_ROLES, exclude_if=lambda v: not v,
        description="a job of several roles: its GPU-seconds per role (they add up to gpu_seconds)")

    def key(self) -> str:
        return f"charge/{self.job_id}/{self.attempt}"


class BurstSpendReported(Message):
    """What a queue's bought nodes have cost in the current window of its burst budget (``window_start`` to
    ``window_end``, UTC calendar day, ISO week or month): GPU-hours and money, from each node's ready time to
    its release, nodes still held counted up to ``as_of``. The queue manager counts at least this much against
    the budget, so a restart of it does not forget what was spent."""

    TYPE: ClassVar[str] = "BurstSpendReported"
    queue: Name
    window: Literal["day", "week", "month"]
    window_start: AwareDatetime
    window_end: AwareDatetime
    as_of: AwareDatetime
    gpu_hours: float = Field(ge=0)
    money: float = Field(ge=0)
    nodes_held: int = Field(default=0, ge=0, description="bought nodes of the queue not given back yet")

    def key(self) -> str:
        return f"burst/{self.queue}"


USAGE: tuple[type[Message], ...] = (QueueUsageReported, BudgetStatusReported, ChargebackRecorded, BurstSpendReported)
