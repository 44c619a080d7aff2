"""``/v1/dashboard`` (the web dashboard's read API, its plots under ``/v1/dashboard/plots``) and ``/v1/stream``
(live changes as Server-Sent Events).

Same bearer tokens and tenancy as the rest of the API: a member sees its tenant's jobs and queues, an
administrator everything; another tenant's job answers 404.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Path, Query
from fastapi.sse import EventSourceResponse, ServerSentEvent

from schemas.api import HistoryItem, StreamReady, ViewState
from schemas.config import CohortConfig
from schemas.envelope import Name
from services.gateway.context import GatewayContext
from services.gateway.dashboard_models import (
    AllocationPlot,
    ClusterMap,
    JobDetail,
    JobGroup,
    JobPage,
    JobSort,
    Overview,
    PreemptionPlot,
    QueuesPage,
    WaitPlot,
    WhoAmI,
)
from services.gateway.dashboard_plots import allocation_plot, job_spans, preemption_plot, wait_plot
from services.gateway.dashboard_query import (
    JobQuery,
    Listed,
    gpu_map,
    job_detail,
    job_page,
    overview,
    queues_page,
)
from services.gateway.dashboard_series import SERIES_WINDOW_S, WAIT_WINDOW_S
from services.gateway.deps import Caller, Context
from services.gateway.errors import ApiError
from services.gateway.live import KINDS, Change, Kind, StreamFilter
from services.gateway.presenters import job_from_submission, summary

router = APIRouter(tags=["dashboard"])

Filter = Annotated[str | None, Query(max_length=253)]


def listed_jobs(ctx: GatewayContext) -> list[Listed]:
    """Every job the gateway knows: the status view, and recent submissions it does not show yet."""
    jobs: list[Listed] = list(ctx.status.jobs())
    jobs += [job_from_submission(e) for e in ctx.recent.all() if e.submission.job_id not in ctx.status]
    return jobs


def user_of(ctx: GatewayContext, job_id: str) -> str | None:
    user = ctx.dashboard.records.user(job_id)
    if user is None:
        entry = ctx.recent.get(job_id)
        user = entry.submission.user if entry is not None else None
    return user


@router.get("/v1/dashboard/whoami", response_model=WhoAmI)
async def whoami(caller: Caller) -> WhoAmI:
    """The caller's tenant, user and role (the dashboard's sign-in checks a token with it)."""
    return WhoAmI(tenant=caller.tenant, user=caller.user, role=caller.role, may_act=caller.may_act)


@router.get("/v1/dashboard/jobs", response_model=JobPage)
async def jobs_table(
    ctx: Context, caller: Caller,
    tenant: Filter = None, queue: Filter = None, state: Annotated[ViewState | None, Query()] = None,
    priority_class: Filter = None, cluster: Filter = None, user: Filter = None,
    text: Annotated[str | None, Query(max_length=200, description="substring of id, name, reason or message")] = None,
    sort: JobSort = "submitted_at", descending: bool = True, group: JobGroup | None = None,
    offset: Annotated[int, Query(ge=0)] = 0, limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> JobPage:
    """One page of the jobs table: filtered, sorted, optionally grouped by queue or state, with the values
    each filter can take."""
    query = JobQuery(tenant=tenant, queue=queue, state=state, priority_class=priority_class, cluster=cluster,
                     user=user, text=text, sort=sort, descending=descending, group=group, offset=offset, limit=limit)
    return job_page(listed_jobs(ctx), lambda job_id: user_of(ctx, job_id), caller, query)


@router.get("/v1/dashboard/overview", response_model=Overview)
async def dashboard_overview(ctx: Context, caller: Caller) -> Overview:
    """Jobs by state, GPUs per cluster and type, admissions per minute, the queues that wait longest."""
    now = ctx.now()
    admissions = ctx.dashboard.admissions.per_minute(now, caller.owns)
    return overview(listed_jobs(ctx), ctx.dashboard.nodes.nodes(), admissions, ctx.config.queues(), caller, now)


@router.get("/v1/dashboard/queues", response_model=QueuesPage)
async def dashboard_queues(ctx: Context, caller: Caller) -> QueuesPage:
    """The cohort tree and, per queue, quota, use, borrowing, lending, waiting work, shares and budget."""
    cohorts = [c for c in ctx.config.items("cohort") if isinstance(c, CohortConfig)]
    return queues_page(ctx.config.queues(), cohorts, ctx.usage.queue, ctx.dashboard.ledger.budget,
                       listed_jobs(ctx), caller, ctx.dashboard.ledger.burst)


@router.get("/v1/dashboard/cluster", response_model=ClusterMap)
async def dashboard_cluster(ctx: Context, caller: Caller) -> ClusterMap:
    """Every node's GPUs grouped by cluster, block and rack, with the job on each GPU."""
    return ClusterMap(racks=gpu_map(ctx.dashboard.nodes.nodes(), ctx.dashboard.records.items(), caller))


