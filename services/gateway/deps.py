"""The routes' dependencies: the gateway context, the authenticated caller, the administrator, the queue editor."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.gateway.auth import Principal
from services.gateway.context import GatewayContext
from services.gateway.errors import ApiError

_bearer = HTTPBearer(auto_error=False, description="a token from the gateway's tokens file")


def context(request: Request) -> GatewayContext:
    ctx = request.app.state.gateway
    assert isinstance(ctx, GatewayContext)
    return ctx


Context = Annotated[GatewayContext, Depends(context)]


def principal(
    ctx: Context, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The caller, from ``Authorization: Bearer <token>``; 401 otherwise."""
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise ApiError(401, "unauthenticated", "send Authorization: Bearer <token>", headers=challenge)
    who = ctx.tokens.authenticate(credentials.credentials)
    if who is None:
        raise ApiError(401, "unauthenticated", "unknown token", headers=challenge)
    return who


Caller = Annotated[Principal, Depends(principal)]


def admin(caller: Caller) -> Principal:
    if not caller.is_admin:
        if caller.is_tenant_admin:
            raise ApiError(403, "admin_required", "a tenant administrator may change only its tenant's queues; "
                           "ask an administrator")
        raise ApiError(403, "admin_required", "only administrators may change the configuration")
    return caller


Admin = Annotated[Principal, Depends(admin)]


def queue_editor(caller: Caller) -> Principal:
    """An administrator, or a tenant administrator (whose changes ``services.gateway.tenant_queues`` checks)."""
    if not (caller.is_admin or caller.is_tenant_admin):
        raise ApiError(403, "admin_required", "only administrators and tenant administrators may change queues")
    return caller


QueueEditor = Annotated[Principal, Depends(queue_editor)]
