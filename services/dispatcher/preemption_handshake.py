"""The preemption handshake: signal the gang, give it its grace period to checkpoint, then delete it.

1. The Job is annotated ``muster.dev/preempt-requested=<time>`` (with reason, requeue, grace period
   and the decision's event id, so a restarted dispatcher resumes the handshake where it was), and so
   is every pod of the gang. A workload (or its sidecar) watching its pod's annotations through the
   downward API sees the signal. On a real cluster, a workload that only understands signals gets
   SIGTERM by pod deletion with ``terminationGracePeriodSeconds`` (set from the job's grace period),
   or a checkpoint endpoint could be called at this point.
2. The dispatcher waits until the Job carries ``muster.dev/checkpointed=true`` (the job writes it
   once its checkpoint is safe), the Job finishes or disappears, or the grace period ends, whichever
   comes first. A suspended Job (a revision not yet released) has nothing to checkpoint: no wait.
   The wait runs as a tracked task: other decisions keep flowing.
3. The Job is marked ``muster.dev/deleted-by=muster`` and deleted with foreground propagation, and its
   pods are deleted with what is left of the grace period (at least ``stop_floor_s``, at most their
   own ``terminationGracePeriodSeconds``): the handshake and the pods' grace share one budget instead
   of adding up. A job that does not checkpoint has a budget of 0, so its pods get ``stop_floor_s``
   between SIGTERM and SIGKILL. A Job its user created (kube-native, ``plans.users_job``) is not
   Muster's to delete: it is suspended instead (the Job controller removes its pods) and its pods are
   deleted within the same budget; released again, it runs the job's next attempt.
4. Once the Job is gone (the foreground deletion ends with its last pod, so its GPUs are really free),
   or a user's Job has no pod left, ``JobStopped(reason, requeue, checkpointed)`` is reported. A crash
   before that resumes the stop from the Job, which is still there, marked for deletion (a user's Job:
   suspended, with the handshake's annotations); a crash after the Job went and before the report is
   covered by the node watcher's ``RunDeleted(by=muster)``, which the queue manager takes as the stop of
   a preempting job. If the pods are not gone after their grace plus ``stop_wait_margin_s``, the stop is
   reported anyway (and logged): a stuck node must not hold the queue forever.
5. A cancelled job's user Job is left in place after the report, suspended, marked ``muster.dev/cancelled``
   and its owner told so by an Event (see ``cancelled``).
"""

from __future__ import annotations

import asyncio
import logging
import math

from schemas import kube as ann
from schemas.decisions import JobPreemptionRequested
from schemas.envelope import Envelope
from schemas.runs import JobStopped
from services.dispatcher import cancelled
from services.dispatcher.book import Preemption, Run
from services.dispatcher.context import Context, emit
from services.dispatcher.plans import users_job
from services.runtime.kafka import Delivery
from services.runtime.kube import KubeObject

log = logging.getLogger(__name__)


def _finished(job: KubeObject) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _suspended(job: KubeObject) -> bool:
    """A revision still waiting to replace the one before it (see ``replacement``) has started no pod."""
    return bool((job.get("spec") or {}).get("suspend"))


def _checkpointed(job: KubeObject) -> bool:
    return ((job.get("metadata") or {}).get("annotations") or {}).get(ann.CHECKPOINTED) == "true"


def handshake_annotations(pre: Preemption) -> dict[str, str]:
    return {
        ann.PREEMPT_REQUESTED: pre.requested_at.isoformat(),
        ann.PREEMPT_REASON: pre.reason,
        ann.PREEMPT_REQUEUE: "true" if pre.requeue else "false",
        ann.PREEMPT_GRACE: f"{pre.grace_s:g}",
        ann.PREEMPT_EVENT: pre.event_id,
    }


async def request(ctx: Context, envelope: Envelope, delivery: Delivery) -> None:
    decision = envelope.payload
    assert isinstance(decision, JobPreemptionRequested)
    if decision.cluster != ctx.cluster:
        return
    run = ctx.runs.get(decision.job_id)
    if run is not None and run.attempt == decision.attempt and run.preemption is None:
        run = await ctx.take_over(decision.job_id)  # a pending restart is moot
    if run is not None and run.attempt > decision.attempt:
        ctx.outcome(decision.TYPE, "stale")
        return
    if run is None or run.attempt != decision.attempt:
        # nothing of this attempt runs here (never dispatched, already stopped or gone): it is stopped
        await emit(delivery, envelope, JobStopped(**ctx.base(decision.job_id, decision.attempt),
                                                  reason=decision.reason, requeue=decision.requeue))
        ctx.outcome(decision.TYPE, "absent")
        return
    if run.preemption is not None:
        if run.job_id not in ctx.tasks:
            start(ctx, run)
        ctx.outcome(decision.TYPE, "repeat")
        return
    pre = Preemption(requested_at=ctx.clock(), reason=decision.reason, requeue=decision.requeue,
                     grace_s=decision.grace_period_s, event_id=envelope.event_id)
    run.correlation_id = run.correlation_id or envelope.correlation_id or envelope.event_id
    job = await ctx.ops.annotate_job(run.namespace, run.name, handshake_annotations(pre))
    if job is None:
        ctx.drop_run(run, finished=True)
        await emit(delivery, envelope, JobStopped(**ctx.base(run.job_id, run.attempt), reason=decision.reason,
                                                  requeue=decision.requeue))
        ctx.outcome(decision.TYPE, "absent")
        return
    run.preemption = pre
    signalled = await ctx.ops.annotate_pods(job, {ann.PREEMPT_REQUESTED: pre.requested_at.isoformat()})
    log.info("job %s attempt %d: preemption requested (%s), %d pods signalled, grace %.1fs", run.job_id,
             run.attempt, decision.reason, signalled, pre.grace_s)
    start(ctx, run)
    ctx.outcome(decision.TYPE, "handshake")


