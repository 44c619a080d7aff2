"""Every call of the gateway's ``/v1`` API as data: what to send and how to read the answer. ``Client`` and
``AsyncClient`` send the same ``Call`` objects, one synchronously and one with asyncio."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from pydantic import TypeAdapter, ValidationError

from muster.client.errors import InvalidSpec, ProtocolError
from muster.client.workloads import is_kube_object, workload_spec
from schemas.api import (
    ActionAccepted,
    ConfigChange,
    ConfigDocument,
    Explanation,
    JobEvents,
    JobList,
    JobView,
    QueueList,
    QueueView,
    RecurringAccepted,
    RecurringChange,
    RecurringList,
    RecurringView,
    SubmitAccepted,
)
from schemas.config import (
    CohortConfig,
    GpuTypeConfig,
    PoolConfig,
    PriorityClassConfig,
    QueueConfig,
    TenantConfig,
)
from schemas.jobspec import JobSpec
from services.spec.secret_env import plain_secret_errors

T = TypeVar("T")

Submitted = SubmitAccepted | RecurringAccepted
"""What a submission answers: the job queued, or (a spec with ``schedule``) the recurring job it defines."""

_SUBMITTED: TypeAdapter[Submitted] = TypeAdapter(Submitted)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the reader of its (2xx) JSON answer."""

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str
    read: Callable[[Any], T]
    params: dict[str, str | int] = field(default_factory=dict)
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def parse(self, body: Any) -> T:
        try:
            return self.read(body)
        except ValidationError as exc:
            raise ProtocolError(f"{self.method} {self.path}: unexpected answer: {exc}") from None


def _segment(value: str) -> str:
    return quote(value, safe="")


def spec_body(spec: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of a submission: a model as the fields its author set; a mapping as given (the gateway
    validates it and answers 422 with every invalid field)."""
    if isinstance(spec, JobSpec):
        return spec.model_dump(mode="json", exclude_unset=True)
    return dict(spec)


def refuse_plain_secrets(spec: JobSpec | Mapping[str, Any]) -> None:
    """``InvalidSpec`` when an environment entry looks like a secret but carries a plain value (the gateway
    refuses it too; this keeps the value on the submitter's machine). A spec that does not validate is left
    to the gateway, which lists every invalid field."""
    try:
        model = spec if isinstance(spec, JobSpec) else JobSpec.model_validate(dict(spec))
    except (ValidationError, TypeError, ValueError):
        return
    found = plain_secret_errors(model)
    if found:
        raise InvalidSpec(found)


def submit(spec: JobSpec | Mapping[str, Any], idempotency_key: str | None = None) -> Call[Submitted]:
    """The submission of ``spec``; ``InvalidSpec`` before anything is sent when it holds a plain secret. A
    mapping that is a Kubernetes object (``apiVersion`` and ``kind``) is submitted through Muster, its queue
    its ``muster.dev/queue`` label (``submit_workload`` names another, and a TrainJob's runtime)."""
    if not isinstance(spec, JobSpec) and is_kube_object(spec):
        spec = workload_spec(spec)
    refuse_plain_secrets(spec)
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    return Call("POST", "/v1/jobs", _SUBMITTED.validate_python, json=spec_body(spec), headers=headers)


def submit_workload(obj: Mapping[str, Any], *, queue: str | None = None, related: Sequence[Mapping[str, Any]] = (),
                    idempotency_key: str | None = None) -> Call[Submitted]:
    """The submission of a Kubernetes object of a workload kind through Muster (``workloads.workload_spec``):
    ``InvalidWorkload`` before anything is sent when it cannot be one."""
    return submit(workload_spec(obj, queue=queue, related=related), idempotency_key)


def get_job(job_id: str) -> Call[JobView]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}", JobView.model_validate)


def list_jobs(*, queue: str | None = None, state: str | None = None, tenant: str | None = None,
              active: bool | None = None, limit: int = 100, offset: int = 0) -> Call[JobList]:
    params: dict[str, str | int] = {k: v for k, v in {"queue": queue, "state": state, "tenant": tenant}.items() if v}
    if active is not None:
        params["active"] = "true" if active else "false"
    params["limit"] = limit
    if offset:
        params["offset"] = offset
    return Call("GET", "/v1/jobs", JobList.model_validate, params=params)


def describe(job_id: str) -> Call[Explanation]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}/explain", Explanation.model_validate)


def events(job_id: str) -> Call[JobEvents]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}/events", JobEvents.model_validate)


#: how long a request about a job waits for the queue manager's answer by default (the gateway's limit: 30 s)
ACTION_WAIT_S = 5.0


