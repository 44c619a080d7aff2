"""The typed Python client of Muster.

- ``Client`` / ``AsyncClient``: the gateway's HTTP API (submit, get, list, describe, cancel, suspend, resume,
  set_priority, scale, queues, recurring jobs,
  configuration: ``config``, ``define``, ``undefine``), ``watch()`` on the live stream and ``wait()`` for a state.
  Answers are the API's own pydantic models (``schemas.api``); refusals raise ``ApiError`` subclasses that
  carry the API's error body.
- ``workload_spec`` / ``submit_workload``: a Kubernetes object of a workload kind (JobSet, RayJob,
  LeaderWorkerSet...) submitted through Muster, its roles read from it.
- ``KafkaSubmitter``: validated ``SubmitJob`` intents straight onto ``muster.intents.v1``; ``StatusConsumer``:
  typed events of ``muster.status.v1`` (and ``muster.usage.v1``) for dashboards (both imported on first use,
  so the HTTP clients never load the Kafka client).

See ``docs/client.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from muster.client.aio import AsyncClient
from muster.client.config import ClientSettings, Context, context_settings, load_settings, resolve_context
from muster.client.errors import (
    ApiError,
    BadRequest,
    ConfigurationError,
    Conflict,
    Forbidden,
    InvalidSpec,
    InvalidWorkload,
    JobEnded,
    MusterError,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    TooManyRequests,
    TransportError,
    Unauthorized,
    Unavailable,
    Unprocessable,
    WaitTimeout,
)
from muster.client.operations import CONFIG_COLLECTIONS, ConfigItem, ConfigKind, Submitted
from muster.client.stream import JobsChanged, JobsRemoved, NodesChanged, QueuesChanged, StreamEvent, StreamOpened
from muster.client.sync import Client
from muster.client.workloads import is_kube_object, workload_spec
from schemas.api import (
    ActionAccepted,
    ConfigChange,
    ConfigDocument,
    ErrorBody,
    Explanation,
    JobList,
    JobRow,
    JobView,
    QueueView,
    RecurringAccepted,
    RecurringChange,
    RecurringView,
    SubmitAccepted,
)
from schemas.jobspec import JobSpec

if TYPE_CHECKING:
    from muster.client.kafka import KafkaSubmitter, Produced
    from muster.client.status_consumer import JobForgotten, JobStatus, StatusConsumer, StatusEvent, UsageReport
    from services.runtime.kafka import KafkaSettings

__all__ = [
    "CONFIG_COLLECTIONS",
    "ActionAccepted",
    "ApiError",
    "AsyncClient",
    "BadRequest",
    "Client",
    "ClientSettings",
    "ConfigChange",
    "ConfigDocument",
    "ConfigItem",
    "ConfigKind",
    "ConfigurationError",
    "Conflict",
    "Context",
    "ErrorBody",
    "Explanation",
    "Forbidden",
    "InvalidSpec",
    "InvalidWorkload",
    "JobEnded",
    "JobForgotten",
    "JobList",
    "JobRow",
    "JobSpec",
    "JobStatus",
    "JobView",
    "JobsChanged",
    "JobsRemoved",
    "KafkaSettings",
    "KafkaSubmitter",
    "MusterError",
    "NodesChanged",
    "NotFound",
    "PayloadTooLarge",
    "Produced",
    "ProtocolError",
    "QueueView",
    "QueuesChanged",
    "RecurringAccepted",
    "RecurringChange",
    "RecurringView",
    "StatusConsumer",
    "StatusEvent",
    "StreamEvent",
    "StreamOpened",
    "SubmitAccepted",
    "Submitted",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "Unprocessable",
    "UsageReport",
    "WaitTimeout",
    "context_settings",
    "is_kube_object",
    "load_settings",
    "resolve_context",
    "workload_spec",
]


def __getattr__(name: str) -> Any:
    if name in ("KafkaSubmitter", "Produced"):
        from muster.client import kafka

        return getattr(kafka, name)
    if name in ("StatusConsumer", "StatusEvent", "JobStatus", "JobForgotten", "UsageReport"):
        from muster.client import status_consumer

        return getattr(status_consumer, name)
    if name == "KafkaSettings":
        from services.runtime.kafka import KafkaSettings

        return KafkaSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
