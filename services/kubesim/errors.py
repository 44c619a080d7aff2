"""Kubernetes ``Status`` errors raised by the store and turned into HTTP responses by the API layer."""

from __future__ import annotations

from typing import Any

REASONS: dict[int, str] = {
    400: "BadRequest",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    403: "Forbidden",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class ApiError(Exception):
    """An error the API answers with a ``Status`` object and the matching HTTP code."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.message, self.reason, self.details)


def status_object(
    code: int, message: str, reason: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` ``Status`` with ``status: Failure`` (or ``Success`` for 2xx codes)."""
    obj: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 300 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        obj["details"] = details
    return obj


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        404,
        f'{resource}{"." + group if group else ""} "{name}" not found',
        "NotFound",
        {"name": name, "group": group, "kind": resource},
    )


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        409,
        f'{resource}{"." + group if group else ""} "{name}" already exists',
        "AlreadyExists",
        {"name": name, "group": group, "kind": resource},
    )


def conflict(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {resource}{"." + group if group else ""} "{name}": '
        "the object has been modified; please apply your changes to the latest version and try again",
        "Conflict",
        {"name": name, "group": group, "kind": resource},
    )


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    """422 Invalid with one cause per ``(field, message)``."""
    text = "; ".join(f"{field}: {msg}" for field, msg in causes)
    return ApiError(
        422,
        f'{kind}{"." + group if group else ""} "{name}" is invalid: {text}',
        "Invalid",
        {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": msg, "field": f} for f, msg in causes],
        },
    )


def gone(message: str) -> ApiError:
    return ApiError(410, message, "Expired")
