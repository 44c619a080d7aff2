"""The FastAPI application: its routers, error bodies, request metrics, health and metrics routes."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import ValidationError

from schemas.api import ErrorBody
from services.gateway.context import GatewayContext
from services.gateway.docs_ui import mount_docs
from services.gateway.errors import ApiError, api_error_handler, request_validation_handler
from services.gateway.routes_config import router as config_router
from services.gateway.routes_jobs import router as jobs_router
from services.gateway.routes_recurring import router as recurring_router
from services.runtime.metrics_access import MetricsAccess

ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorBody, "description": "missing or unknown bearer token"},
    403: {"model": ErrorBody, "description": "not allowed for this tenant or role"},
    404: {"model": ErrorBody, "description": "unknown (or another tenant's) object"},
    409: {"model": ErrorBody, "description": "conflicts with the current state"},
    413: {"model": ErrorBody, "description": "the request is larger than a message on the wire may be"},
    422: {"model": ErrorBody, "description": "invalid request; `field` names the offending field"},
}


def create_app(ctx: GatewayContext, registry: CollectorRegistry,
               metrics_access: MetricsAccess | None = None) -> FastAPI:
    """The API wired to ``ctx``; ``registry`` is served at /metrics to whom ``metrics_access`` allows (None: as
    the environment says, ``services.runtime.metrics_access``)."""
    access = metrics_access or MetricsAccess.from_env()
    app = FastAPI(
        title="Muster gateway",
        version="1",
        description="Submit and follow GPU jobs; read queues and configuration. Every /v1 route needs "
                    "`Authorization: Bearer <token>`. Another tenant's job answers 404, not 403, so that its "
                    "existence is not revealed.",
        responses=ERROR_RESPONSES,
        docs_url=None,  # served from local assets by mount_docs, not from a CDN
        redoc_url=None,
    )
    mount_docs(app)
    app.state.gateway = ctx
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(RequestValidationError, request_validation_handler)
    app.add_exception_handler(ValidationError, request_validation_handler)
    app.include_router(jobs_router)
    app.include_router(config_router)
    app.include_router(recurring_router)
    from services.gateway.dashboard import install_dashboard

    install_dashboard(app, ctx)

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        ctx.metrics.requests.labels(request.method, path, str(response.status_code)).inc()
        ctx.metrics.latency.labels(request.method, path).observe(time.perf_counter() - started)
        return response

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, object]:
        views = {"status": ctx.status.caught_up, "config": ctx.config.caught_up, "usage": ctx.usage.caught_up}
        return {"service": "gateway", "status": "ok", "views_caught_up": views}

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        verdict = access.check(request.client.host if request.client else None, request.headers.get("Authorization"))
        if not verdict.allowed:
            return Response(verdict.reason + "\n", status_code=verdict.status, media_type="text/plain",
                            headers=dict(verdict.headers or {}))
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
