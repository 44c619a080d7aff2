"""API errors as clear JSON bodies: ``{"error": ..., "field": ..., "detail": ...}``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from schemas.api import ErrorBody

BODY_NAME_KEY = "x-body-name"
"""``openapi_extra`` key naming a route's body in error fields (``spec`` for a job spec)."""


class ApiError(Exception):
    """An error answer: HTTP ``status``, short machine-readable ``error``, the offending ``field``."""

    def __init__(self, status: int, error: str, detail: str = "", *, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail
        self.field = field
        self.headers = headers

    def body(self) -> ErrorBody:
        return ErrorBody(error=self.error, field=self.field, detail=self.detail)


def field_path(loc: Sequence[int | str], body_name: str = "body") -> str:
    """A pydantic error location as a dotted name: ``("body", "template", "image")`` -> ``spec.template.image``."""
    if not loc:
        return body_name
    head, *rest = loc
    if head == "body":
        return ".".join([body_name, *(str(p) for p in rest)])
    if head in ("query", "path", "header", "cookie"):
        return ".".join(str(p) for p in rest) or str(head)
    return ".".join(str(p) for p in loc)


def _body_name(request: Request) -> str:
    route = request.scope.get("route")
    extra = getattr(route, "openapi_extra", None) or {}
    name = extra.get(BODY_NAME_KEY, "body")
    return str(name)


def validation_errors(errors: Sequence[Any], body_name: str) -> list[dict[str, Any]]:
    """Each pydantic error as ``{"field", "detail"}``."""
    out = []
    for err in errors:
        out.append({"field": field_path(err.get("loc", ()), body_name), "detail": str(err.get("msg", ""))})
    return out


async def api_error_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.body().model_dump(exclude_none=True), status_code=exc.status, headers=exc.headers)


async def request_validation_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError | ValidationError)
    items = validation_errors(list(exc.errors()), _body_name(request))
    first = items[0] if items else {"field": None, "detail": "invalid request"}
    body = ErrorBody(error="validation_failed", field=first["field"], detail=first["detail"], errors=items)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=422)
