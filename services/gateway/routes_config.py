"""``/v1/queues`` (quotas and usage) and ``/v1/config`` (read; administrators change and delete items, tenant
administrators their own tenant's queues)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from schemas.api import ConfigChange, ConfigDocument, QueueList, QueueView
from schemas.config import (
    CohortConfig,
    GpuTypeConfig,
    PoolConfig,
    PriorityClassConfig,
    QueueConfig,
    TenantConfig,
)
from services.gateway.auth import Principal
from services.gateway.configs import check_definition, check_deletion
from services.gateway.context import GatewayContext
from services.gateway.deps import Admin, Caller, Context, QueueEditor
from services.gateway.errors import BODY_NAME_KEY, ApiError
from services.gateway.presenters import queue_view
from services.gateway.tenant_queues import check_queue_change, refuse_kind
from services.gateway.views import ConfigItem, ConfigKind

router = APIRouter(tags=["queues and configuration"])

ItemName = Annotated[str, Path(max_length=63)]
_ITEM = {BODY_NAME_KEY: "item"}


@router.get("/v1/queues", response_model=QueueList)
async def list_queues(ctx: Context, caller: Caller) -> QueueList:
    """Queues with their quotas, current usage and job counts; members see their tenant's queues."""
    jobs = ctx.status.jobs()
    return QueueList(items=[queue_view(q, ctx.usage.queue(q.name), jobs)
                            for q in ctx.config.queues() if caller.owns(q.tenant)])


@router.get("/v1/queues/{name}", response_model=QueueView)
async def get_queue(name: ItemName, ctx: Context, caller: Caller) -> QueueView:
    queue = ctx.config.queue(name)
    if queue is None or not caller.owns(queue.tenant):
        raise ApiError(404, "not_found", f"no queue {name!r}", field="name")
    return queue_view(queue, ctx.usage.queue(name), ctx.status.jobs())


@router.get("/v1/config", response_model=ConfigDocument)
async def get_config(ctx: Context, caller: Caller) -> ConfigDocument:
    """The configuration; members see their own tenant and queues, and the shared items."""
    cfg = ctx.config
    return ConfigDocument(
        queues=[q for q in cfg.queues() if caller.owns(q.tenant)],
        cohorts=[c for c in cfg.items("cohort") if isinstance(c, CohortConfig)],
        priority_classes=[p for p in cfg.items("priority-class") if isinstance(p, PriorityClassConfig)],
        gpu_types=[g for g in cfg.items("gpu-type") if isinstance(g, GpuTypeConfig)],
        pools=[p for p in cfg.items("pool") if isinstance(p, PoolConfig)],
        tenants=[t for t in cfg.items("tenant") if isinstance(t, TenantConfig) and caller.owns(t.name)],
    )


async def _define(ctx: GatewayContext, kind: ConfigKind, name: str, item: ConfigItem,
                  response: Response) -> ConfigChange:
    check_definition(kind, name, item, ctx.config)
    envelope = await ctx.define(kind, item)
    if envelope is None:
        response.status_code = 200
        return ConfigChange(kind=kind, name=name, changed=False)
    return ConfigChange(kind=kind, name=name, changed=True, event_id=envelope.event_id)


async def _delete(ctx: GatewayContext, kind: ConfigKind, name: str, caller: Principal) -> ConfigChange:
    check_deletion(kind, name, ctx.config, ctx.visible_jobs(caller))
    envelope = await ctx.undefine(kind, name)
    return ConfigChange(kind=kind, name=name, changed=True, event_id=envelope.event_id)


async def _tenant_admin_change(ctx: GatewayContext, caller: Principal, name: str, item: QueueConfig | None,
                               response: Response | None) -> ConfigChange:
    """A tenant administrator's queue change: checked against the tenant's rules and quota, and published,
    one at a time, with the changes this gateway has not read back yet taken into account."""
    pending = ctx.pending_queues
    async with pending.lock:
        now = ctx.now().timestamp()
        check_queue_change(caller, name, item, ctx.config, pending.current(ctx.config, now))
        if item is None:
            change = await _delete(ctx, "queue", name, caller)
        else:
            assert response is not None
            change = await _define(ctx, "queue", name, item, response)
        if change.changed:
            pending.published(name, item, now)
        return change