def _waiting(wait: float) -> dict[str, str | int]:
    return {"wait": f"{wait:g}"} if wait > 0 else {}


def cancel(job_id: str, reason: str = "", wait: float = ACTION_WAIT_S) -> Call[ActionAccepted]:
    return Call("POST", f"/v1/jobs/{_segment(job_id)}/cancel", ActionAccepted.model_validate,
                params=_waiting(wait), json={"reason": reason})


def suspend(job_id: str, wait: float = ACTION_WAIT_S) -> Call[ActionAccepted]:
    return Call("POST", f"/v1/jobs/{_segment(job_id)}/suspend", ActionAccepted.model_validate,
                params=_waiting(wait))


def resume(job_id: str, wait: float = ACTION_WAIT_S) -> Call[ActionAccepted]:
    return Call("POST", f"/v1/jobs/{_segment(job_id)}/resume", ActionAccepted.model_validate,
                params=_waiting(wait))


def set_priority(job_id: str, priority_class: str, wait: float = ACTION_WAIT_S) -> Call[ActionAccepted]:
    return Call("PATCH", f"/v1/jobs/{_segment(job_id)}", ActionAccepted.model_validate,
                params=_waiting(wait), json={"priority_class": priority_class})


def scale(job_id: str, replicas: int, wait: float = ACTION_WAIT_S) -> Call[ActionAccepted]:
    return Call("POST", f"/v1/jobs/{_segment(job_id)}/scale", ActionAccepted.model_validate,
                params=_waiting(wait), json={"replicas": replicas})


def action_outcome(job_id: str, event_id: str) -> Call[ActionAccepted]:
    return Call("GET", f"/v1/jobs/{_segment(job_id)}/actions/{_segment(event_id)}", ActionAccepted.model_validate)


def _queue_items(body: Any) -> list[QueueView]:
    return QueueList.model_validate(body).items


def queues() -> Call[list[QueueView]]:
    return Call("GET", "/v1/queues", _queue_items)


def _recurring_items(body: Any) -> list[RecurringView]:
    return RecurringList.model_validate(body).items


def recurring_jobs(tenant: str | None = None) -> Call[list[RecurringView]]:
    return Call("GET", "/v1/recurring", _recurring_items, params={"tenant": tenant} if tenant else {})


def recurring(name: str) -> Call[RecurringView]:
    return Call("GET", f"/v1/recurring/{_segment(name)}", RecurringView.model_validate)


def recurring_action(name: str, action: Literal["suspend", "resume", "delete"]) -> Call[RecurringChange]:
    if action == "delete":
        return Call("DELETE", f"/v1/recurring/{_segment(name)}", RecurringChange.model_validate)
    return Call("POST", f"/v1/recurring/{_segment(name)}/{action}", RecurringChange.model_validate)


ConfigKind = Literal["queue", "cohort", "priority-class", "gpu-type", "pool", "tenant"]
ConfigItem = QueueConfig | CohortConfig | PriorityClassConfig | GpuTypeConfig | PoolConfig | TenantConfig

#: the path segment of each configuration kind under ``/v1/config``
CONFIG_COLLECTIONS: dict[ConfigKind, str] = {
    "queue": "queues", "cohort": "cohorts", "priority-class": "priority-classes", "gpu-type": "gpu-types",
    "pool": "pools", "tenant": "tenants",
}


def config() -> Call[ConfigDocument]:
    return Call("GET", "/v1/config", ConfigDocument.model_validate)


def define(kind: ConfigKind, item: ConfigItem) -> Call[ConfigChange]:
    """``PUT`` the item: administrators only; ``changed`` is false when the gateway already held it."""
    path = f"/v1/config/{CONFIG_COLLECTIONS[kind]}/{_segment(item.name)}"
    return Call("PUT", path, ConfigChange.model_validate, json=item.model_dump(mode="json"))


def undefine(kind: ConfigKind, name: str) -> Call[ConfigChange]:
    return Call("DELETE", f"/v1/config/{CONFIG_COLLECTIONS[kind]}/{_segment(name)}", ConfigChange.model_validate)


QueryItem = tuple[str, str | int | float | bool | None]


def stream_params(*, kinds: tuple[str, ...], job_id: str | None, queue: str | None,
                  tenant: str | None) -> list[QueryItem]:
    """The query of ``GET /v1/stream`` (``kinds`` repeats)."""
    params: list[QueryItem] = [("kinds", kind) for kind in kinds]
    params += [(name, value) for name, value in (("job_id", job_id), ("queue", queue), ("tenant", tenant)) if value]
    return params
