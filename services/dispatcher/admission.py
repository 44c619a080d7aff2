"""``JobAdmitted`` and ``JobScaled``: create (or release, or re-create) the Job of an attempt, idempotently.

Scaling re-creates the Job: an Indexed Job's completions and its pods' node affinity cannot change
once it runs, so a rescale creates revision n+1 of the attempt (``<job-id>-a<attempt>-r<n+1>``) for
the new replica count, pinned to the new placement, suspended until revision n's pods are gone (see
``replacement``). The gang restarts from its checkpoint (same MUSTER_ATTEMPT); a stable cluster gets
the GPUs of the old pods back.
"""

from __future__ import annotations

import logging

from schemas.decisions import JobAdmitted, JobScaled
from schemas.envelope import Envelope
from services.dispatcher import replacement
from services.dispatcher.book import Run, run_from_job
from services.dispatcher.context import Context, api_failure, emit, report_failure
from services.dispatcher.plans import (
    admission_manifest,
    clone_manifest,
    object_name,
    source_job,
    source_job_patch,
    users_job,
)
from services.runtime.kafka import Delivery
from services.runtime.kube import KubeObject

log = logging.getLogger(__name__)


async def admit(ctx: Context, envelope: Envelope, delivery: Delivery) -> None:
    decision = envelope.payload
    assert isinstance(decision, JobAdmitted)
    if decision.placement.cluster != ctx.cluster:
        return
    current = ctx.runs.get(decision.job_id)
    if ctx.is_finished(decision.job_id, decision.attempt) or (current and current.attempt > decision.attempt):
        log.info("job %s: admission of attempt %d is stale; ignored", decision.job_id, decision.attempt)
        ctx.outcome(decision.TYPE, "stale")
        return
    if current is not None and current.attempt == decision.attempt:
        if not current.reported or delivery.attempt > 1:
            await emit(delivery, envelope, ctx.dispatched(current))
            current.reported = True
        ctx.outcome(decision.TYPE, "repeat")
        return
    if current is not None:  # an older attempt is still around: the new one replaces it
        current = await ctx.take_over(decision.job_id)
    if current is not None:
        if not users_job(current.job_id, current.attempt, current.revision, current.name):
            await ctx.ops.delete_job(current.namespace, current.name, "superseded")
        # a user's Job is never deleted: it is the one this admission releases again (suspended by the stop)
        ctx.drop_run(current, finished=True)
    correlation = envelope.correlation_id or envelope.event_id
    try:
        source = source_job(decision)
        if source is not None:
            job = await _release(ctx, decision, envelope.event_id, correlation, source)
            if job is None:
                await report_failure(ctx, delivery, envelope, "source_job_missing",
                                     f"Job {source[0]}/{source[1]} to release does not exist", retryable=False)
                return
        else:
            manifest = admission_manifest(decision, envelope.event_id, correlation, ctx.settings)
            await ctx.ops.ensure_namespace(decision.namespace)
            job, _ = await ctx.ops.create_job(manifest)
    except ValueError as exc:
        await report_failure(ctx, delivery, envelope, "invalid_job", str(exc), retryable=False)
        return
    except Exception as exc:
        failure = api_failure(exc)
        if failure is None:
            raise
        log.warning("job %s attempt %d: dispatch failed (%s): %s", decision.job_id, decision.attempt, failure[0], exc)
        if failure[1] and source_job(decision) is None:
            await _discard_unconfirmed(ctx, decision)
        await report_failure(ctx, delivery, envelope, failure[0], str(exc), retryable=failure[1])
        return
    run = run_from_job(job) or Run(job_id=decision.job_id, attempt=decision.attempt, namespace=decision.namespace,
                                   name=str(job["metadata"]["name"]), max_restarts=decision.spec.max_restarts,
                                   decision_event=envelope.event_id, correlation_id=correlation)
    ctx.set_run(run)
    await emit(delivery, envelope, ctx.dispatched(run))
    run.reported = True
    ctx.metrics.jobs_created.labels(ctx.cluster).inc()
    latency = (ctx.clock() - envelope.occurred_at).total_seconds()
    ctx.metrics.dispatch_latency.labels(ctx.cluster).observe(max(latency, 0.0))
    ctx.outcome(decision.TYPE, "dispatched")
    log.info("job %s attempt %d dispatched as %s/%s", run.job_id, run.attempt, run.namespace, run.name)


async def _discard_unconfirmed(ctx: Context, decision: JobAdmitted) -> None:
    """After a retryable failure the queue manager requeues the attempt; a Job the API server created
    though its answer was lost must not run beside the next attempt. Best effort: the server may still
    be down, and the next attempt's admission replaces what is left (see ``admit``)."""
    name = object_name(decision.job_id, decision.attempt)
    try:
        await ctx.ops.delete_job(decision.namespace, name, "dispatch_failed")
    except Exception as exc:
        log.info("job %s: could not remove %s/%s after the failure (%s)", decision.job_id, decision.namespace,
                 name, exc)


async def _release(ctx: Context, decision: JobAdmitted, event_id: str, correlation: str,
                   source: tuple[str, str]) -> KubeObject | None:
    """The kube-native path: pin the user's suspended Job to the placement and unsuspend it."""
    namespace, name = source
    current = await ctx.ops.get_job(namespace, name)
    if current is None:
        return None
    template_spec = ((current.get("spec") or {}).get("template") or {}).get("spec") or {}
    body = source_job_patch(decision, event_id, correlation, template_spec.get("tolerations"))
    return await ctx.ops.patch_job(namespace, name, body)


async def scale(ctx: Context, envelope: Envelope, delivery: Delivery) -> None:
    decision = envelope.payload
    assert isinstance(decision, JobScaled)
    if decision.placement.cluster != ctx.cluster:
        return
    run = ctx.runs.get(decision.job_id)
    if run is None or run.attempt != decision.attempt:
        if run is None and not ctx.is_finished(decision.job_id, decision.attempt):
            await emit(delivery, envelope, ctx.failure(decision.job_id, decision.attempt, "not_dispatched",
                                                       "no Job of this attempt on the cluster", retryable=False))
        ctx.outcome(decision.TYPE, "stale")
        return
    if run.decision_event == envelope.event_id:
        if not run.reported or delivery.attempt > 1:
            await emit(delivery, envelope, ctx.dispatched(run))
            run.reported = True
        ctx.outcome(decision.TYPE, "repeat")
        return
    if run.preemption is not None:
        ctx.outcome(decision.TYPE, "stopping")
        return
    gone = f"Job {run.namespace}/{run.name} is gone"
    run = await ctx.take_over(decision.job_id)  # a rescale replaces a pending restart
    old = await ctx.ops.get_job(run.namespace, run.name) if run is not None else None
    if run is None or old is None:
        await report_failure(ctx, delivery, envelope, "not_found", gone, retryable=False)
        return
    revision = run.revision + 1
    manifest = clone_manifest(old, name=object_name(run.job_id, run.attempt, revision), revision=revision,
                              restarts=run.restarts, decision_event=envelope.event_id, placement=decision.placement)
    try:
        new_run = await replacement.replace(ctx, run, manifest, "rescale")
    except Exception as exc:
        failure = api_failure(exc)
        if failure is None:
            raise
        await report_failure(ctx, delivery, envelope, failure[0], str(exc), retryable=failure[1])
        return
    await emit(delivery, envelope, ctx.dispatched(new_run))
    new_run.reported = True
    ctx.outcome(decision.TYPE, "rescaled")
    log.info("job %s attempt %d rescaled to %d pods as %s", run.job_id, run.attempt, decision.placement.pods,
             new_run.name)