_PUT = {"status_code": 202, "response_model": ConfigChange, "openapi_extra": _ITEM}
_DELETE = {"status_code": 202, "response_model": ConfigChange}


@router.put("/v1/config/queues/{name}", **_PUT)  # type: ignore[arg-type]
async def put_queue(name: ItemName, item: QueueConfig, ctx: Context, caller: QueueEditor,
                    response: Response) -> ConfigChange:
    """Administrators define any queue; a tenant administrator its own tenant's, within the tenant's
    ``queue_quota`` (422 `tenant_quota_exceeded`), in the cohorts its ``queue_cohorts`` lists (403
    `cohort_not_allowed`), leaving `allow_privileged`, `weight` and `pool` as they are (403 `reserved_field`);
    another tenant's queue: 403 `other_tenant`."""
    if caller.is_admin:
        return await _define(ctx, "queue", name, item, response)
    return await _tenant_admin_change(ctx, caller, name, item, response)


@router.put("/v1/config/cohorts/{name}", **_PUT)  # type: ignore[arg-type]
async def put_cohort(name: ItemName, item: CohortConfig, ctx: Context, _: Admin, response: Response) -> ConfigChange:
    return await _define(ctx, "cohort", name, item, response)


@router.put("/v1/config/priority-classes/{name}", **_PUT)  # type: ignore[arg-type]
async def put_priority_class(name: ItemName, item: PriorityClassConfig, ctx: Context, _: Admin,
                             response: Response) -> ConfigChange:
    return await _define(ctx, "priority-class", name, item, response)


@router.put("/v1/config/tenants/{name}", **_PUT)  # type: ignore[arg-type]
async def put_tenant(name: ItemName, item: TenantConfig, ctx: Context, _: Admin, response: Response) -> ConfigChange:
    """Administrators define a tenant. A new tenant whose name gives the job id tag of a tenant the configuration
    knows is refused, 422 `tenant_tag_collision`: their job ids could not be told apart (see
    ``services.spec.ids``); a queue naming such a new tenant is refused the same way."""
    return await _define(ctx, "tenant", name, item, response)


@router.put("/v1/config/gpu-types/{name}", **_PUT)  # type: ignore[arg-type]
async def put_gpu_type(name: ItemName, item: GpuTypeConfig, ctx: Context, _: Admin,
                       response: Response) -> ConfigChange:
    return await _define(ctx, "gpu-type", name, item, response)


@router.put("/v1/config/pools/{name}", **_PUT)  # type: ignore[arg-type]
async def put_pool(name: ItemName, item: PoolConfig, ctx: Context, _: Admin, response: Response) -> ConfigChange:
    return await _define(ctx, "pool", name, item, response)


_PATHS: dict[str, ConfigKind] = {"queues": "queue", "cohorts": "cohort", "priority-classes": "priority-class",
                                 "tenants": "tenant", "gpu-types": "gpu-type", "pools": "pool"}


@router.delete("/v1/config/{collection}/{name}", **_DELETE)  # type: ignore[arg-type]
async def delete_item(collection: Annotated[str, Path(pattern="^(" + "|".join(_PATHS) + ")$")], name: ItemName,
                      ctx: Context, caller: Caller) -> ConfigChange:
    """Delete an item no other item refers to and, for a queue or a priority class, no unfinished job is in
    or of (409 otherwise: `in_use`, `has_unfinished_jobs`). Administrators; a tenant administrator deletes
    its own tenant's queues (403 `other_tenant` for another tenant's)."""
    kind = _PATHS[collection]
    if caller.is_admin:
        return await _delete(ctx, kind, name, caller)
    if caller.is_tenant_admin and kind == "queue":
        return await _tenant_admin_change(ctx, caller, name, None, None)
    raise refuse_kind(caller, kind)
