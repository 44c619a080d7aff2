"""What happened on a cluster (``muster.runs``, ``muster.dispatches``) folded into the queue state.

Events of any other attempt than the job's current one are stale and ignored. Restart rule: the
dispatcher restarts a gang that failed by its own fault (``RunFailed.classification == "job"``) itself,
up to ``spec.max_restarts`` times, and it alone decides when the budget is spent: its
``DispatchFailed(reason="restarts_exhausted")`` makes the job ``failed`` and frees its GPUs. Such a
``RunFailed`` only updates the restart count shown, taken from the failed revision
(``RunFailed.restarts``), so a failure reported twice is counted once; only a reason in
``NOT_RESTARTED_REASONS`` (the job ran out of time) ends the job at once. Whether a message ends the
attempt at all is ``schemas.runs.ends_attempt``, the rule the quota accountant and the replay of the log
go by too; what follows says how the job goes on.

Infrastructure failures (``RunFailed`` classified ``infrastructure``, every ``RunEvicted``, a retryable
``DispatchFailed`` of an admitted attempt — the cluster's API was unavailable — and a stop the core
ordered because the job's node became unhealthy or was removed) spend no restart: the job is
requeued as its next attempt, which avoids the blamed nodes (``avoid_nodes``, kept in the job's
record), up to ``spec.max_infrastructure_retries`` times; then it fails with
``infrastructure_retries_exhausted``. The restarts already spent carry over to that next attempt.
"""

from __future__ import annotations

import logging
from collections import Counter

from schemas.envelope import Message
from schemas.runs import (
    NOT_RESTARTED_REASONS,
    DispatchFailed,
    JobStopped,
    NodesProvisioned,
    ProvisioningFailed,
    RunAllPodsReady,
    RunDeleted,
    RunEvicted,
    RunFailed,
    RunIdle,
    RunResized,
    RunStarted,
    RunSucceeded,
    ends_attempt,
)
from services.core import Preempt, PreemptReason
from services.queue_manager.entries import JobEntry
from services.queue_manager.growth import on_provisioning
from services.queue_manager.queue_state import Out, QueueState
from services.spec.core_types import main_role_name, placement_plan

log = logging.getLogger(__name__)

INFRASTRUCTURE_EXHAUSTED = "infrastructure_retries_exhausted"
NODE_UNHEALTHY = PreemptReason.NODE_UNHEALTHY.value
#: an interactive session released because its GPUs were idle (``RunIdle``): stopped, then suspended
IDLE = "idle"


def on_run(qs: QueueState, message: Message, now: float) -> list[Out]:
    entry = qs.jobs.get(getattr(message, "job_id", ""))
    attempt = getattr(message, "attempt", None)
    if entry is None or entry.terminal or attempt != entry.attempt:
        return []  # unknown, finished, or an event of an earlier attempt
    if isinstance(message, NodesProvisioned | ProvisioningFailed):
        on_provisioning(qs, message, now)
        return []  # its status follows (the job is dirty)
    if isinstance(message, RunStarted | RunAllPodsReady):
        if entry.state != "admitted":
            return []
        qs.sched.run_started(entry.job_id, now)
        entry.state, entry.reason, entry.message = "running", "", ""
        return [qs.record(entry)]
    if not entry.holding:
        return []  # a pending job has no run of this attempt to report on
    if isinstance(message, RunResized):
        return _resized(qs, entry, message, now)
    if isinstance(message, RunIdle):
        return _idle(qs, entry, message, now)
    if isinstance(message, RunSucceeded):
        qs.sched.job_finished(entry.job_id, now, succeeded=True)
        entry.finish("succeeded", now, "succeeded")
        return [qs.record(entry)]
    if isinstance(message, RunFailed):
        return _failed(qs, entry, message, now)
    if isinstance(message, RunEvicted):
        where = f" from node {message.node}" if message.node else ""
        text = f"evicted{where}: {message.reason}"
        if entry.state == "preempting":
            return _stopped(qs, entry, now, entry.requeue_on_stop, message.reason, text)
        return _infrastructure(qs, entry, now, [message.node] if message.node else [], message.reason, text)
    if isinstance(message, JobStopped):
        requeue = message.requeue and entry.requeue_on_stop
        return _stopped(qs, entry, now, requeue, message.reason,
                        "stopped after checkpoint" if message.checkpointed else "stopped")
    if isinstance(message, DispatchFailed):
        # a job being stopped counts as started: its stop ends the attempt
        if not ends_attempt(message, started=entry.state != "admitted"):
            return []  # a rescale of a running job failed: the run goes on as it was
        if message.retryable:
            # the cluster's API was unavailable while the Job was being created: the attempt never
            # started there; requeue it like an infrastructure failure (no node to blame), or it would
            # stay admitted, holding its GPUs, for ever
            detail = f"dispatch failed ({message.reason}): {message.message}" if message.message \
                else f"dispatch failed ({message.reason})"
            return _infrastructure(qs, entry, now, [], message.reason, detail)
        qs.sched.job_finished(entry.job_id, now)
        entry.finish("failed", now, message.reason, message.message)
        return [qs.record(entry)]
    if isinstance(message, RunDeleted) and message.by == "muster" and entry.state == "preempting":
        # the dispatcher deleted the gang it was stopping (its JobStopped may follow, or be lost in a crash)
        return _stopped(qs, entry, now, entry.requeue_on_stop, entry.reason or "preempted", "stopped")
    if isinstance(message, RunDeleted) and message.by == "external":
        qs.sched.job_finished(entry.job_id, now)
        entry.finish("failed", now, "deleted_externally", "the job's objects were deleted outside Muster")
        return [qs.record(entry)]
    return []


