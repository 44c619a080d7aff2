"""``/v1/jobs``: submit, read, explain, cancel, suspend, resume, re-prioritise, scale."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Response

from schemas.api import (
    Action,
    ActionAccepted,
    CancelRequest,
    ErrorBody,
    Explanation,
    JobEvents,
    JobList,
    JobView,
    PriorityPatch,
    RecurringAccepted,
    ScaleRequest,
    SubmitAccepted,
    ViewState,
)
from schemas.envelope import Envelope, Name
from schemas.intents import CancelJob, ChangePriority, ResumeJob, ScaleJob, SuspendJob
from schemas.status import TERMINAL_STATES
from services.gateway.context import GatewayContext
from services.gateway.deps import Caller, Context
from services.gateway.errors import BODY_NAME_KEY, ApiError
from services.gateway.job_requests import JobSubmission
from services.gateway.presenters import explanation
from services.gateway.routes_recurring import define_recurring
from services.gateway.submission_rules import check_preemptibility

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
#: the longest a request about a job waits for the queue manager's answer (``?wait=``)
MAX_ACTION_WAIT_S = 30.0

JobPath = Annotated[str, Path(description="job id", max_length=48)]
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=128,
                                              description="retries with the same key are the same job")]


@router.post("", status_code=202, response_model=SubmitAccepted | RecurringAccepted,
             openapi_extra={BODY_NAME_KEY: "spec"},
             responses={200: {"model": SubmitAccepted | RecurringAccepted,
                              "description": "a repeat of an earlier submission or recurring job"},
                        201: {"model": RecurringAccepted, "description": "a new recurring job (`schedule` set)"}})
async def submit_job(spec: JobSubmission, ctx: Context, caller: Caller, response: Response,
                     idempotency_key: IdempotencyKey = None) -> SubmitAccepted | RecurringAccepted:
    """Queue a job. With ``Idempotency-Key`` a retried submission returns the same job id and publishes nothing.

    A spec with ``schedule`` (a cron expression, UTC) is not queued now: it defines the recurring job
    ``<tenant>.<spec name>``, which submits the spec at every firing; re-posting it changes nothing.

    A job that is a Kubernetes object of a workload kind (JobSet, TrainJob, RayJob, RayCluster, LeaderWorkerSet,
    Deployment, StatefulSet, a ``List`` of Pods) gives it as ``workload.manifest``; its ``roles`` may be left out:
    the gateway reads them from the manifest (and ``name`` from its ``metadata.name``). Roles given beside a
    manifest must be the manifest's own (422 ``roles_do_not_match_workload``; a role's ``topology`` may be added);
    a manifest Muster cannot queue answers 422 ``workload_not_queueable``.

    Secrets are read from Kubernetes Secrets of the tenant's namespace (``secret_ref``, ``env_from``), never
    sent as plain values: an environment entry whose name (``*_TOKEN``, ``*_PASSWORD``, ``*_KEY``...) or value (a
    URL with a password) looks like a secret answers 422 ``plain_secret_env`` unless it says ``not_secret``.
    """
    if spec.schedule is not None:
        return await define_recurring(ctx, spec, caller, response)
    plan, job = await ctx.submit(spec, caller, idempotency_key)
    location = f"/v1/jobs/{plan.job_id}"
    response.headers["Location"] = location
    if not plan.new:
        response.status_code = 200
    return SubmitAccepted(job_id=plan.job_id, state=job.state, location=location, duplicate=not plan.new)


@router.get("", response_model=JobList)
async def list_jobs(
    ctx: Context, caller: Caller,
    queue: Annotated[Name | None, Query()] = None,
    state: Annotated[ViewState | None, Query()] = None,
    tenant: Annotated[Name | None, Query(description="administrators only; members see their own tenant")] = None,
    active: Annotated[bool | None, Query(description="true: only unfinished jobs; false: only finished ones")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, description="skip this many matches (paging; newest first)")] = 0,
) -> JobList:
    """Jobs the caller may see, newest first; ``total`` counts every match, beyond ``offset`` and ``limit`` too."""
    if tenant is not None and not caller.owns(tenant):
        raise ApiError(403, "forbidden", "members may list only their own tenant's jobs", field="tenant")
    jobs = [j for j in ctx.visible_jobs(caller)
            if (queue is None or j.queue == queue) and (state is None or j.state == state)
            and (tenant is None or j.tenant == tenant)
            and (active is None or (j.state not in TERMINAL_STATES) == active)]
    jobs.sort(key=lambda j: (j.submitted_at, j.job_id), reverse=True)
    return JobList(items=jobs[offset:offset + limit], total=len(jobs))


@router.get("/{job_id}", response_model=JobView)
async def get_job(job_id: JobPath, ctx: Context, caller: Caller) -> JobView:
    """One job. Unknown jobs and other tenants' jobs both answer 404."""
    return ctx.visible_job(job_id, caller)


@router.get("/{job_id}/explain", response_model=Explanation)
async def explain_job(job_id: JobPath, ctx: Context, caller: Caller) -> Explanation:
    """Why the job is where it is: reason, message, queue position, estimated start, states seen."""
    job = ctx.visible_job(job_id, caller)
    return explanation(job, ctx.status.history(job_id))


@router.get("/{job_id}/events", response_model=JobEvents)
async def job_events(job_id: JobPath, ctx: Context, caller: Caller) -> JobEvents:
    """The job's Kubernetes objects per attempt (cluster, namespace, Job names, pods and their nodes) and its
    events, oldest first: the states Muster gave it and what the dispatcher and the node-state watcher
    reported (dispatches, starts, failures with their classification, evictions, deletions). Read from
    Muster's topics, not from the Kubernetes API; run reports are kept for the topics' retention."""
    ctx.visible_job(job_id, caller)
    return ctx.job_events(job_id)


