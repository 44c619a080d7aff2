"""What a kube-native job's own ``batch/v1`` Job shows of Muster's handling: Kubernetes Events and two
conditions on its status, so that ``kubectl describe job`` says it is queued, why it waits and when it
should start, that it was admitted where, or why it was preempted. Pure: status changes in, the Events
and conditions to write out (``kube_jobs.KubeJobFeedback`` writes them). The objects of the other workload
kinds (a JobSet, a RayJob, a LeaderWorkerSet, a pod group's first pod: ``kube_workloads``) get the same Events
and never the conditions: their status belongs to their own controllers.

Conditions (``type`` / ``status`` / ``reason`` / ``message``), kept current:

- ``muster.dev/Queued``: True while the job waits in its queue (reason: why it waits, message: its
  place and estimated start), False once admitted, suspended or ended.
- ``muster.dev/Admitted``: True while it holds its placement (message: the cluster) and after it ran
  to success or failure, False while it waits, after a preemption (reason ``Preempted``) and when it
  was cancelled or rejected.

Events, one per change a user would want told (never one per repeated status):
``Queued`` (first wait), ``Pending`` (the reason it waits changed; with the estimated start),
``Admitted``, ``Preempted`` (Warning, with why), ``Requeued`` (a new attempt waits), ``Suspended``,
``Rejected`` (Warning), ``Cancelled``, and ``RequestRefused`` (Warning: a request about the job, such as a
priority change, that the queue manager refused, with its reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from schemas.status import TERMINAL_STATES, JobStatusChanged

QUEUED = "muster.dev/Queued"
ADMITTED = "muster.dev/Admitted"
CONDITION_TYPES = (QUEUED, ADMITTED)
HOLDING = frozenset({"admitted", "running"})
#: longest message written into an Event or a condition
MAX_MESSAGE = 1024


@dataclass(frozen=True, slots=True)
class KubeEvent:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: Literal["True", "False"]
    reason: str
    message: str


def camel(text: str, default: str) -> str:
    """``waiting_for_quota`` -> ``WaitingForQuota``: a condition reason as Kubernetes validates it
    (a letter first, then letters, digits and underscores)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", text) if w]
    joined = "".join(w[:1].upper() + w[1:] for w in words)
    return joined if joined[:1].isalpha() else default


def _eta(status: JobStatusChanged, now: datetime) -> str:
    if status.estimated_start is None:
        return "no estimated start"
    if status.estimated_start <= now:
        return "estimated start: now"
    return f"estimated start {status.estimated_start.isoformat(timespec='seconds')}"


def waiting_message(status: JobStatusChanged, now: datetime) -> str:
    """Why it waits, where it stands and when it should start, in one line."""
    place = f"position {status.position + 1} in queue {status.queue}" if status.position is not None \
        else f"queue {status.queue}"
    why = status.message or status.reason.replace("_", " ") or "waiting"
    return _cut(f"{why} ({place}; {_eta(status, now)})")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def conditions(status: JobStatusChanged, now: datetime) -> tuple[Condition, Condition]:
    """The two conditions the Job should carry for ``status``."""
    state = status.state
    if state == "pending":
        return (Condition(QUEUED, "True", camel(status.reason, "Pending"), waiting_message(status, now)),
                Condition(ADMITTED, "False", "Pending", f"attempt {status.attempt} waits for admission"))
    if state in HOLDING:
        where = f"admitted to cluster {status.cluster}" if status.cluster else "admitted"
        return (Condition(QUEUED, "False", "Admitted", where),
                Condition(ADMITTED, "True", "Admitted", f"{where} (attempt {status.attempt})"))
    if state == "preempting":
        why = _cut(status.message or status.reason.replace("_", " ") or "preempted")
        return (Condition(QUEUED, "False", "Preempted", "stopping; it queues again unless it has ended"),
                Condition(ADMITTED, "False", "Preempted", why))
    ended = camel(state, "Ended")
    message = _cut(status.message or state)
    ran: Literal["True", "False"] = "True" if state in ("succeeded", "failed") else "False"  # it ran to its end
    return (Condition(QUEUED, "False", ended, message), Condition(ADMITTED, ran, ended, message))


