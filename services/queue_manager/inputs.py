"""The entry point for consumed inputs: intents and run events, each applied at most once."""

from __future__ import annotations

from schemas.envelope import Message
from schemas.intents import INTENTS
from schemas.runs import DISPATCHES, RUNS, RunResized
from schemas.topics import JOBS_TOPIC, STATUS_TOPIC
from services.queue_manager.dependencies import settle
from services.queue_manager.intents import on_intent
from services.queue_manager.queue_state import Out, QueueState
from services.queue_manager.runs import on_run
from services.queue_manager.status import build_status

_INTENT_TYPES = frozenset(m.TYPE for m in INTENTS)
_RUN_TYPES = frozenset(m.TYPE for m in (*RUNS, *DISPATCHES))


def on_input(qs: QueueState, message: Message, event_id: str, now: float, *, retry: bool = False) -> list[Out]:
    """Fold one input; returns records, decisions and statuses to produce (nothing for a repeat).

    ``retry``: the previous delivery of this very record failed to produce its outputs although the
    state already took it in; the job's current record, pending preemption and status are sent again.
    """
    if qs.seen(event_id):
        return resend(qs, message, now) if retry else []
    if message.TYPE in _INTENT_TYPES:
        outs = on_intent(qs, message, now, event_id)
    elif message.TYPE in _RUN_TYPES:
        outs = on_run(qs, message, now)
    else:
        outs = []
    qs.remember(event_id)
    return outs + settle(qs, now) + qs.status_updates(now)


def resend(qs: QueueState, message: Message, now: float) -> list[Out]:
    """What the current state says about the message's job, for a retry after a failed produce."""
    entry = qs.jobs.get(getattr(message, "job_id", ""))
    if entry is None:
        return []
    outs = [Out(JOBS_TOPIC, entry.recorded())]
    if entry.state == "preempting" and entry.placement is not None:
        outs.append(qs.preemption(entry, entry.grace_period_s))
    elif isinstance(message, RunResized) and entry.holding and entry.placement is not None:
        outs.append(qs.scaled(entry))  # the shrink it may have made (a workload's dispatcher takes it twice)
    outs.append(Out(STATUS_TOPIC, build_status(entry, now)))
    return outs