def _resized(qs: QueueState, entry: JobEntry, msg: RunResized, now: float) -> list[Out]:
    """A serving object scaled by its owner (or an autoscaler): the job now asks for ``msg.replicas`` pods of
    its main role. Fewer than it holds: it shrinks now, onto the nodes its remaining pods are on, and the
    ``JobScaled`` frees the rest of its quota. More: the pods it runs become its minimum and the core grows
    it through quota as room allows (a ``JobScaled`` of a later cycle); its extra pods wait gated until then."""
    if entry.state not in ("admitted", "running") or entry.spec.workload is None:
        return []  # being stopped (its next attempt is admitted at the size its object asks then), or a Job
    spec = entry.spec
    if msg.replicas == spec.main_replicas:
        return []  # the size it asks for already (a repeat)
    entry.submission = entry.submission.model_copy(update={"spec": spec.resized(msg.replicas, entry.replicas)})
    kept = Counter(p.node for p in msg.pods) if msg.pods else None
    scale = qs.sched.resize_running(qs.core_job(entry), now, kept)
    log.info("job %s: its object asks for %d pods of its main role (%d admitted)", entry.job_id, msg.replicas,
             entry.replicas)
    if scale is None:
        return [qs.record(entry)]
    entry.replicas = scale.replicas
    entry.placement = placement_plan(scale.placement, main_role_name(entry.spec))
    return [qs.record(entry), qs.scaled(entry)]


def _idle(qs: QueueState, entry: JobEntry, msg: RunIdle, now: float) -> list[Out]:
    """An interactive session whose GPUs were idle for its idle timeout: stopped like a preemption (its
    object stays, its pods go), then suspended until its owner resumes it (``_stopped``)."""
    timeout = entry.spec.idle_timeout_s
    if entry.state != "running" or timeout is None:
        return []  # not started yet, already being stopped, or no idle timeout of its own
    grace = entry.grace_period_s
    qs.sched.apply(Preempt(entry.job_id, entry.attempt, IDLE, grace, requeue=True), now)
    entry.state, entry.reason = "preempting", IDLE
    entry.message = (f"its GPUs have been idle since {msg.idle_since:%Y-%m-%d %H:%M:%S} UTC (idle timeout "
                     f"{timeout:g}s): releasing them")
    log.info("job %s: %s", entry.job_id, entry.message)
    return [qs.record(entry), qs.preemption(entry, grace)]


def _failed(qs: QueueState, entry: JobEntry, msg: RunFailed, now: float) -> list[Out]:
    if ends_attempt(msg, started=True):
        if msg.reason in NOT_RESTARTED_REASONS:
            qs.sched.job_finished(entry.job_id, now)
            entry.finish("failed", now, msg.reason, msg.message or f"failed: {msg.reason}")
            return [qs.record(entry)]
        detail = f"{msg.reason}: {msg.message}" if msg.message else msg.reason
        return _infrastructure(qs, entry, now, msg.nodes, msg.reason, f"pod failed ({detail})")
    # a failure of the job's own: the dispatcher restarts the gang within the attempt
    limit = entry.spec.max_restarts
    done = entry.restarts if msg.restarts is None else msg.restarts
    if done >= limit or entry.state == "preempting":
        return []  # the dispatcher gives up and reports restarts_exhausted, or the job is being stopped anyway
    restarts = max(entry.restarts, done + 1)
    if restarts == entry.restarts and entry.reason == "restarting":
        return []  # a repeat of a failure already counted
    entry.restarts = restarts
    entry.reason = "restarting"
    code = f", exit code {msg.exit_code}" if msg.exit_code is not None else ""
    entry.message = f"job failure ({msg.reason}{code}): restart {restarts}/{limit}"
    return [qs.record(entry)]


