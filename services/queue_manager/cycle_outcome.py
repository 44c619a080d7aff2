"""One scheduling cycle: ``services.core.schedule`` on the live state, its decisions folded back and
turned into records, decisions and statuses."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from schemas.decisions import JobRejected
from schemas.envelope import MAX_REASON, MAX_TEXT
from schemas.topics import DECISIONS_TOPIC, JOBS_TOPIC
from services.core import Admit, Preempt, Reject, Scale, SchedulerConfig, schedule
from services.queue_manager.dependencies import expire_unknown, settle
from services.queue_manager.entries import utc
from services.queue_manager.growth import expire, released, requested
from services.queue_manager.queue_state import Out, QueueState
from services.spec.core_types import main_role_name, placement_plan

log = logging.getLogger(__name__)


@dataclass
class CycleOutcome:
    """A cycle's outputs: ``records`` must be acknowledged before ``decisions`` are produced."""

    records: list[Out] = field(default_factory=list)
    decisions: list[Out] = field(default_factory=list)
    statuses: list[Out] = field(default_factory=list)
    waits: list[tuple[str, float]] = field(default_factory=list)  # (queue, seconds from submit to admit)

    def __len__(self) -> int:
        return len(self.records) + len(self.decisions) + len(self.statuses)

    def add(self, outs: list[Out]) -> None:
        """Records and decisions made outside the core's decisions (dependencies), in their lists."""
        for o in outs:
            (self.records if o.topic == JOBS_TOPIC else self.decisions).append(o)


def run_cycle(qs: QueueState, now: float, config: SchedulerConfig, *, report: bool = True) -> CycleOutcome:
    """``report`` False: decide only; waiting jobs keep the position and estimate of an earlier cycle."""
    out = CycleOutcome()
    out.add(expire_unknown(qs, now))  # jobs held for an unknown job too long end; their dependants follow
    expire(qs, now, config)  # requests for nodes the cloud left unanswered too long count as failed
    result = schedule(qs.sched, now, config, report=report)
    for decision in result.decisions:
        entry = qs.jobs.get(decision.job_id)
        qs.sched.apply(decision, now)
        if entry is None or entry.terminal:
            log.error("core decided on a job without a live entry: %s", decision)
            continue
        if isinstance(decision, Admit):
            entry.state, entry.reason, entry.message, entry.info = "admitted", "", "", None
            entry.replicas = decision.replicas
            entry.placement = placement_plan(decision.placement, main_role_name(entry.spec))
            entry.borrowed = decision.borrowed
            entry.bought = decision.bought
            entry.admitted_at = utc(now)
            out.records.append(qs.record(entry))
            out.decisions.append(qs.admitted(entry))
            out.waits.append((entry.spec.queue, max(0.0, now - entry.submission.submitted_at.timestamp())))
        elif isinstance(decision, Preempt):
            entry.state, entry.reason = "preempting", decision.reason
            entry.message = f"preempted for {decision.preemptor}" if decision.preemptor else decision.reason
            out.records.append(qs.record(entry))
            out.decisions.append(qs.preemption(entry, decision.grace_period_s, decision.preemptor))
        elif isinstance(decision, Scale):
            entry.replicas = decision.replicas
            entry.placement = placement_plan(decision.placement, main_role_name(entry.spec))
            out.records.append(qs.record(entry))
            out.decisions.append(qs.scaled(entry))
        elif isinstance(decision, Reject):
            entry.finish("rejected", now, decision.reason[:MAX_REASON], decision.message)
            out.records.append(qs.record(entry))
            out.decisions.append(
                Out(DECISIONS_TOPIC, JobRejected(job_id=entry.job_id, attempt=entry.attempt,
                                                 reason=decision.reason[:MAX_REASON],
                                                 message=decision.message[:MAX_TEXT]))
            )
    out.decisions += requested(qs, result.provisions, now)  # nodes to buy for waiting jobs
    out.decisions += released(qs, result.releases, now)  # bought nodes idle long enough
    out.add(settle(qs, now))  # the jobs this cycle rejected end the jobs that waited for them
    for job_id, info in result.pending.items():
        entry = qs.jobs.get(job_id)
        if entry is not None and entry.state in ("pending", "suspended"):
            entry.info = info
            qs.dirty[job_id] = None
    out.statuses = qs.status_updates(now)
    return out
