from __future__ import annotations

from pathlib import Path

import pytest

from services.simulator.sources import parse_window, resolve
from services.simulator.traces.alibaba import load_alibaba
from services.simulator.traces.gavel import load_gavel, v100_steps_per_second
from services.simulator.traces.philly import load_philly, read_philly_jobs
from tests.unit.simulator.builders import (
    EXAMPLES,
    SHARED_TRACES,
    write_alibaba_fixture,
    write_gavel_fixture,
    write_philly_fixture,
)


def test_philly_loader_orders_jobs_and_builds_one_queue_per_vc(tmp_path: Path) -> None:
    trace = load_philly(write_philly_fixture(tmp_path))
    jobs = trace.workload.jobs
    assert [j.submit_time for j in jobs] == [0.0, 10.0, 10.0, 60.0]
    # same-second submissions keep file order: aaa111 (row 0) before bbb222 (row 3)
    assert [j.queue for j in jobs] == ["vc-bbb222", "vc-aaa111", "vc-bbb222", "vc-ccc333"]
    assert [j.num_gpus for j in jobs] == [8, 1, 2, 16]
    assert all(j.runtime_estimate is None and j.checkpointable for j in jobs)
    queues = {q.name: q for q in trace.cluster.queues}
    assert {n: q.quotas["gpu:generic"].nominal for n, q in queues.items()} == {
        "vc-aaa111": 16,
        "vc-bbb222": 24,
        # missing from the node-count file: one node, raised to the two its 16-GPU job needs
        "vc-ccc333": 16,
    }
    assert all(q.cohort == "philly" and q.quotas["gpu:generic"].borrowing_limit is None for q in queues.values())
    (group,) = trace.cluster.clusters[0].node_groups
    assert (group.count, group.gpus_per_node) == (7, 8)


def test_alibaba_loader_drops_cpu_and_unscheduled_pods_and_rounds_up_gpus(tmp_path: Path) -> None:
    trace = load_alibaba(write_alibaba_fixture(tmp_path))
    by_id = {j.job_id: j for j in trace.workload.jobs}
    assert sorted(by_id) == ["pod-0", "pod-1", "pod-4", "pod-5"]
    assert by_id["pod-0"].duration == 490.0 and by_id["pod-0"].queue == "ls"
    assert by_id["pod-1"].num_gpus == 1  # 250 milli-GPU rounded up to a whole GPU
    assert by_id["pod-4"].gpu_type == "t4" and by_id["pod-4"].preemptible is False
    assert by_id["pod-5"].gpu_type == "" and by_id["pod-5"].queue == "burstable"
    groups = {g.name: (g.count, g.gpus_per_node, g.gpu_type) for g in trace.cluster.clusters[0].node_groups}
    assert sorted(groups.values()) == [(1, 8, "t4"), (2, 2, "p100")]
    assert {q.name for q in trace.cluster.queues} == {"guaranteed", "ls", "burstable", "be"}


def test_gavel_loader_turns_steps_into_seconds(tmp_path: Path) -> None:
    trace = load_gavel(write_gavel_fixture(tmp_path))
    jobs = {j.job_id: j for j in trace.workload.jobs}
    assert [j.job_id for j in trace.workload.jobs] == ["vc-aaa111-00001", "vc-bbb222-00001", "vc-aaa111-00002"]
    rate = v100_steps_per_second()["ResNet-18 (batch size 16)"]
    assert jobs["vc-aaa111-00001"].duration == pytest.approx(7731 / rate)
    assert jobs["vc-aaa111-00002"].num_gpus == 4 and jobs["vc-aaa111-00002"].submit_time == 6.5
    total = sum(q.quotas["gpu:v100"].nominal for q in trace.cluster.queues)
    assert total <= 500
    one = load_gavel(tmp_path, vc="bbb222")
    assert [j.queue for j in one.workload.jobs] == ["vc-bbb222"]


def test_resolve_csv_needs_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--cluster"):
        resolve(str(EXAMPLES / "tiny.csv"), None, tmp_path)
    wl, cfg = resolve(str(EXAMPLES / "tiny.csv"), str(EXAMPLES / "cluster-tiny.yaml"), tmp_path)
    assert len(wl.jobs) == 4 and cfg.queues[0].name == "research"


def test_resolve_named_trace_with_default_cluster(tmp_path: Path) -> None:
    wl, cfg = resolve("philly", None, write_philly_fixture(tmp_path))
    assert wl.name == "philly" and len(cfg.queues) == 3


def test_parse_window() -> None:
    assert parse_window("1d:2d") == (86400.0, 172800.0)
    assert parse_window(":1h") == (0.0, 3600.0)
    assert parse_window("1h:") == (3600.0, float("inf"))
    with pytest.raises(ValueError):
        parse_window("2d:1d")
    with pytest.raises(ValueError):
        parse_window("3h")


@pytest.mark.skipif(not (SHARED_TRACES / "philly-pollux" / "philly.csv").is_file(), reason="Philly trace absent")
def test_real_philly_trace_smoke() -> None:
    wl = read_philly_jobs(SHARED_TRACES / "philly-pollux" / "philly.csv")
    assert len(wl.jobs) == 82247
    assert len(wl.queues) == 15
    assert wl.jobs[0].submit_time == 0.0
    assert all(a.submit_time <= b.submit_time for a, b in zip(wl.jobs[:1000], wl.jobs[1:1001], strict=True))
    trace = load_philly(SHARED_TRACES)
    assert len(trace.cluster.queues) == 15
    assert sum(g.count * g.gpus_per_node for g in trace.cluster.clusters[0].node_groups) == 2848
