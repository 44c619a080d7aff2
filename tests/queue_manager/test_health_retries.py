"""Health-aware retries: only the job's own failures spend restarts; infrastructure failures requeue the
job away from the blamed nodes, a bounded number of times, and survive a queue-manager restart."""

from __future__ import annotations

from schemas.decisions import JobAdmitted, JobPreemptionRequested
from schemas.jobs import JobRecorded
from schemas.runs import DispatchFailed, JobStopped, RunEvicted, RunFailed, RunStarted
from services.core import SchedulerConfig
from services.queue_manager.queue_state import QueueState
from services.queue_manager.recovery import rebuild
from tests.queue_manager.builders import T0, folded_state, node, of_type, run_fields, submit
from tests.queue_manager.test_folding import admitted_running, cycle, feed


def infra_failure(job_id: str, attempt: int, node: str, reason: str = "UnexpectedAdmissionError") -> RunFailed:
    return RunFailed(**run_fields(job_id, attempt), reason=reason, message="Allocate failed", pod=f"{job_id}-0-abcde",
                     classification="infrastructure", nodes=[node])


def nodes_of(admitted: JobAdmitted) -> set[str]:
    return {n.node for n in admitted.placement.nodes}


def start(qs: QueueState, job_id: str, admitted: JobAdmitted) -> None:
    feed(qs, RunStarted(**run_fields(job_id, admitted.attempt), pods_running=1, pods_total=1))


def test_an_infrastructure_failure_requeues_away_from_the_node_without_spending_a_restart() -> None:
    qs = folded_state(nodes=2)
    first = admitted_running(qs, "j1", max_restarts=1)
    [bad] = nodes_of(first)
    outs = feed(qs, infra_failure("j1", 0, bad))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.attempt, rec.restarts, rec.infrastructure_retries) == ("pending", 1, 0, 1)
    assert rec.avoid_nodes == [bad] and rec.reason == "UnexpectedAdmissionError"
    assert "infrastructure failure on" in rec.message and "retry 1/10" in rec.message
    assert qs.sched.free_gpus(bad) == 8
    (second,) = of_type(cycle(qs).decisions, JobAdmitted)
    assert second.attempt == 1 and bad not in nodes_of(second)
    assert feed(qs, infra_failure("j1", 0, bad)) == []  # a repeat of the old attempt's failure


def test_the_avoided_node_is_used_when_nothing_else_fits() -> None:
    qs = folded_state(nodes=1)
    first = admitted_running(qs, "j1")
    [only] = nodes_of(first)
    feed(qs, infra_failure("j1", 0, only))
    (second,) = of_type(cycle(qs).decisions, JobAdmitted)
    assert nodes_of(second) == {only}


def test_a_job_failure_spends_a_restart_and_avoids_nothing() -> None:
    qs = folded_state(nodes=2)
    admitted_running(qs, "j1", max_restarts=2)
    outs = feed(qs, RunFailed(**run_fields("j1"), reason="Error", exit_code=3, restarts=0))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.attempt, rec.restarts, rec.infrastructure_retries, rec.avoid_nodes) == (
        "running", 0, 1, 0, [])
    assert rec.message == "job failure (Error, exit code 3): restart 1/2"


def test_restarts_spent_before_an_infrastructure_failure_carry_over() -> None:
    qs = folded_state(nodes=2)
    first = admitted_running(qs, "j1", max_restarts=3)
    feed(qs, RunFailed(**run_fields("j1"), reason="Error", exit_code=1, restarts=0))
    [bad] = nodes_of(first)
    feed(qs, infra_failure("j1", 0, bad))
    assert qs.jobs["j1"].restarts == 1
    (second,) = of_type(cycle(qs).decisions, JobAdmitted)
    assert second.restarts == 1  # the dispatcher starts the new attempt with one restart spent