def _infrastructure(qs: QueueState, entry: JobEntry, now: float, nodes: list[str], reason: str,
                    text: str) -> list[Out]:
    """The attempt failed through no fault of the job: requeue it away from ``nodes``, without spending a
    restart, at most ``max_infrastructure_retries`` times."""
    entry.avoid(nodes)
    if entry.state == "preempting":  # it is being stopped anyway; its next attempt avoids the nodes too
        return [qs.record(entry)]
    retry = _charge(qs, entry, now, nodes, text)
    if retry is None:
        return [qs.record(entry)]
    _release(qs, entry, now, requeue=True)
    entry.requeue(reason, retry, keep_restarts=True)
    return [qs.record(entry)]


def _charge(qs: QueueState, entry: JobEntry, now: float, nodes: list[str], text: str) -> str | None:
    """Count one infrastructure retry: the requeue message, or None once the retries are spent (the job is
    then failed and its capacity released)."""
    where = ", ".join(nodes) or "an unknown node"
    limit = entry.spec.max_infrastructure_retries
    entry.infrastructure_retries += 1
    if entry.infrastructure_retries > limit:
        qs.sched.job_finished(entry.job_id, now)
        entry.finish("failed", now, INFRASTRUCTURE_EXHAUSTED,
                     f"infrastructure failure on {where}, {text}; all {limit} infrastructure retries spent")
        return None
    return f"infrastructure failure on {where}, {text}: retry {entry.infrastructure_retries}/{limit} on other nodes"


def _lost_nodes(qs: QueueState, entry: JobEntry) -> list[str]:
    """The nodes of the job's placement that are unhealthy or gone (why the core stopped it)."""
    planned = [a.node for a in entry.placement.nodes] if entry.placement is not None else []
    return [n for n in planned if n not in qs.nodes or not qs.nodes[n].healthy]


def _release(qs: QueueState, entry: JobEntry, now: float, *, requeue: bool) -> None:
    """Free the job's capacity in the core; when ``requeue``, its next attempt waits there away from the
    nodes it avoids, carrying the service it has received (which orders the queue)."""
    qs.sched.job_stopped(entry.job_id, now, requeue=requeue, avoid=frozenset(entry.avoid_nodes))
    requeued = qs.sched.pending.get(entry.job_id) if requeue else None
    if requeued is not None:
        entry.attained_gpu_s = requeued.attained_gpu_s


def _stopped(qs: QueueState, entry: JobEntry, now: float, requeue: bool, reason: str, text: str) -> list[Out]:
    if requeue and entry.reason == NODE_UNHEALTHY:  # the core stopped it for a lost node: infrastructure
        lost = _lost_nodes(qs, entry)
        entry.avoid(lost)
        retry = _charge(qs, entry, now, lost, f"{NODE_UNHEALTHY} ({text})")
        if retry is None:
            return [qs.record(entry)]
        _release(qs, entry, now, requeue=True)
        entry.requeue(NODE_UNHEALTHY, retry, keep_restarts=True)
        return [qs.record(entry)]
    _release(qs, entry, now, requeue=requeue)
    if requeue and entry.reason == IDLE:  # released for idleness: it waits for its owner, not for GPUs
        qs.sched.suspend(entry.job_id)
        entry.requeue(IDLE)
        entry.state = "suspended"
        entry.message = (f"released after its GPUs were idle for {entry.spec.idle_timeout_s:g}s; resume it "
                         f"(muster resume {entry.job_id}) to start it again")
    elif requeue:
        entry.requeue(reason, text)
    elif entry.reason == "cancelled" or reason == "cancelled":
        entry.finish("cancelled", now, "cancelled", entry.message or text)
    else:
        entry.finish("failed", now, entry.reason or reason, text)
    return [qs.record(entry)]
