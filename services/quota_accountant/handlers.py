"""Input envelopes -> ledger facts. Pure: time comes from the messages (``observed_at`` of run events,
the envelope's ``occurred_at`` for decisions), never from a clock."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from schemas.decisions import JobAdmitted, JobScaled, NodeReleaseRequested, NodesRequested
from schemas.envelope import Envelope
from schemas.jobspec import JobSpec
from schemas.runs import (
    ATTEMPT_ENDS,
    AttemptEnd,
    JobStopped,
    NodesProvisioned,
    ProvisioningFailed,
    RunDeleted,
    RunEvicted,
    RunFailed,
    RunStarted,
    RunSucceeded,
    ends_attempt,
)
from services.quota_accountant.attempts import Admission, AttemptKey, Outcome
from services.quota_accountant.burst import BurstLedger
from services.quota_accountant.ledger import NO_EFFECT, Effect, Ledger

#: GPU type recorded when neither the job spec nor the capacity view names one
UNKNOWN_GPU_TYPE = "any"

NodeTypes = Mapping[tuple[str, str], str]
"""(cluster, node) -> GPU type, from the node watcher's capacity reports."""


def seconds(moment: datetime) -> float:
    return moment.timestamp()


def gpu_type_of(decision: JobAdmitted, node_types: NodeTypes) -> str:
    """The spec's GPU type, else the type most of the placed pods sit on, else ``any``."""
    wanted = decision.spec.resources.gpu_type
    if wanted:
        return wanted
    pods: dict[str, int] = {}
    for placed in decision.placement.nodes:
        kind = node_types.get((decision.placement.cluster, placed.node))
        if kind is not None:
            pods[kind] = pods.get(kind, 0) + placed.pods
    if not pods:
        return UNKNOWN_GPU_TYPE
    return max(sorted(pods), key=lambda k: pods[k])


def stop_outcome(stopped: JobStopped) -> Outcome:
    """A stop that requeues the job is a preemption; any other stop (cancel, max runtime) a cancellation."""
    if stopped.reason != "cancelled" and stopped.requeue:
        return "preempted"
    return "cancelled"


def apply(ledger: Ledger, envelope: Envelope, node_types: NodeTypes) -> Effect:
    """Fold one decision, run observation or dispatch report into the ledger."""
    msg = envelope.payload
    if isinstance(msg, JobAdmitted) and msg.bought:
        # the burst budget pays for its nodes (charged by ``apply_growth``): not the queue's quota or usage
        return ledger.exempt(msg.job_id, msg.attempt, seconds(envelope.occurred_at))
    if isinstance(msg, JobAdmitted):
        admission = Admission(
            queue=msg.queue,
            tenant=msg.tenant,
            gpu_type=gpu_type_of(msg, node_types),
            gpus_per_pod=msg.spec.resources.gpus_charged,
            replicas=msg.replicas,
            admitted_at=seconds(envelope.occurred_at),
            fixed_gpus=msg.spec.gpus_charged_at(0),
            main_role=msg.spec.main_role().name if msg.spec.roles else "",
            companions=companion_gpus(msg.spec),
        )
        return ledger.admit(msg.job_id, msg.attempt, admission)
    if isinstance(msg, JobScaled):
        return ledger.scale(msg.job_id, msg.attempt, msg.replicas, seconds(envelope.occurred_at))
    if isinstance(msg, RunStarted):
        return ledger.start(msg.job_id, msg.attempt, seconds(msg.observed_at))
    if isinstance(msg, ATTEMPT_ENDS):
        record = ledger.attempts.get((msg.job_id, msg.attempt))
        outcome = end_outcome(msg, started=record is not None and record.started_at is not None)
        if outcome is not None:
            return ledger.end(msg.job_id, msg.attempt, seconds(msg.observed_at), outcome)
        return NO_EFFECT
    return Effect(burst=frozenset(apply_growth(ledger.burst, envelope)))


def apply_growth(burst: BurstLedger, envelope: Envelope) -> set[str]:
    """Fold a fact of bought nodes into the burst ledger; the queues whose burst spend changed."""
    msg = envelope.payload
    if isinstance(msg, NodesRequested):
        price = msg.price_per_gpu_hour
        if price is None:  # a producer before the price was on the wire: what it charged per GPU-hour
            price = msg.money / msg.gpu_hours if msg.gpu_hours > 0 else 0.0
        return burst.requested(msg.request, msg.queue, msg.cluster, msg.group, msg.gpus_per_node, price, msg.nodes,
                               seconds(envelope.occurred_at))
    if isinstance(msg, NodesProvisioned):
        return burst.provisioned(msg.request, msg.nodes, seconds(msg.observed_at))
    if isinstance(msg, ProvisioningFailed):
        return burst.failed(msg.request, seconds(msg.observed_at))
    if isinstance(msg, NodeReleaseRequested):
        return burst.released(msg.cluster, msg.group, msg.node, msg.queue, seconds(envelope.occurred_at))
    return set()


def attempt_key_of(envelope: Envelope) -> AttemptKey | None:
    """The attempt an input is a fact of (None for a message the ledger does not fold)."""
    msg = envelope.payload
    if isinstance(msg, _FACTS):
        return (msg.job_id, msg.attempt)
    return None


_FACTS = (JobAdmitted, JobScaled, RunStarted, *ATTEMPT_ENDS)


def end_outcome(msg: AttemptEnd, *, started: bool) -> Outcome | None:
    """How an attempt ended, or None for a message that does not end it (``schemas.runs.ends_attempt``: a
    failure of the job's own, which the dispatcher restarts, or a retryable dispatch failure of an attempt
    that ``started``, a failed rescale)."""
    if not ends_attempt(msg, started=started):
        return None
    if isinstance(msg, RunSucceeded):
        return "succeeded"
    if isinstance(msg, RunFailed):
        # an infrastructure failure requeues the job, as an eviction does; any other that ends the attempt
        # (the job ran out of time) fails it
        return "evicted" if msg.classification == "infrastructure" else "failed"
    if isinstance(msg, RunEvicted):
        return "evicted"
    if isinstance(msg, RunDeleted):
        return "cancelled"
    if isinstance(msg, JobStopped):
        return stop_outcome(msg)
    # a retryable failure before the start requeues the job, as an infrastructure failure does
    return "evicted" if msg.retryable else "failed"


def companion_gpus(spec: JobSpec) -> tuple[tuple[str, float], ...]:
    """(name, GPUs) of each companion role of a job of several roles (the roles besides its main one)."""
    if not spec.roles:
        return ()
    main = spec.main_role().name
    return tuple((r.name, r.gpus) for r in spec.roles if r.name != main)
