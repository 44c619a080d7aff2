"""Whole-gang restart: a pod of the current Job failed, so the gang starts again, up to ``max_restarts`` times.

Only a failure of the job's own (``RunFailed.classification == "job"``) is restarted here, in place. An
infrastructure failure (a node's fault) is not: the Job is deleted and the queue manager requeues the job
as its next attempt, placed away from the failed nodes, without spending a restart.

On ``RunFailed`` for the current revision of the current attempt the failed Job is annotated with
``muster.dev/restart-at`` (now + an exponential backoff); a tracked task waits until then, creates
revision n+1 (``<job-id>-a<attempt>-r<n+1>``, same attempt, a copy of the failed Job, suspended until
the failed one's pods are gone: see ``replacement``) and deletes the failed one
(``delete-reason: restart``, which the node-state watcher does not report as RunDeleted).
The annotation makes a pending restart survive a dispatcher restart. When the budget is spent the Job
is deleted and ``DispatchFailed(reason="restarts_exhausted")`` reported.
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import timedelta

from schemas import kube as ann
from schemas.envelope import Envelope
from schemas.runs import NOT_RESTARTED_REASONS, RunFailed
from services.dispatcher import replacement
from services.dispatcher.book import Run
from services.dispatcher.context import Context, emit
from services.dispatcher.plans import clone_manifest, object_name, restart_delay
from services.runtime.kafka import Delivery
from services.runtime.kube import KubeObject

log = logging.getLogger(__name__)

#: the delete reason of a gang that failed for infrastructure reasons (its job is requeued as a new attempt)
INFRASTRUCTURE_FAILURE = "infrastructure_failure"

#: what follows ``<job name>-`` in the name of one of its pods: ``<index>-<suffix>`` or ``<suffix>``
_POD_SUFFIX = re.compile(r"^([0-9]+-)?[a-z0-9]{5}$")


def pod_of(pod_name: str, job_name: str) -> bool:
    """Whether ``pod_name`` is a pod the Job controller created for ``job_name`` (not for another revision)."""
    prefix = f"{job_name}-"
    return pod_name.startswith(prefix) and bool(_POD_SUFFIX.match(pod_name[len(prefix):]))


def job_failed(job: KubeObject) -> bool:
    status = job.get("status") or {}
    return int(status.get("failed") or 0) > 0 or any(
        c.get("type") == "Failed" and c.get("status") == "True" for c in status.get("conditions") or [])


async def on_run_failed(ctx: Context, envelope: Envelope, delivery: Delivery) -> None:
    failure = envelope.payload
    assert isinstance(failure, RunFailed)
    if failure.cluster != ctx.cluster:
        return
    run = ctx.runs.get(failure.job_id)
    if run is None or run.attempt != failure.attempt or run.preemption is not None or run.restart_at is not None:
        return
    if failure.reason in NOT_RESTARTED_REASONS:
        return  # the job ran out of time: restarting cannot help; the queue manager decides
    if failure.pod is not None and not pod_of(failure.pod, run.name):
        return  # a failure of an earlier revision, already handled
    if failure.pod is None:
        job = await ctx.ops.get_job(run.namespace, run.name)
        if job is None or not job_failed(job):
            return
    if failure.classification == "infrastructure":
        await _hand_back(ctx, run, failure)
        return
    if run.restarts >= run.max_restarts:
        await _give_up(ctx, envelope, delivery, run, failure)
        return
    at = ctx.clock() + timedelta(seconds=restart_delay(run.restarts, ctx.settings))
    if await ctx.ops.annotate_job(run.namespace, run.name, {ann.RESTART_AT: at.isoformat()}) is None:
        return  # the Job is gone; the watcher reports that
    run.restart_at = at
    log.info("job %s attempt %d: %s failed (%s); restart %d/%d at %s", run.job_id, run.attempt, failure.pod or
             run.name, failure.reason, run.restarts + 1, run.max_restarts, at.isoformat())
    schedule(ctx, run)


async def _give_up(ctx: Context, envelope: Envelope, delivery: Delivery, run: Run, failure: RunFailed) -> None:
    message = (f"gang failed {run.restarts + 1} times (max_restarts={run.max_restarts}); last: {failure.reason}"
               + (f" exit code {failure.exit_code}" if failure.exit_code is not None else "")
               + (f" in pod {failure.pod}" if failure.pod else ""))
    await emit(delivery, envelope, ctx.failure(run.job_id, run.attempt, "restarts_exhausted", message,
                                               retryable=False))
    await delivery.settle()  # reported before the Job goes, so a crash in between repeats rather than loses it
    await ctx.ops.delete_job(run.namespace, run.name, "restarts_exhausted")
    ctx.drop_run(run, finished=True)
    log.warning("job %s attempt %d: %s", run.job_id, run.attempt, message)


async def _hand_back(ctx: Context, run: Run, failure: RunFailed) -> None:
    """An infrastructure failure: no restart on the same nodes. The gang goes (its surviving pods free their
    GPUs) and the queue manager, reading the same ``RunFailed``, requeues the job to run elsewhere."""
    log.warning("job %s attempt %d: %s failed for infrastructure reasons (%s on %s); the gang is deleted and "
                "requeued by the queue manager", run.job_id, run.attempt, failure.pod or run.name, failure.reason,
                ", ".join(failure.nodes) or "unknown nodes")
    await ctx.ops.delete_job(run.namespace, run.name, INFRASTRUCTURE_FAILURE)
    ctx.drop_run(run, finished=True)


def schedule(ctx: Context, run: Run) -> None:
    """Run (or resume) the pending restart of ``run`` as a tracked task."""
    ctx.tasks.spawn(run.job_id, restart(ctx, run), name=f"restart {run.namespace}/{run.name}")


async def restart(ctx: Context, run: Run) -> None:
    assert run.restart_at is not None
    await asyncio.sleep(max(0.0, (run.restart_at - ctx.clock()).total_seconds()))
    old = await ctx.ops.get_job(run.namespace, run.name)
    if old is None:
        log.info("job %s: Job %s/%s vanished before its restart", run.job_id, run.namespace, run.name)
        ctx.drop_run(run, finished=False)
        return
    revision = run.revision + 1
    manifest = clone_manifest(old, name=object_name(run.job_id, run.attempt, revision), revision=revision,
                              restarts=run.restarts + 1, decision_event=run.decision_event)
    if ctx.runs.get(run.job_id) is not run:
        return  # superseded meanwhile (a rescale or a new attempt)
    new_run = await replacement.replace(ctx, run, manifest, "restart")
    ctx.metrics.restarts.labels(ctx.cluster).inc()
    log.info("job %s attempt %d restarted as %s (restart %d/%d)", new_run.job_id, new_run.attempt, new_run.name,
             new_run.restarts, new_run.max_restarts)
    await ctx.reporter.report(ctx.dispatched(new_run), correlation_id=run.correlation_id or None)
    new_run.reported = True
