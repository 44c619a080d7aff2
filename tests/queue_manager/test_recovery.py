"""Rebuilding the queue state from its records gives the same scheduling state."""

from __future__ import annotations

import uuid

from schemas.decisions import JobAdmitted, JobPreemptionRequested
from schemas.envelope import Message
from schemas.intents import CancelJob, SuspendJob
from schemas.jobs import JobRecord, JobRecorded
from schemas.runs import RunFailed, RunStarted, RunSucceeded
from schemas.status import JobStatusChanged
from services.core import SchedulerConfig
from services.queue_manager.cycle_outcome import run_cycle
from services.queue_manager.inputs import on_input
from services.queue_manager.queue_state import Out, QueueState
from services.queue_manager.recovery import rebuild, seed_statuses
from tests.queue_manager.builders import NOW, folded_state, of_type, run_fields, submit

CFG = SchedulerConfig(min_runtime_s=0.0)


class Journal:
    """A queue state plus the compacted view of every record and status it produced."""

    def __init__(self, qs: QueueState) -> None:
        self.qs = qs
        self.records: dict[str, tuple[JobRecord, str | None]] = {}
        self.statuses: dict[str, JobStatusChanged] = {}

    def _keep(self, outs: list[Out], cause: str | None) -> list[Out]:
        for rec in of_type(outs, JobRecorded):
            self.records[rec.job_id] = (rec.record, cause)
        for status in of_type(outs, JobStatusChanged):
            self.statuses[status.job_id] = status
        return outs

    def feed(self, msg: Message, event_id: str | None = None) -> list[Out]:
        event_id = event_id or uuid.uuid4().hex
        return self._keep(on_input(self.qs, msg, event_id, NOW), event_id)

    def cycle(self) -> list[Out]:
        out = run_cycle(self.qs, NOW, CFG)
        return self._keep([*out.records, *out.decisions, *out.statuses], None)


def _mixed_journal() -> Journal:
    j = Journal(folded_state(nodes=4))
    for job_id in ("running", "admitted", "cancelling", "done"):
        j.feed(submit(job_id))
    j.cycle()
    for job_id in ("running", "cancelling", "done"):
        j.feed(RunStarted(**run_fields(job_id), pods_running=1, pods_total=1))
    j.feed(CancelJob(job_id="cancelling", requested_by="alice"))
    j.feed(RunSucceeded(**run_fields("done")))
    j.feed(submit("waiting", replicas=2, offset_s=5))
    j.feed(submit("held", offset_s=6))
    j.feed(SuspendJob(job_id="held", requested_by="alice"))
    j.cycle()
    return j


def _snapshot(qs: QueueState) -> dict[str, object]:
    s = qs.sched
    return {
        "pending": {k: (v.attempt, v.priority, v.replicas) for k, v in s.pending.items()},
        "suspended": sorted(s.suspended),
        "running": {k: (r.placement, r.replicas, r.terminating, r.job.attempt) for k, r in s.running.items()},
        "free": {n: s.free_gpus(n) for n in s.nodes()},
        "entries": {k: e.record() for k, e in qs.jobs.items()},
    }


def test_rebuild_from_records_gives_an_equal_state() -> None:
    j = _mixed_journal()
    assert {k: r.state for k, (r, _) in j.records.items()} == {
        "running": "running", "admitted": "admitted", "cancelling": "preempting", "done": "succeeded",
        "waiting": "pending", "held": "suspended",
    }
    fresh = folded_state(nodes=4)
    republish = rebuild(fresh, j.records.values())
    assert _snapshot(fresh) == _snapshot(j.qs)
    (adm,) = of_type(republish, JobAdmitted)
    (pre,) = of_type(republish, JobPreemptionRequested)
    assert (adm.job_id, adm.attempt) == ("admitted", 0)
    assert (pre.job_id, pre.reason, pre.requeue) == ("cancelling", "cancelled", False)


def test_redelivered_inputs_after_rebuild_change_nothing() -> None:
    j = Journal(folded_state())
    j.feed(submit("j1"), event_id="submit-1")
    j.cycle()
    j.feed(RunStarted(**run_fields("j1"), pods_running=1, pods_total=1), event_id="started-1")
    j.feed(RunFailed(**run_fields("j1"), reason="Error"), event_id="failed-1")
    fresh = folded_state()
    rebuild(fresh, j.records.values())
    seed_statuses(fresh, j.statuses.values())
    assert fresh.jobs["j1"].restarts == 1
    assert on_input(fresh, RunFailed(**run_fields("j1"), reason="Error"), "failed-1", NOW) == []
    assert on_input(fresh, submit("j1"), "submit-1", NOW) == []
    assert on_input(fresh, RunStarted(**run_fields("j1"), pods_running=1, pods_total=1), "started-1", NOW) == []
    out = run_cycle(fresh, NOW, CFG)
    assert not out.decisions and fresh.jobs["j1"].restarts == 1
    assert out.statuses == []  # the status topic already says this


def test_rebuild_marks_changed_statuses_only() -> None:
    j = _mixed_journal()
    fresh = folded_state(nodes=4)
    seed_statuses(fresh, j.statuses.values())
    rebuild(fresh, j.records.values())
    assert run_cycle(fresh, NOW, CFG).statuses == []
    del j.statuses["done"]
    fresh2 = folded_state(nodes=4)
    seed_statuses(fresh2, j.statuses.values())
    rebuild(fresh2, j.records.values())
    statuses = run_cycle(fresh2, NOW, CFG).statuses
    assert [o.message.job_id for o in statuses] == ["done"]  # type: ignore[attr-defined]