ActionWait = Annotated[float, Query(
    ge=0, le=MAX_ACTION_WAIT_S,
    description="wait up to this many seconds for the queue manager's answer: 200 with the outcome (applied or "
                "unchanged), 409 with the reason when refused, 202 `pending` when not answered by then")]
ActionId = Annotated[str, Path(description="the request's event id, as its answer gave it", max_length=64)]
_ACTION_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"model": ActionAccepted, "description": "answered within `wait`: applied or unchanged"},
    409: {"model": ErrorBody, "description": "refused (`error` is the reason) or the job has ended"}}


async def _requested(ctx: GatewayContext, job_id: str, action: Action, envelope: Envelope, wait: float,
                     response: Response) -> ActionAccepted:
    """The answer to a request just published: waited for up to ``wait`` seconds."""
    answer = await ctx.answers.wait(job_id, envelope.event_id, wait)
    if answer is None:
        return ActionAccepted(job_id=job_id, action=action, event_id=envelope.event_id)
    if answer.outcome == "refused":
        raise ApiError(409, answer.reason or "refused", answer.message or f"{action} refused", field="job_id")
    response.status_code = 200
    return ActionAccepted(job_id=job_id, action=action, event_id=envelope.event_id, outcome=answer.outcome,
                          message=answer.message)


@router.get("/{job_id}/actions/{event_id}", response_model=ActionAccepted)
async def action_outcome(job_id: JobPath, event_id: ActionId, ctx: Context, caller: Caller) -> ActionAccepted:
    """The outcome of a request about the job (cancel, suspend, resume, priority, scale) by the event id its
    answer gave. 404 ``not_answered`` until the queue manager answered it, or once the gateway no longer
    remembers it (the most recent 10,000 answers are kept; the job's ``last_action`` always shows the latest)."""
    job = ctx.visible_job(job_id, caller)
    answer = ctx.answers.get(job_id, event_id)
    if answer is None and job.last_action is not None and job.last_action.event_id == event_id:
        answer = job.last_action
    if answer is None:
        raise ApiError(404, "not_answered", f"no answer to request {event_id} about job {job_id} (yet)",
                       field="event_id")
    return ActionAccepted(job_id=job_id, action=answer.action, event_id=event_id, outcome=answer.outcome,
                          reason=answer.reason, message=answer.message)


@router.post("/{job_id}/cancel", status_code=202, response_model=ActionAccepted, responses=_ACTION_ANSWERS,
             openapi_extra={BODY_NAME_KEY: "cancel"})
async def cancel_job(job_id: JobPath, ctx: Context, caller: Caller, response: Response,
                     body: Annotated[CancelRequest | None, Body()] = None, wait: ActionWait = 0) -> ActionAccepted:
    reason = body.reason if body is not None else ""
    env = await ctx.act(job_id, caller, lambda j: CancelJob(job_id=j.job_id, requested_by=caller.user, reason=reason))
    return await _requested(ctx, job_id, "cancel", env, wait, response)


@router.post("/{job_id}/suspend", status_code=202, response_model=ActionAccepted, responses=_ACTION_ANSWERS)
async def suspend_job(job_id: JobPath, ctx: Context, caller: Caller, response: Response,
                      wait: ActionWait = 0) -> ActionAccepted:
    env = await ctx.act(job_id, caller, lambda j: SuspendJob(job_id=j.job_id, requested_by=caller.user))
    return await _requested(ctx, job_id, "suspend", env, wait, response)


@router.post("/{job_id}/resume", status_code=202, response_model=ActionAccepted, responses=_ACTION_ANSWERS)
async def resume_job(job_id: JobPath, ctx: Context, caller: Caller, response: Response,
                     wait: ActionWait = 0) -> ActionAccepted:
    env = await ctx.act(job_id, caller, lambda j: ResumeJob(job_id=j.job_id, requested_by=caller.user))
    return await _requested(ctx, job_id, "resume", env, wait, response)


@router.patch("/{job_id}", status_code=202, response_model=ActionAccepted, responses=_ACTION_ANSWERS,
              openapi_extra={BODY_NAME_KEY: "patch"})
async def patch_job(job_id: JobPath, patch: PriorityPatch, ctx: Context, caller: Caller, response: Response,
                    wait: ActionWait = 0) -> ActionAccepted:
    """Change the job's priority class."""
    if not ctx.config.has_priority_class(patch.priority_class):
        raise ApiError(422, "unknown_priority_class", f"no priority class named {patch.priority_class!r}",
                       field="patch.priority_class")
    job = ctx.visible_job(job_id, caller)
    check_preemptibility(job.tenant, patch.priority_class, ctx.config, field_prefix="patch")
    env = await ctx.act(job_id, caller, lambda j: ChangePriority(
        job_id=j.job_id, priority_class=patch.priority_class, requested_by=caller.user))
    return await _requested(ctx, job_id, "change_priority", env, wait, response)


@router.post("/{job_id}/scale", status_code=202, response_model=ActionAccepted, responses=_ACTION_ANSWERS,
             openapi_extra={BODY_NAME_KEY: "scale"})
async def scale_job(job_id: JobPath, scale: ScaleRequest, ctx: Context, caller: Caller, response: Response,
                    wait: ActionWait = 0) -> ActionAccepted:
    """Ask for a new gang size (elastic jobs)."""
    env = await ctx.act(job_id, caller, lambda j: ScaleJob(
        job_id=j.job_id, replicas=scale.replicas, requested_by=caller.user))
    return await _requested(ctx, job_id, "scale", env, wait, response)