@router.get("/v1/dashboard/jobs/{job_id}", response_model=JobDetail)
async def dashboard_job(job_id: Annotated[str, Path(max_length=48)], ctx: Context, caller: Caller) -> JobDetail:
    """One job: spec, states seen, why it waits and when it should start, placement, chargeback, actions."""
    job = ctx.visible_job(job_id, caller)
    record = ctx.dashboard.records.get(job_id)
    entry = ctx.recent.get(job_id)
    spec = record.submission.spec if record is not None else (entry.submission.spec if entry is not None else None)
    history = [HistoryItem(state=h.state, reason=h.reason, message=h.message, attempt=h.attempt, at=h.at)
               for h in ctx.status.history(job_id)]
    detail = job_detail(job, user_of(ctx, job_id), summary(job), spec, record, history,
                        ctx.dashboard.ledger.charges(job_id), caller)
    activity = ctx.job_events(job_id, spec)
    spans = job_spans(history, job.submitted_at, ctx.now())
    return detail.model_copy(update={"attempts": activity.attempts, "events": activity.events, "spans": spans})


SeriesWindow = Annotated[int, Query(ge=300, le=SERIES_WINDOW_S, description="seconds back from now")]
WaitWindow = Annotated[int, Query(ge=900, le=WAIT_WINDOW_S, description="seconds back from now")]


@router.get("/v1/dashboard/plots/allocation", response_model=AllocationPlot)
async def plot_allocation(ctx: Context, caller: Caller, window_s: SeriesWindow = 3600) -> AllocationPlot:
    """GPUs allocated per queue over time, for a stacked area: the queues that held the most, the rest summed,
    and the clusters' GPUs now."""
    return allocation_plot(ctx.dashboard.series, ctx.dashboard.nodes.nodes(), caller, ctx.now(), window_s)


@router.get("/v1/dashboard/plots/preemptions", response_model=PreemptionPlot)
async def plot_preemptions(ctx: Context, caller: Caller, window_s: SeriesWindow = 3600) -> PreemptionPlot:
    """Preemptions per queue in every step of the window, and by reason."""
    return preemption_plot(ctx.dashboard.series, caller, ctx.now(), window_s)


@router.get("/v1/dashboard/plots/waits", response_model=WaitPlot)
async def plot_waits(ctx: Context, caller: Caller, window_s: WaitWindow = WAIT_WINDOW_S) -> WaitPlot:
    """How long the jobs first admitted in the window waited from submission, per queue and size class
    (1 GPU or a share of one, 2-4, 5-8, more than 8): a histogram, mean, median and 90th percentile."""
    return wait_plot(ctx.dashboard.series, caller, ctx.now(), window_s)


_STREAM_DOC = """Server-Sent Events (`text/event-stream`) of every change the caller may see, batched every
100 ms and coalesced per object (only an object's latest state is sent). Events:

- `ready` (`StreamReady`): the stream is open; read current state now (the list endpoints), then apply
  changes as they arrive (compare `updated_at`: a change may repeat what the read returned).
- `jobs`: a JSON array of `JobRow` (the job view plus its user).
- `removed`: a JSON array of job ids no longer known.
- `queues`: a JSON array of `QueueUsageReported` payloads.
- `nodes`: a JSON array of `{"key": "<cluster>/<node>", "state": NodeState | null}`.

Comment lines (`: ping`) keep idle connections open. The stream ends when the gateway shuts down;
reconnect and read again."""


def stream_filter(
    caller: Caller,
    kinds: Annotated[list[Kind] | None, Query(description="what to follow; all kinds when absent")] = None,
    job_id: Annotated[str | None, Query(max_length=48)] = None,
    queue: Annotated[Name | None, Query()] = None,
    tenant: Annotated[Name | None, Query(description="administrators only; members see their own tenant")] = None,
) -> StreamFilter:
    """What a stream follows; refused here, before the stream starts, when the caller may not follow it."""
    if tenant is not None and not caller.owns(tenant):
        raise ApiError(403, "forbidden", "members may follow only their own tenant's jobs", field="tenant")
    return StreamFilter(kinds=frozenset(kinds or KINDS), job_id=job_id, queue=queue, tenant=tenant)


@router.get("/v1/stream", response_class=EventSourceResponse, description=_STREAM_DOC)
async def stream(ctx: Context, caller: Caller,
                 wanted: Annotated[StreamFilter, Depends(stream_filter)]) -> AsyncIterator[ServerSentEvent]:
    """Live changes of jobs, queue usage and nodes."""
    with ctx.dashboard.hub.subscribe(caller, wanted) as subscription:
        ready = StreamReady(at=ctx.now(), kinds=sorted(wanted.kinds))
        yield ServerSentEvent(event="ready", data=ready)
        while True:
            batch = await subscription.next_batch()
            if not batch:
                return
            for event in _events(batch):
                yield event


def _events(batch: list[Change]) -> list[ServerSentEvent]:
    jobs = [c.data for c in batch if c.kind == "job" and c.data is not None]
    removed = [c.key for c in batch if c.kind == "job" and c.data is None]
    queues = [c.data for c in batch if c.kind == "queue" and c.data is not None]
    nodes = [f'{{"key":{_quote(c.key)},"state":{c.data or "null"}}}' for c in batch if c.kind == "node"]
    events = []
    if jobs:
        events.append(ServerSentEvent(event="jobs", raw_data=f"[{','.join(jobs)}]"))
    if removed:
        events.append(ServerSentEvent(event="removed", data=removed))
    if queues:
        events.append(ServerSentEvent(event="queues", raw_data=f"[{','.join(queues)}]"))
    if nodes:
        events.append(ServerSentEvent(event="nodes", raw_data=f"[{','.join(nodes)}]"))
    return events


def _quote(text: str) -> str:
    return orjson.dumps(text).decode()