def start(ctx: Context, run: Run) -> None:
    """Run (or resume) the handshake of ``run`` as a tracked task."""
    ctx.tasks.spawn(run.job_id, handshake(ctx, run), name=f"preempt {run.namespace}/{run.name}")


async def _wait_for_acknowledgement(ctx: Context, run: Run, pre: Preemption) -> bool:
    """Poll the Job until it acknowledges a checkpoint (True), finishes, disappears or its grace runs out."""
    while True:
        job = await ctx.ops.get_job(run.namespace, run.name)
        if job is None or _finished(job) or _suspended(job):
            return False  # nothing runs that could checkpoint
        if _checkpointed(job):
            return True
        remaining = pre.deadline - ctx.clock().timestamp()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(ctx.settings.handshake_poll_s, remaining))


async def handshake(ctx: Context, run: Run) -> None:
    pre = run.preemption
    assert pre is not None
    ctx.metrics.handshakes.labels(ctx.cluster).inc()
    try:
        checkpointed = await _wait_for_acknowledgement(ctx, run, pre)
        await _stop(ctx, run, pre)
        await ctx.reporter.report(
            JobStopped(**ctx.base(run.job_id, run.attempt), reason=pre.reason, requeue=pre.requeue,
                       checkpointed=checkpointed),
            correlation_id=run.correlation_id or None, causation_id=pre.event_id or None)
        ctx.drop_run(run, finished=True)
        ctx.metrics.preemptions.labels(ctx.cluster, str(checkpointed).lower()).inc()
        elapsed = ctx.clock().timestamp() - pre.requested_at.timestamp()
        ctx.metrics.handshake_seconds.labels(ctx.cluster).observe(max(elapsed, 0.0))
        log.info("job %s attempt %d stopped (%s, checkpointed=%s)", run.job_id, run.attempt, pre.reason,
                 checkpointed)
        if _users(run) and cancelled.is_cancel(pre):
            await _leave(ctx, run, pre)
    finally:
        ctx.metrics.handshakes.labels(ctx.cluster).dec()


def _pod_grace(job: KubeObject) -> float:
    spec = (((job.get("spec") or {}).get("template") or {}).get("spec")) or {}
    return float(spec.get("terminationGracePeriodSeconds", 30))


def _users(run: Run) -> bool:
    return users_job(run.job_id, run.attempt, run.revision, run.name)


async def _stop(ctx: Context, run: Run, pre: Preemption) -> None:
    """Delete the gang (suspend a user's Job) within what is left of its grace and wait until its pods are gone."""
    job = await ctx.ops.get_job(run.namespace, run.name)
    if job is None:
        return
    users = _users(run)
    if users:
        job = await ctx.ops.patch_job(run.namespace, run.name, {"spec": {"suspend": True}})
        if job is None:
            return
    else:
        await ctx.ops.delete_job(run.namespace, run.name, "preempted", propagation="Foreground")
    grace = min(_pod_grace(job), max(ctx.settings.stop_floor_s, pre.deadline - ctx.clock().timestamp()))
    await ctx.ops.end_pods(job, math.ceil(grace))
    limit = asyncio.get_running_loop().time() + grace + ctx.settings.stop_wait_margin_s
    while not await _gone(ctx, run, job, users):
        if asyncio.get_running_loop().time() > limit:
            log.warning("job %s attempt %d: pods still there %.0fs after their grace; reported stopped anyway",
                        run.job_id, run.attempt, ctx.settings.stop_wait_margin_s)
            return
        await asyncio.sleep(ctx.settings.release_poll_s)


async def _gone(ctx: Context, run: Run, job: KubeObject, users: bool) -> bool:
    """Muster's Job is gone (its foreground deletion ends with its last pod); a user's Job has no pod left."""
    if users:
        return not await ctx.ops.pods_of(job)
    return await ctx.ops.get_job(run.namespace, run.name) is None


async def _leave(ctx: Context, run: Run, pre: Preemption) -> None:
    """Mark the cancelled job's user Job, left suspended, and tell its owner with an Event (best effort)."""
    try:
        job = await ctx.ops.annotate_job(run.namespace, run.name, cancelled.cancel_mark(pre))
        if job is not None:
            left = cancelled.LeftObject.of(job, "batch/v1", "Job", suspended=True)
            await cancelled.tell(ctx.ops.rest, left, ctx.clock())
    except Exception as exc:  # the job is over: a restarted dispatcher marks it when it resumes the stop
        log.warning("job %s: its Job %s/%s was left suspended but not marked: %s", run.job_id, run.namespace,
                    run.name, exc)