def test_infrastructure_retries_are_bounded() -> None:
    qs = folded_state(nodes=3)
    admitted = admitted_running(qs, "j1", max_infrastructure_retries=2)
    for attempt in range(3):
        [node] = nodes_of(admitted)
        outs = feed(qs, infra_failure("j1", attempt, node))
        if attempt < 2:
            (admitted,) = of_type(cycle(qs).decisions, JobAdmitted)
            start(qs, "j1", admitted)
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.reason, rec.infrastructure_retries) == ("failed", "infrastructure_retries_exhausted", 3)
    assert rec.avoid_nodes == ["east-a100-0", "east-a100-1", "east-a100-2"]
    assert "j1" not in qs.sched.running and "j1" not in qs.sched.pending


def test_an_eviction_is_an_infrastructure_failure_too() -> None:
    qs = folded_state(nodes=2)
    first = admitted_running(qs, "j1", max_infrastructure_retries=0)
    [bad] = nodes_of(first)
    outs = feed(qs, RunEvicted(**run_fields("j1"), reason="NodeLost", node=bad))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.reason) == ("failed", "infrastructure_retries_exhausted")
    assert rec.avoid_nodes == [bad]


def test_an_infrastructure_failure_while_preempting_only_marks_the_node() -> None:
    qs = folded_state(nodes=2)
    first = admitted_running(qs, "j1")
    qs.jobs["j1"].state = "preempting"
    [bad] = nodes_of(first)
    outs = feed(qs, infra_failure("j1", 0, bad))
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.attempt, rec.infrastructure_retries, rec.avoid_nodes) == ("preempting", 0, 0, [bad])
    assert not of_type(outs, DispatchFailed)


def test_avoided_nodes_and_retries_survive_a_restart() -> None:
    qs = folded_state(nodes=2)
    first = admitted_running(qs, "j1", max_restarts=2)
    feed(qs, RunFailed(**run_fields("j1"), reason="Error", exit_code=1, restarts=0))
    [bad] = nodes_of(first)
    [rec_out] = of_type(feed(qs, infra_failure("j1", 0, bad)), JobRecorded)
    record = rec_out.record
    # the record as it went to muster.jobs, decoded again, rebuilds the same job
    restored = folded_state(nodes=2)
    rebuild(restored, [(type(record).model_validate_json(record.model_dump_json()), None)])
    entry = restored.jobs["j1"]
    assert (entry.attempt, entry.restarts, entry.infrastructure_retries, entry.avoid_nodes) == (1, 1, 1, (bad,))
    assert restored.sched.pending["j1"].avoid_nodes == {bad}
    (second,) = of_type(cycle(restored).decisions, JobAdmitted)
    assert bad not in nodes_of(second) and second.restarts == 1


def test_a_record_written_before_health_retries_still_decodes() -> None:
    qs = folded_state()
    feed(qs, submit("j1"))
    old = qs.jobs["j1"].record().model_dump(mode="json")
    for field in ("infrastructure_retries", "avoid_nodes"):
        del old[field]
    record = type(qs.jobs["j1"].record()).model_validate(old)
    assert (record.infrastructure_retries, record.avoid_nodes) == (0, [])


def test_a_stop_for_an_unhealthy_node_counts_as_an_infrastructure_retry_and_avoids_it() -> None:
    qs = folded_state(nodes=2)
    first = admitted_running(qs, "j1")
    [bad] = nodes_of(first)
    sick = node(bad, healthy=False)  # observed at T0, which says since when
    qs.fold_capacity(sick.key(), sick)
    later = T0.timestamp() + SchedulerConfig().node_unhealthy_grace_s
    (req,) = of_type(cycle(qs, later).decisions, JobPreemptionRequested)
    assert req.reason == "node_unhealthy"
    outs = feed(qs, JobStopped(**run_fields("j1"), reason="node_unhealthy", requeue=True), now=later)
    rec = of_type(outs, JobRecorded)[0].record
    assert (rec.state, rec.attempt, rec.infrastructure_retries, rec.avoid_nodes) == ("pending", 1, 1, [bad])
    well = node(bad)
    qs.fold_capacity(well.key(), well)  # back to health: still avoided while the other node has room
    (second,) = of_type(cycle(qs, later + 1).decisions, JobAdmitted)
    assert bad not in nodes_of(second)
