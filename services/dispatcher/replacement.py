"""Replacing the Job of an attempt by its next revision, never running the two at once.

A whole-gang restart or a rescale re-creates the attempt's Job as revision n+1. Muster binds pods
straight to their planned nodes, and the new placement usually reuses the old pods' GPUs, so
revision n+1 must not start while a pod of revision n still exists: a kubelet would refuse the new
pods (or, on a lenient one, the node would be over-committed). The switch therefore goes:

1. create revision n+1 suspended, annotated ``muster.dev/replaces: <revision n>``;
2. delete revision n (marked ``deleted-by: muster``);
3. once no pod of any other revision of the attempt is left, unsuspend revision n+1 and drop the
   annotation (a rescale of a revision that never started replaces it at once, but still waits for
   the pods of the revision before).

Steps 1 and 2 are done by the caller before it acknowledges anything; step 3 is a tracked task.
Steps 1 and 2 and recording the new revision as the job's current run are one unit that a cancel does
not cut short: a handler that stops a pending restart (a preemption, a new attempt, a rescale) waits
for the task to end (``Context.take_over``) and then finds the revision that really exists, instead
of deleting revision n and leaving a suspended revision n+1 behind.
Every step is recorded on the Jobs, so a restarted dispatcher resumes from whatever it finds: a
surviving revision n is a leftover to delete (``book.rebuild``), a suspended revision carrying the
annotation is waiting for step 3. Creating the new revision before deleting the old one means a crash
between the two cannot lose the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from schemas import kube as ann
from services.dispatcher.book import Run, run_from_job
from services.dispatcher.context import Context
from services.dispatcher.kube_ops import owned_by
from services.runtime.kube import KubeObject

log = logging.getLogger(__name__)


async def replace(ctx: Context, run: Run, manifest: KubeObject, reason: str) -> Run:
    """Steps 1 and 2 for ``manifest`` (from ``plans.clone_manifest``), then step 3 in the background.

    Returns the new run, now the job's current one. Cancelled during steps 1 and 2, it finishes them
    (the new revision becomes the current run) and then re-raises the cancel without starting step 3.
    """
    switch = asyncio.ensure_future(_switch(ctx, run, manifest, reason))
    try:
        new_run = await asyncio.shield(switch)
    except asyncio.CancelledError:
        if switch.cancelled():
            raise
        while not switch.done():  # this task was cancelled: let the switch finish first
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({switch})
        switch.result()  # its own failure, if it failed
        raise
    if new_run.replaces:
        schedule(ctx, new_run)
    return new_run


async def _switch(ctx: Context, run: Run, manifest: KubeObject, reason: str) -> Run:
    created, _ = await ctx.ops.create_job(manifest)
    await ctx.ops.delete_job(run.namespace, run.name, reason)
    new_run = run_from_job(created)
    assert new_run is not None, "a cloned Job carries Muster's annotations"
    ctx.set_run(new_run)
    return new_run


def schedule(ctx: Context, run: Run) -> None:
    """Run (or resume) step 3 for the suspended ``run`` as the job's tracked task."""
    ctx.tasks.spawn(run.job_id, release(ctx, run), name=f"release {run.namespace}/{run.name}")


async def release(ctx: Context, run: Run) -> None:
    """Wait until no pod of another revision of the attempt is left, then let ``run``'s Job start."""
    job = await ctx.ops.get_job(run.namespace, run.name)
    if job is None:
        log.info("job %s: Job %s/%s vanished before its release", run.job_id, run.namespace, run.name)
        return
    waited = 0.0
    while pods := [p for p in await ctx.ops.attempt_pods(job) if not owned_by(p, None, run.name)]:
        if waited == 0.0:
            log.info("job %s: %s waits for %d pods of earlier revisions to go", run.job_id, run.name, len(pods))
        await asyncio.sleep(ctx.settings.release_poll_s)
        waited += ctx.settings.release_poll_s
    released = await ctx.ops.patch_job(run.namespace, run.name,
                                       {"metadata": {"annotations": {ann.REPLACES: None}}, "spec": {"suspend": False}})
    if released is None:
        log.info("job %s: Job %s/%s vanished before its release", run.job_id, run.namespace, run.name)
        return
    run.replaces = ""
    log.info("job %s attempt %d: %s released after %.1f s", run.job_id, run.attempt, run.name, waited)
