"""``/v1/recurring``: job specs submitted again on a cron schedule (defined by ``POST /v1/jobs`` with ``schedule``)."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from schemas.api import RecurringAccepted, RecurringChange, RecurringList, RecurringView
from schemas.config import ConfigItemDeleted, RecurringJobConfig, RecurringJobDefined
from schemas.envelope import Name
from schemas.jobspec import JobSpec
from services.gateway.auth import Principal
from services.gateway.context import GatewayContext
from services.gateway.deps import Caller, Context
from services.gateway.errors import ApiError
from services.gateway.recurring import (
    plan_recurring,
    recurring_view,
    upcoming,
    visible_recurring,
    with_suspended,
)

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/recurring", tags=["recurring jobs"])

KIND = RecurringJobDefined.KIND
RecurringPath = Annotated[str, Path(description="recurring job name, `<tenant>.<spec name>`", max_length=63)]


async def define_recurring(ctx: GatewayContext, spec: JobSpec, caller: Principal,
                           response: Response) -> RecurringAccepted:
    """Publish the recurring job a scheduled spec defines; 201 when new, 200 when it existed."""
    try:
        plan = plan_recurring(spec, caller, ctx.config, ctx.now())
    except ApiError as exc:
        ctx.metrics.submissions.labels("api", exc.error).inc()
        raise
    item = plan.item
    if plan.changed:
        await ctx.publish_config(RecurringJobDefined(item=item), KIND, "api")
        log.info("%s recurring job %s (%s) for tenant %s", "defined" if plan.created else "updated", item.name,
                 item.spec.schedule, item.tenant)
    ctx.metrics.submissions.labels("api", "recurring" if plan.changed else "duplicate").inc()
    location = f"/v1/recurring/{item.name}"
    response.headers["Location"] = location
    response.status_code = 201 if plan.created else 200
    return RecurringAccepted(name=item.name, tenant=item.tenant, schedule=item.spec.schedule or "",
                             suspended=item.suspended, next_firings=upcoming(item, ctx.now()), location=location,
                             created=plan.created, changed=plan.changed)


@router.get("", response_model=RecurringList)
async def list_recurring(
    ctx: Context, caller: Caller,
    tenant: Annotated[Name | None, Query(description="administrators only; members see their own tenant")] = None,
) -> RecurringList:
    """Recurring jobs the caller may see, by name."""
    if tenant is not None and not caller.owns(tenant):
        raise ApiError(403, "forbidden", "members may list only their own tenant's recurring jobs", field="tenant")
    items = [r for r in ctx.config.recurring_jobs()
             if caller.owns(r.tenant) and (tenant is None or r.tenant == tenant)]
    jobs, now = ctx.status.jobs(), ctx.now()
    return RecurringList(items=[recurring_view(r, jobs, now) for r in items], total=len(items))


@router.get("/{name}", response_model=RecurringView)
async def get_recurring(name: RecurringPath, ctx: Context, caller: Caller) -> RecurringView:
    """One recurring job: its next firings and the jobs recent firings submitted."""
    item = visible_recurring(ctx.config, name, caller)
    return recurring_view(item, ctx.status.jobs(), ctx.now())


async def _set_suspended(ctx: GatewayContext, item: RecurringJobConfig, suspended: bool,
                         response: Response) -> RecurringChange:
    action = "suspend" if suspended else "resume"
    if item.suspended == suspended:
        response.status_code = 200
        return RecurringChange(name=item.name, action=action, changed=False)
    envelope = await ctx.publish_config(RecurringJobDefined(item=with_suspended(item, suspended)), KIND, action)
    return RecurringChange(name=item.name, action=action, changed=True, event_id=envelope.event_id)


@router.post("/{name}/suspend", status_code=202, response_model=RecurringChange)
async def suspend_recurring(name: RecurringPath, ctx: Context, caller: Caller, response: Response) -> RecurringChange:
    """Stop firing (jobs already submitted are not touched)."""
    return await _set_suspended(ctx, visible_recurring(ctx.config, name, caller), True, response)


@router.post("/{name}/resume", status_code=202, response_model=RecurringChange)
async def resume_recurring(name: RecurringPath, ctx: Context, caller: Caller, response: Response) -> RecurringChange:
    """Fire again; a firing missed while suspended fires only if it is within the starting deadline."""
    return await _set_suspended(ctx, visible_recurring(ctx.config, name, caller), False, response)


@router.delete("/{name}", status_code=202, response_model=RecurringChange)
async def delete_recurring(name: RecurringPath, ctx: Context, caller: Caller) -> RecurringChange:
    """Delete the recurring job (jobs already submitted are not touched)."""
    item = visible_recurring(ctx.config, name, caller)
    envelope = await ctx.publish_config(ConfigItemDeleted(kind=KIND, name=item.name), KIND, "delete")
    return RecurringChange(name=item.name, action="delete", changed=True, event_id=envelope.event_id)
