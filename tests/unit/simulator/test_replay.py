"""The log's reconstruction (``services.simulator.replay``): hand-made message sequences, no Kafka."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from schemas.codec import encode
from services.simulator.logfile import read_export, write_export
from services.simulator.replay import ActualJob, reconstruct
from tests.unit.simulator.log_builders import Log, at


@dataclass(frozen=True)
class Case:
    name: str
    history: Callable[[Log], Log]
    outcome: str
    replayed: bool
    duration: float | None = None  # the duration it is replayed with
    wait: float | None = None
    jct: float | None = None
    preemptions: int = 0
    carried_over: bool = False


AS_OF = 1000.0
SINCE = 0.0

CASES = [
    Case("succeeded", lambda g: g.submit("j", "team-a", 0).admit("j", 10).start("j", 12).succeed("j", 112),
         "succeeded", True, duration=100, wait=10, jct=112),
    Case("preempted, resumed, checkpointable: the attempts add up",
         lambda g: g.submit("j", "team-a", 0, checkpoint=True).admit("j", 0).start("j", 0).preempt("j", 50, 60)
         .admit("j", 100, 1).start("j", 100, 1).succeed("j", 140, 1),
         "succeeded", True, duration=100, wait=0, jct=140, preemptions=1),
    Case("preempted, resumed, not checkpointable: the last attempt is the run",
         lambda g: g.submit("j", "team-a", 0).admit("j", 0).start("j", 0).preempt("j", 50, 60)
         .admit("j", 100, 1).start("j", 100, 1).succeed("j", 140, 1),
         "succeeded", True, duration=40, wait=0, jct=140, preemptions=1),
    Case("cancelled while pending: left out", lambda g: g.submit("j", "team-a", 0).cancel("j", 30),
         "cancelled", False),
    Case("cancelled while running: replayed as far as it ran, no JCT",
         lambda g: g.submit("j", "team-a", 0).admit("j", 0).start("j", 0).cancel("j", 50, running=True),
         "cancelled", True, duration=50, wait=0),
    Case("failed: replayed as far as it ran, no JCT",
         lambda g: g.submit("j", "team-a", 0).admit("j", 0).start("j", 5).fail("j", 25),
         "failed", True, duration=20, wait=0),
    Case("still running when read: the time so far, a lower bound",
         lambda g: g.submit("j", "team-a", 0).admit("j", 100).start("j", 100).status("j", "running", 100),
         "running", True, duration=900, wait=100),
    Case("still pending when read: its estimate", lambda g: g.submit("j", "team-a", 0, estimate=500),
         "pending", True, duration=500),
    Case("pending without an estimate: the default", lambda g: g.submit("j", "team-a", 0), "pending", True,
         duration=3600),
    Case("rejected: left out", lambda g: g.submit("j", "team-a", 0).reject("j", 1), "rejected", False),
    Case("submitted before the window, running at its start: load, what remained",
         lambda g: g.submit("j", "team-a", -50).admit("j", -40).start("j", -40).succeed("j", 60),
         "succeeded", True, duration=60, wait=0, jct=60, carried_over=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_one_job(case: Case) -> None:
    log = case.history(Log().cluster())
    recon = reconstruct(log.envelopes, as_of=at(AS_OF), since=at(SINCE))
    job: ActualJob = recon.jobs["j"]
    assert (job.outcome, job.replayed, job.carried_over) == (case.outcome, case.replayed, case.carried_over)
    assert job.preemptions == case.preemptions
    assert job.wait_s == case.wait
    assert job.jct_s == case.jct
    replayed = {w.job_id: w for w in recon.workload.jobs}
    assert ("j" in replayed) == case.replayed
    if case.replayed:
        assert replayed["j"].duration == pytest.approx(case.duration)
        assert replayed["j"].num_gpus == 8 and replayed["j"].gpu_type == "a100" and replayed["j"].priority == 100


def test_jobs_over_before_the_window_are_not_there() -> None:
    log = Log().cluster().submit("old", "team-a", -500).admit("old", -500).start("old", -500).succeed("old", -10)
    log.submit("new", "team-b", 5)
    recon = reconstruct(log.envelopes, as_of=at(100), since=at(0))
    assert set(recon.jobs) == {"new"}
    assert [j.submit_time for j in recon.workload.jobs] == [5.0]


def test_without_since_the_window_starts_at_the_first_submission() -> None:
    log = Log().cluster().submit("a", "team-a", 30).submit("b", "team-b", 40)
    recon = reconstruct(log.envelopes, as_of=at(100))
    assert recon.origin == at(30)
    assert [(j.job_id, j.submit_time) for j in recon.workload.jobs] == [("a", 0.0), ("b", 10.0)]
    assert recon.window_s == 70


def test_the_notes_say_what_was_assumed() -> None:
    log = Log().cluster().submit("run", "team-a", 0).admit("run", 0).start("run", 0).status("run", "running", 0)
    log.submit("wait", "team-b", 0).submit("gone", "team-b", 0).cancel("gone", 5)
    notes = " | ".join(reconstruct(log.envelopes, as_of=at(100), since=at(0)).notes)
    assert "still running" in notes and "lower bound" in notes
    assert "still pending" in notes and "runtime estimate" in notes
    assert "cancelled" in notes


def test_the_cluster_and_configuration_come_from_the_log() -> None:
    log = Log().cluster(nodes=3, gpus=8, quota=12).submit("j", "team-a", 0)
    cfg = reconstruct(log.envelopes, as_of=at(10), since=at(0)).cluster
    [cluster] = cfg.clusters
    [group] = cluster.node_groups
    assert (cluster.name, group.name, group.count) == ("east", "a100", 3)
    assert (group.gpus_per_node, group.gpu_type) == (8, "a100")
    assert group.labels == {"pool": "training"}  # Muster's own labels are not the group's
    assert (group.topology.racks, group.topology.rack_prefix) == (2, "rack")
    assert [q.name for q in cfg.queues] == ["team-a", "team-b"]
    assert cfg.queues[1].quotas["gpu:a100"].nominal == 12
    assert [c.name for c in cfg.cohorts] == ["research"]


def test_nodes_as_at_the_window_start() -> None:
    from schemas.capacity import NodeRemoved

    log = Log().cluster(nodes=2).submit("j", "team-a", 0)
    log.add(NodeRemoved(cluster="east", node="east-a100-1", observed_at=at(-50)), -50)  # gone before the start
    log.add(NodeRemoved(cluster="east", node="east-a100-0", observed_at=at(50)), 50)  # gone later: still counted
    cfg = reconstruct(log.envelopes, as_of=at(100), since=at(0)).cluster
    assert sum(g.count for c in cfg.clusters for g in c.node_groups) == 1


def test_a_queue_deleted_later_keeps_its_definition() -> None:
    from schemas.config import ConfigItemDeleted

    log = Log().cluster(quota=4).submit("j", "team-b", 0)
    log.add(ConfigItemDeleted(kind="queue", name="team-b"), 50)
    recon = reconstruct(log.envelopes, as_of=at(100), since=at(0))
    assert {q.name: q.quotas["gpu:a100"].nominal for q in recon.cluster.queues}["team-b"] == 4
    assert any("deleted" in n for n in recon.notes)


def test_an_export_reads_back_as_written(tmp_path: Path) -> None:
    log = Log().cluster().submit("j", "team-a", 0).admit("j", 1).start("j", 2).succeed("j", 30)
    path = tmp_path / "log.jsonl"
    buffer = io.BytesIO()
    count = write_export(buffer, [encode(e) for e in log.envelopes], as_of=at(40), since=at(0))
    path.write_bytes(buffer.getvalue() + b"not json\n")
    back = read_export(path)
    assert count == len(log.envelopes) and back.undecodable == 1
    assert (back.as_of, back.since) == (at(40), at(0))
    assert [e.event_id for e in back.envelopes] == [e.event_id for e in log.envelopes]


def test_a_file_that_is_not_an_export_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type": "SubmitJob"}\n')
    with pytest.raises(ValueError, match="not a Muster log export"):
        read_export(path)


def test_the_time_preemptions_took_is_measured() -> None:
    log = Log().cluster()
    for i, took in enumerate((10, 40, 20)):
        log.submit(f"j{i}", "team-a", 0).admit(f"j{i}", 0).start(f"j{i}", 0).preempt(f"j{i}", 100, 100 + took)
    assert reconstruct(log.envelopes, as_of=at(300), since=at(0)).stop_s == 20
    assert reconstruct(Log().cluster().submit("j", "team-a", 0).envelopes, as_of=at(9)).stop_s is None
