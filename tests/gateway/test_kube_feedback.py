"""What a kube-native job's own Job is told: Events per change and the two conditions (pure tables)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schemas.status import ActionOutcome, JobStatusChanged
from services.gateway.kube_feedback import (
    ADMITTED,
    QUEUED,
    camel,
    conditions,
    events,
    merged_conditions,
    waiting_message,
)

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def status(state: str, *, reason: str = "", message: str = "", attempt: int = 0, position: int | None = None,
           eta: timedelta | None = None, cluster: str | None = None) -> JobStatusChanged:
    return JobStatusChanged(job_id="kube-team-a-sweep-1", tenant="team-a", queue="team-a", name="sweep-1",
                            state=state, attempt=attempt, priority_class="normal", replicas=2, gpus=8,
                            position=position, reason=reason, message=message, cluster=cluster,
                            estimated_start=NOW + eta if eta is not None else None,
                            submitted_at=NOW, updated_at=NOW)


WAITING = status("pending", reason="waiting_for_quota", message="queue team-a is at its quota", position=2,
                 eta=timedelta(minutes=30))
ADMITTED_EAST = status("admitted", cluster="east")
RUNNING = status("running", cluster="east")
PREEMPTED = status("preempting", reason="priority", message="preempted by urgent-eval", cluster="east")
REQUEUED = status("pending", reason="waiting_for_capacity", attempt=1, position=0)


def answered(base: JobStatusChanged, event_id: str, outcome: str = "refused") -> JobStatusChanged:
    told = ActionOutcome(event_id=event_id, action="change_priority", outcome=outcome,  # type: ignore[arg-type]
                         reason="runs_on_borrowed_quota", message="it runs on borrowed quota",
                         requested_by="alice", at=NOW)
    return base.model_copy(update={"last_action": told})


REFUSED = answered(RUNNING, "e1")


@pytest.mark.parametrize(("before", "after", "told"), [
    (None, WAITING, [("Normal", "Queued"), ("Normal", "Pending")]),
    (None, status("pending"), [("Normal", "Queued")]),  # no reason yet: nothing more to tell
    (WAITING, WAITING.model_copy(update={"position": 0}), []),  # a new place in the queue is not news
    (WAITING, WAITING.model_copy(update={"reason": "waiting_for_capacity"}), [("Normal", "Pending")]),
    (WAITING, ADMITTED_EAST, [("Normal", "Admitted")]),
    (ADMITTED_EAST, RUNNING, []),
    (WAITING, RUNNING, [("Normal", "Admitted")]),  # admitted and started between two looks
    (RUNNING, PREEMPTED, [("Warning", "Preempted")]),
    (PREEMPTED, REQUEUED, [("Normal", "Requeued"), ("Normal", "Pending")]),
    (RUNNING, status("succeeded", cluster="east"), []),
    (WAITING, status("cancelled", message="cancelled by alice"), [("Normal", "Cancelled")]),
    (None, status("rejected", reason="invalid_spec"), [("Warning", "Rejected")]),
    (WAITING, status("suspended"), [("Normal", "Suspended")]),
    (RUNNING, REFUSED, [("Warning", "RequestRefused")]),  # told once, on the object itself
    (REFUSED, REFUSED, []),
    (REFUSED, answered(RUNNING, "e2"), [("Warning", "RequestRefused")]),
    (RUNNING, answered(RUNNING, "e3", "applied"), []),
    (WAITING, answered(ADMITTED_EAST, "e4"), [("Warning", "RequestRefused"), ("Normal", "Admitted")]),
])
def test_events_per_change(before: JobStatusChanged | None, after: JobStatusChanged,
                           told: list[tuple[str, str]]) -> None:
    assert [(e.type, e.reason) for e in events(after, before, NOW)] == told


def test_the_pending_event_says_why_where_and_when() -> None:
    [_, pending] = events(WAITING, None, NOW)
    assert pending.message == ("queue team-a is at its quota (position 3 in queue team-a; estimated start "
                               "2026-11-25T12:30:00+00:00)")
    assert waiting_message(status("pending", reason="waiting_for_capacity"), NOW) == \
        "waiting for capacity (queue team-a; no estimated start)"


@pytest.mark.parametrize(("state", "queued", "admitted"), [
    (WAITING, ("True", "WaitingForQuota"), ("False", "Pending")),
    (ADMITTED_EAST, ("False", "Admitted"), ("True", "Admitted")),
    (RUNNING, ("False", "Admitted"), ("True", "Admitted")),
    (PREEMPTED, ("False", "Preempted"), ("False", "Preempted")),
    (status("succeeded"), ("False", "Succeeded"), ("True", "Succeeded")),
    (status("failed"), ("False", "Failed"), ("True", "Failed")),
    (status("cancelled"), ("False", "Cancelled"), ("False", "Cancelled")),
])
def test_conditions_per_state(state: JobStatusChanged, queued: tuple[str, str], admitted: tuple[str, str]) -> None:
    q, a = conditions(state, NOW)
    assert (q.type, q.status, q.reason) == (QUEUED, *queued)
    assert (a.type, a.status, a.reason) == (ADMITTED, *admitted)


def test_condition_reasons_are_what_kubernetes_accepts() -> None:
    assert camel("waiting_for_quota", "Pending") == "WaitingForQuota"
    assert camel("", "Pending") == "Pending"
    assert camel("9lives", "Pending") == "Pending"


def test_merging_keeps_the_job_controllers_conditions_and_unchanged_transition_times() -> None:
    earlier = "2026-11-25T11:00:00Z"
    existing: list[dict[str, Any]] = [
        {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": earlier},
        {"type": QUEUED, "status": "True", "reason": "WaitingForQuota", "message": "old",
         "lastTransitionTime": earlier},
    ]
    merged = merged_conditions(existing, conditions(WAITING, NOW), NOW)
    by_type = {c["type"]: c for c in merged}
    assert by_type["Complete"] is existing[0]
    assert by_type[QUEUED]["lastTransitionTime"] == earlier  # still True: no transition
    assert by_type[QUEUED]["message"] != "old"
    assert by_type[ADMITTED]["lastTransitionTime"] == "2026-11-25T12:00:00Z"
    admitted = merged_conditions(merged, conditions(ADMITTED_EAST, NOW + timedelta(minutes=5)), NOW)
    assert {c["type"]: c["status"] for c in admitted} == {"Complete": "True", QUEUED: "False", ADMITTED: "True"}
    assert merged_conditions(admitted, conditions(ADMITTED_EAST, NOW), NOW) == admitted  # nothing to write
