"""What ``muster.client`` raises: one base class, and for every refusal of the API a class per status that
carries the API's error body (``schemas.api.ErrorBody``)."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ValidationError

from schemas.api import ErrorBody, JobView


class MusterError(Exception):
    """Base of every error the client raises."""


class ConfigurationError(MusterError):
    """No usable gateway address or token: the message says where they are looked up."""


class TransportError(MusterError):
    """The gateway could not be reached, or a stream from it broke."""


class ApiError(MusterError):
    """The gateway refused the request: ``status`` and the error ``body`` it answered with.

    ``error`` is the body's short machine-readable name (``not_found``, ``job_finished``,
    ``validation_failed``...), ``field`` the offending field, ``detail`` the explanation for people.
    """

    status: int

    def __init__(self, status: int, body: ErrorBody, *, retry_after: float | None = None) -> None:
        self.status = status
        self.body = body
        self.retry_after = retry_after
        text = f"{status} {body.error}"
        if body.field:
            text += f" [{body.field}]"
        if body.detail:
            text += f": {body.detail}"
        super().__init__(text)

    @property
    def error(self) -> str:
        return self.body.error

    @property
    def field(self) -> str | None:
        return self.body.field

    @property
    def detail(self) -> str:
        return self.body.detail


class BadRequest(ApiError):
    """400"""


class Unauthorized(ApiError):
    """401: the bearer token is missing or unknown."""


class Forbidden(ApiError):
    """403: not allowed for the token's tenant or role."""


class NotFound(ApiError):
    """404: an unknown object, or another tenant's (whose existence is not revealed)."""


class Conflict(ApiError):
    """409: conflicts with the object's current state (e.g. ``job_finished``)."""


class PayloadTooLarge(ApiError):
    """413: the request would not fit in a message on the wire."""


class Unprocessable(ApiError):
    """422: the request is invalid; ``errors`` lists every invalid field as ``{"field", "detail"}``."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.body.errors or [{"field": self.body.field, "detail": self.body.detail}])


class TooManyRequests(ApiError):
    """429"""


class Unavailable(ApiError):
    """503 (and other 5xx): the gateway or its broker cannot take the request now; retrying is safe
    (submissions with the same idempotency key)."""


class InvalidSpec(MusterError):
    """A job spec (or intent) that does not validate, found before anything was sent. ``errors`` has the
    shape of a 422's: ``{"field", "detail"}`` per problem."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        first = errors[0] if errors else {"field": "spec", "detail": "invalid"}
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"invalid job spec: {first['field']}: {first['detail']}{more}")

    @classmethod
    def from_validation(cls, exc: ValidationError, prefix: str = "spec") -> InvalidSpec:
        return cls([{"field": ".".join([prefix, *(str(p) for p in err["loc"])]), "detail": err["msg"]}
                    for err in exc.errors()])


class InvalidWorkload(InvalidSpec):
    """A Kubernetes object that cannot be submitted as a job (``muster.client.workloads``): ``reason`` says
    why, for its owner."""

    def __init__(self, reason: str) -> None:
        super().__init__([{"field": "workload.manifest", "detail": reason}])
        self.reason = reason
        self.args = (f"cannot submit the object: {reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


class WaitTimeout(MusterError, TimeoutError):
    """``wait`` gave up: the job did not reach the wanted states in time. ``job`` is its last view."""

    def __init__(self, job_id: str, states: frozenset[str], timeout: float, job: JobView | None) -> None:
        self.job_id = job_id
        self.states = states
        self.job = job
        last = "never seen" if job is None else f"last {job.state}" + (f" ({job.reason})" if job.reason else "")
        super().__init__(f"job {job_id} not in {sorted(states)} after {timeout:g}s; {last}")


class JobEnded(MusterError):
    """``wait`` saw the job finish in a state it did not wait for (it can never reach them now)."""

    def __init__(self, job: JobView, states: frozenset[str]) -> None:
        self.job = job
        self.states = states
        why = f": {job.message or job.reason}" if (job.message or job.reason) else ""
        super().__init__(f"job {job.job_id} ended {job.state}{why}; waited for {sorted(states)}")


class ProtocolError(MusterError):
    """The gateway answered something this client cannot read (a different API version?)."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: PayloadTooLarge,
    422: Unprocessable, 429: TooManyRequests, 503: Unavailable,
}


def error_from_response(response: httpx.Response) -> ApiError:
    """The typed error of a non-2xx answer, with the API's body (or one made of the status line)."""
    try:
        body = ErrorBody.model_validate(response.json())
    except (ValueError, ValidationError):
        body = ErrorBody(error=response.reason_phrase.lower().replace(" ", "_") or "error",
                         detail=response.text[:500])
    retry_after: float | None = None
    header = response.headers.get("Retry-After")
    if header is not None:
        try:
            retry_after = float(header)
        except ValueError:
            retry_after = None
    status = response.status_code
    cls = _BY_STATUS.get(status) or (Unavailable if status >= 500 else ApiError)
    return cls(status, body, retry_after=retry_after)
