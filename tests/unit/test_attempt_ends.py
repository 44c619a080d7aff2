"""``schemas.runs.ends_attempt``: which run, dispatch and decision messages end the attempt they name, before
and after the attempt was seen running. The queue manager, the quota accountant and the replay of the log all
go by it."""

from __future__ import annotations

import pytest

from schemas.decisions import (
    DECISIONS,
    JobAdmitted,
    JobPreemptionRequested,
    JobRejected,
    JobScaled,
    NodeReleaseRequested,
    NodesRequested,
)
from schemas.envelope import Message
from schemas.runs import (
    ATTEMPT_ENDS,
    DISPATCHES,
    RUNS,
    DispatchFailed,
    JobDispatched,
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
from tests.builders.clock import T0
from tests.builders.messages import example_messages

_EXAMPLE = {type(m): m for m in example_messages()}
_RUN = {"job_id": "j-0001", "attempt": 1, "cluster": "east", "observed_at": T0}


def _example(kind: type[Message], **changes: object) -> Message:
    return _EXAMPLE[kind].model_copy(update=changes)


# (case, message, ends it before the attempt started, ends it once started)
TABLE: list[tuple[str, Message, bool, bool]] = [
    ("admitted", _example(JobAdmitted), False, False),
    ("preemption requested: the stop that follows ends it", _example(JobPreemptionRequested), False, False),
    ("scaled", _example(JobScaled), False, False),
    ("rejected", _example(JobRejected), False, False),
    ("dispatched", _example(JobDispatched), False, False),
    ("dispatch failed, not retryable: the job fails", DispatchFailed(**_RUN, reason="invalid", message="denied"),
     True, True),
    ("dispatcher gave up restarting", DispatchFailed(**_RUN, reason="restarts_exhausted", message="4 failures"),
     True, True),
    ("dispatch failed, retryable: requeued before the start, a failed rescale after it",
     DispatchFailed(**_RUN, reason="api_unavailable", message="503", retryable=True), True, False),
    ("stopped and requeued", JobStopped(**_RUN, reason="higher_priority", requeue=True), True, True),
    ("stopped for good", JobStopped(**_RUN, reason="cancelled", requeue=False), True, True),
    ("started", RunStarted(**_RUN, pods_running=1, pods_total=4), False, False),
    ("all pods ready", RunAllPodsReady(**_RUN, pods_total=4), False, False),
    ("succeeded", RunSucceeded(**_RUN), True, True),
    ("failed by the job: restarted within the attempt", RunFailed(**_RUN, reason="Error", exit_code=3), False, False),
    ("failed by the job, out of time", RunFailed(**_RUN, reason="DeadlineExceeded"), True, True),
    ("failed by the infrastructure: requeued", RunFailed(**_RUN, reason="NodeLost", classification="infrastructure",
                                                          nodes=["east-a100-1"]), True, True),
    ("evicted", RunEvicted(**_RUN, reason="NodeLost", node="east-a100-1"), True, True),
    ("deleted by Muster", RunDeleted(**_RUN, by="muster"), True, True),
    ("deleted by someone else", RunDeleted(**_RUN, by="external"), True, True),
    ("deleted, by whom unknown", RunDeleted(**_RUN), True, True),
    ("resized by its owner", _example(RunResized), False, False),
    ("idle: the stop that follows ends it", _example(RunIdle), False, False),
    ("nodes requested for it", _example(NodesRequested), False, False),
    ("a bought node released", _example(NodeReleaseRequested), False, False),
    ("its nodes provisioned", _example(NodesProvisioned), False, False),
    ("its provisioning failed: it waits for existing capacity", _example(ProvisioningFailed), False, False),
]


@pytest.mark.parametrize(("message", "before", "after"), [c[1:] for c in TABLE], ids=[c[0] for c in TABLE])
def test_whether_a_message_ends_its_attempt(message: Message, before: bool, after: bool) -> None:
    assert ends_attempt(message, started=False) is before
    assert ends_attempt(message, started=True) is after


def test_the_table_covers_every_decision_run_and_dispatch_type() -> None:
    assert {type(c[1]) for c in TABLE} == set(DECISIONS) | set(RUNS) | set(DISPATCHES)


def test_attempt_ends_names_exactly_the_types_that_may_end_an_attempt() -> None:
    assert set(ATTEMPT_ENDS) == {type(c[1]) for c in TABLE if c[2] or c[3]}