def events(status: JobStatusChanged, previous: JobStatusChanged | None, now: datetime) -> list[KubeEvent]:
    """The Events that the change from ``previous`` (None: first seen) to ``status`` deserves."""
    return _refusal(status, previous) + _stage_events(status, previous, now)


def _refusal(status: JobStatusChanged, previous: JobStatusChanged | None) -> list[KubeEvent]:
    """A request about the job that the queue manager refused (``muster set-priority`` of a job that runs on
    borrowed quota...), told once."""
    answer = status.last_action
    if answer is None or answer.outcome != "refused":
        return []
    if previous is not None and previous.last_action is not None and previous.last_action.event_id == answer.event_id:
        return []
    what = answer.action.replace("_", " ")
    return [KubeEvent("Warning", "RequestRefused",
                      _cut(f"{what} requested by {answer.requested_by} was refused ({answer.reason}): "
                           f"{answer.message}"))]


def _stage_events(status: JobStatusChanged, previous: JobStatusChanged | None, now: datetime) -> list[KubeEvent]:
    state = status.state
    before = previous.state if previous is not None else None
    new_attempt = previous is not None and status.attempt != previous.attempt
    if previous is not None and not new_attempt and before == state and previous.reason == status.reason:
        return []  # the same stage again (a new position or estimate is not news)
    if state == "pending":
        told: list[KubeEvent] = []
        if before != "pending" or new_attempt:
            if previous is not None and (new_attempt or before in HOLDING or before == "preempting"):
                told.append(KubeEvent("Normal", "Requeued", f"attempt {status.attempt} queued again in queue "
                                                            f"{status.queue}"))
            elif before != "suspended" or previous is None:
                told.append(KubeEvent("Normal", "Queued", f"queued in queue {status.queue}"))
        if status.reason:  # not yet looked at by a scheduling cycle: "Queued" says all there is
            told.append(KubeEvent("Normal", "Pending", waiting_message(status, now)))
        return told
    if state == "admitted" or (state == "running" and before not in HOLDING):
        where = f"cluster {status.cluster}" if status.cluster else "its cluster"
        return [KubeEvent("Normal", "Admitted", f"admitted to {where} (attempt {status.attempt})")]
    if state == "preempting":
        return [KubeEvent("Warning", "Preempted",
                          _cut(status.message or status.reason.replace("_", " ") or "preempted"))]
    if state == "suspended":
        return [KubeEvent("Normal", "Suspended", _cut(status.message or "suspended"))]
    if state == "rejected":
        return [KubeEvent("Warning", "Rejected", _cut(status.message or status.reason or "rejected"))]
    if state == "cancelled":
        return [KubeEvent("Normal", "Cancelled", _cut(status.message or "cancelled"))]
    return []  # running on, succeeded, failed: the Job controller and the pods tell these


def merged_conditions(existing: list[dict[str, object]], wanted: tuple[Condition, ...],
                      now: datetime) -> list[dict[str, object]]:
    """The Job's status conditions with Muster's replaced by ``wanted`` (others kept as they are); a
    condition whose status did not change keeps its ``lastTransitionTime``."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    mine = {c.type: c for c in wanted}
    out: list[dict[str, object]] = []
    for current in existing:
        kind = str(current.get("type"))
        condition = mine.pop(kind, None)
        if condition is None:
            if kind not in CONDITION_TYPES:
                out.append(current)
            continue
        out.append(_condition(condition, stamp, current))
    out += [_condition(c, stamp, None) for c in wanted if c.type in mine]
    return out


def _condition(condition: Condition, stamp: str, current: dict[str, object] | None) -> dict[str, object]:
    if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == \
            (condition.status, condition.reason, condition.message):
        return current
    unchanged = current is not None and current.get("status") == condition.status
    return {"type": condition.type, "status": condition.status, "reason": condition.reason,
            "message": condition.message, "lastProbeTime": stamp,
            "lastTransitionTime": current.get("lastTransitionTime", stamp) if unchanged and current else stamp}


def ended(status: JobStatusChanged) -> bool:
    return status.state in TERMINAL_STATES
