"""Reading the dispatcher's memory back from its Jobs; which failed pods belong to the current revision."""

from __future__ import annotations

from datetime import UTC, datetime

from services.dispatcher.book import rebuild, run_from_job
from services.dispatcher.restarts import job_failed, pod_of
from tests.node_watcher.builders import job


def test_run_from_job_reads_the_bookkeeping() -> None:
    obj = job("train-1", 2, name="train-1-a2-r1", annotations={
        "muster.dev/revision": "1", "muster.dev/restarts": "1", "muster.dev/max-restarts": "3",
        "muster.dev/decision-event": "evt", "muster.dev/restart-at": "2026-11-01T12:00:10+00:00",
        "muster.dev/preempt-requested": "2026-11-01T12:00:00+00:00", "muster.dev/preempt-grace-seconds": "30",
        "muster.dev/preempt-requeue": "false", "muster.dev/preempt-reason": "quota_reclaim",
    })
    run = run_from_job(obj)
    assert run is not None
    assert (run.job_id, run.attempt, run.name, run.revision, run.restarts, run.max_restarts) == (
        "train-1", 2, "train-1-a2-r1", 1, 1, 3)
    assert run.restart_at == datetime(2026, 11, 1, 12, 0, 10, tzinfo=UTC)
    assert run.preemption is not None and not run.preemption.requeue
    assert run.preemption.reason == "quota_reclaim"
    assert run.preemption.deadline == datetime(2026, 11, 1, 12, 0, 30, tzinfo=UTC).timestamp()


def test_rebuild_keeps_the_latest_and_cleans_up_the_rest() -> None:
    jobs = [
        job("a", 0, name="a-a0"),
        job("a", 0, name="a-a0-r1", annotations={"muster.dev/revision": "1"}),
        job("b", 0, name="b-a0"),
        job("b", 1, name="b-a1"),
        job("c", 0, name="c-a0",
            annotations={"muster.dev/deleted-by": "muster", "muster.dev/delete-reason": "preempted"}),
    ]
    current, leftovers = rebuild(jobs)
    assert {k: v.name for k, v in current.items()} == {"a": "a-a0-r1", "b": "b-a1"}
    assert sorted((lo.run.name, lo.reason) for lo in leftovers) == [
        ("a-a0", "restart"), ("b-a0", "superseded"), ("c-a0", "preempted")]


def test_pods_of_a_revision() -> None:
    assert pod_of("train-1-a0-1-x7k2p", "train-1-a0")
    assert not pod_of("train-1-a0-r1-1-x7k2p", "train-1-a0")
    assert pod_of("train-1-a0-r1-1-x7k2p", "train-1-a0-r1")
    assert not pod_of("train-1-a01-0-x7k2p", "train-1-a0")


def test_job_failed() -> None:
    assert not job_failed(job())
    assert job_failed(job(conditions=[{"type": "Failed", "status": "True"}]))
