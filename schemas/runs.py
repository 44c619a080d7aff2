"""What actually happens to jobs on a cluster.

``muster.runs`` carries observations of the node-state watcher (pods started, ready, succeeded, failed,
evicted, objects deleted); ``muster.dispatches`` carries the dispatcher's own reports (objects created,
a preemption handshake finished, a dispatch that failed). One producing service per topic.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from schemas.capacity import NodeName
from schemas.envelope import JobId, Message, Name, Reason, Text


class _RunEvent(Message):
    job_id: JobId
    attempt: int = Field(ge=0)
    cluster: Name
    observed_at: AwareDatetime

    def key(self) -> str:
        return self.job_id


class JobDispatched(_RunEvent):
    TYPE: ClassVar[str] = "JobDispatched"
    namespace: Name
    object_name: Annotated[str, Field(min_length=1, max_length=63)]


class DispatchFailed(_RunEvent):
    TYPE: ClassVar[str] = "DispatchFailed"
    reason: Reason
    message: Text
    retryable: bool = False


class JobStopped(_RunEvent):
    """The dispatcher stopped a job on request (preemption, cancel, max runtime) after its grace period."""

    TYPE: ClassVar[str] = "JobStopped"
    reason: Reason
    requeue: bool
    checkpointed: bool = False


class RunStarted(_RunEvent):
    """The first pod of the attempt is running."""

    TYPE: ClassVar[str] = "RunStarted"
    pods_running: int = Field(ge=0)
    pods_total: int = Field(ge=1)


#: at most this many pods are named in one message (a gang's largest size)
MAX_NAMED_PODS = 4096


class PodBound(BaseModel):
    """One pod of a gang: its name, completion index and the node it runs on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Annotated[str, Field(min_length=1, max_length=253)]
    index: int = Field(ge=0)
    node: NodeName


class RunAllPodsReady(_RunEvent):
    """Every pod of the attempt is ready; ``pods`` names them and their nodes (empty from older watchers)."""

    TYPE: ClassVar[str] = "RunAllPodsReady"
    pods_total: int = Field(ge=1)
    #: the Job object whose pods these are (a restart of the attempt creates another)
    object_name: Annotated[str, Field(max_length=63)] | None = None
    pods: list[PodBound] = Field(default_factory=list, max_length=MAX_NAMED_PODS)


class RunSucceeded(_RunEvent):
    TYPE: ClassVar[str] = "RunSucceeded"


#: failure reasons after which the dispatcher does not restart the gang: the attempt ends with the failure
NOT_RESTARTED_REASONS = frozenset({"DeadlineExceeded"})

#: whose fault a failure is: the job's own (its exit code, its deadline) or the node's / the platform's
FailureClass = Literal["job", "infrastructure"]
#: at most this many nodes are named in one failure
MAX_FAILED_NODES = 64


class RunFailed(_RunEvent):
    """A revision of the attempt failed.

    A ``job`` failure (the default, and what a message without ``classification`` means) is not the end
    of the attempt: the dispatcher restarts the gang in place, or reports
    ``DispatchFailed(reason="restarts_exhausted")`` once ``max_restarts`` is spent; only a reason in
    ``NOT_RESTARTED_REASONS`` ends the attempt here. An ``infrastructure`` failure ends the attempt: the
    dispatcher deletes the gang and the queue manager requeues the job, avoiding ``nodes``, without
    spending a restart (bounded by ``max_infrastructure_retries``)."""

    TYPE: ClassVar[str] = "RunFailed"
    reason: Reason
    message: Text = ""
    exit_code: int | None = None
    pod: Annotated[str, Field(max_length=253)] | None = None
    #: whole-gang restarts done before the revision that failed; repeats of one failure carry the same value
    restarts: int | None = Field(default=None, ge=0)
    classification: FailureClass = "job"
    #: the nodes blamed for an infrastructure failure (where its pods failed); empty for a job failure
    nodes: list[NodeName] = Field(default_factory=list, max_length=MAX_FAILED_NODES)


class RunEvicted(_RunEvent):
    TYPE: ClassVar[str] = "RunEvicted"
    reason: Reason
    node: NodeName | None = None


class RunDeleted(_RunEvent):
    """The attempt's Kubernetes objects are gone (by Muster or by someone else)."""

    TYPE: ClassVar[str] = "RunDeleted"
    by: Literal["muster", "external", "unknown"] = "unknown"


class RunResized(_RunEvent):
    """The object of a running serving job (a Deployment, a StatefulSet) now asks for ``replicas`` pods of
    its main role: its user or an autoscaler scaled it. Larger than admitted: the extra pods are admitted
    through quota as room allows (they wait gated until then). Smaller: sent once no more than ``replicas``
    of its pods are left, ``pods`` naming the nodes of those that hold one, so the quota and the nodes of
    the pods that went are freed at once."""

    TYPE: ClassVar[str] = "RunResized"
    replicas: int = Field(ge=1, le=4096)
    pods: list[PodBound] = Field(default_factory=list, max_length=MAX_NAMED_PODS)


class RunIdle(_RunEvent):
    """Every GPU of the attempt's pods has shown no utilisation since ``idle_since``, for at least the job's
    ``idle_timeout_s`` (read from the GPUs' metrics, NVIDIA's DCGM exporter's ``DCGM_FI_DEV_GPU_UTIL``):
    an interactive session nobody uses, whose GPUs the queue manager releases."""

    TYPE: ClassVar[str] = "RunIdle"
    idle_since: AwareDatetime
    pods: int = Field(ge=1, description="the pods whose GPUs were measured idle")


class NodesProvisioned(_RunEvent):
    """The cluster's autoscaler satisfied the attempt's ``ProvisioningRequest`` (condition ``Provisioned``):
    ``nodes`` are the nodes it made for it (those labelled with the request, empty when the autoscaler labels
    none)."""

    TYPE: ClassVar[str] = "NodesProvisioned"
    request: Name
    group: Name
    nodes: list[NodeName] = Field(default_factory=list, max_length=4096)


class ProvisioningFailed(_RunEvent):
    """The attempt's ``ProvisioningRequest`` failed (condition ``Failed``, or ``BookingExpired``/
    ``CapacityRevoked`` before the job started there): the job waits for existing capacity."""

    TYPE: ClassVar[str] = "ProvisioningFailed"
    request: Name
    reason: Reason
    message: Text = ""


RUNS: tuple[type[Message], ...] = (
    RunStarted, RunAllPodsReady, RunSucceeded, RunFailed, RunEvicted, RunDeleted, RunResized, RunIdle,
    NodesProvisioned, ProvisioningFailed,
)
DISPATCHES: tuple[type[Message], ...] = (JobDispatched, DispatchFailed, JobStopped)

#: the messages that may end an attempt; ``ends_attempt`` says whether one does
ATTEMPT_ENDS = (RunSucceeded, RunFailed, RunEvicted, RunDeleted, JobStopped, DispatchFailed)
AttemptEnd = RunSucceeded | RunFailed | RunEvicted | RunDeleted | JobStopped | DispatchFailed


def ends_attempt(message: object, *, started: bool) -> bool:
    """Whether ``message`` ends the attempt it names: the attempt's gang no longer runs or holds GPUs, and the
    queue manager either ends the job or requeues it as its next attempt. The one rule the queue manager, the
    quota accountant and the replay of the log (``services.simulator.replay``) go by.

    - ``RunSucceeded``, ``JobStopped``, ``RunEvicted`` and ``RunDeleted`` end it (the gang is gone).
    - ``RunFailed``: a failure of the ``infrastructure`` (the job is requeued, avoiding the nodes) or one whose
      reason is in ``NOT_RESTARTED_REASONS`` ends it; a failure of the job's own does not (the dispatcher
      restarts the gang within the attempt, and reports ``DispatchFailed(reason="restarts_exhausted")`` once
      its restarts are spent).
    - ``DispatchFailed``: one that is not ``retryable`` ends it (the job fails). A retryable one (the cluster's
      API was unavailable) ends it only before the attempt ``started``: the Job of its admission could not be
      created, so the queue manager requeues the job as its next attempt. Once the attempt runs, a retryable
      failure is of a rescale, and the run goes on as it was.
    - Nothing else does (decisions, ``JobDispatched``, ``RunStarted``, ``RunAllPodsReady``, ``RunResized``,
      ``RunIdle``: a preemption or an idle release ends the attempt with the ``JobStopped`` that follows;
      ``NodesProvisioned``, ``ProvisioningFailed``: nodes bought for a waiting job, or not).

    ``started``: whether the attempt has been seen running (a ``RunStarted`` or ``RunAllPodsReady`` of it); the
    queue manager counts a job it is stopping as started, since its stop ends the attempt. Runs and dispatches
    travel on two topics, so a reader may see a retryable failure before the start that preceded it, as the
    queue manager may."""
    if isinstance(message, RunSucceeded | JobStopped | RunEvicted | RunDeleted):
        return True
    if isinstance(message, RunFailed):
        return message.classification == "infrastructure" or message.reason in NOT_RESTARTED_REASONS
    if isinstance(message, DispatchFailed):
        return not (message.retryable and started)
    return False
