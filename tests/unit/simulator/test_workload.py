from __future__ import annotations

from pathlib import Path

import pytest

from services.simulator.workload import (
    Workload,
    min_replicas,
    pod_shape,
    read_workload_csv,
    subset,
    write_workload_csv,
)
from tests.unit.simulator.builders import EXAMPLES, job, workload


def test_reads_required_columns_and_defaults() -> None:
    wl = read_workload_csv(EXAMPLES / "tiny.csv")
    assert [j.job_id for j in wl.jobs] == ["a", "b", "c", "d"]
    first = wl.jobs[0]
    assert (first.submit_time, first.duration, first.num_gpus, first.queue) == (0.0, 100.0, 8, "research")
    assert first.gpu_type == "" and first.priority == 0 and first.runtime_estimate is None
    assert first.preemptible is True and first.checkpointable is False


def test_optional_columns_round_trip(tmp_path: Path) -> None:
    original = workload(
        job("x", 5, 60.5, 4, gpu_type="a100", priority=7, min_gpus=2, runtime_estimate=90, checkpointable=True),
        job("y", 1, 30, 1, preemptible=False),
    )
    path = tmp_path / "w.csv"
    write_workload_csv(original, path)
    again = read_workload_csv(path)
    assert again.jobs == original.jobs
    assert [j.job_id for j in again.jobs] == ["y", "x"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("job_id,submit_time,duration,num_gpus\na,0,1,1\n", "missing columns"),
        ("job_id,submit_time,duration,num_gpus,queue\na,0,abc,1,q\n", "line 2"),
        ("job_id,submit_time,duration,num_gpus,queue\na,0,1,1,q\na,1,1,1,q\n", "duplicate"),
        ("job_id,submit_time,duration,num_gpus,queue,min_gpus\na,0,1,2,q,3\n", "min_gpus"),
        ("job_id,submit_time,duration,num_gpus,queue,preemptible\na,0,1,2,q,maybe\n", "boolean"),
    ],
)
def test_bad_csv_is_rejected_with_the_reason(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_workload_csv(path)


@pytest.mark.parametrize(
    ("gpus", "node", "shape"),
    [(1, 8, (1, 1)), (8, 8, (1, 8)), (16, 8, (2, 8)), (12, 8, (2, 6)), (20, 8, (4, 5)), (7, 4, (7, 1)), (0, 8, (1, 0))],
)
def test_pod_shape_keeps_the_exact_gpu_count(gpus: int, node: int, shape: tuple[int, int]) -> None:
    assert pod_shape(gpus, node) == shape
    replicas, per_pod = shape
    assert replicas * per_pod == gpus


def test_min_replicas_from_min_gpus() -> None:
    assert min_replicas(None, 8, 4) is None
    assert min_replicas(8, 8, 4) == 1
    assert min_replicas(12, 8, 4) == 2
    assert min_replicas(32, 8, 4) is None  # not below the full size: not elastic


def test_subset_window_limit_and_shift() -> None:
    wl = workload(*(job(f"j{i}", 100 + 10 * i, 5, 1) for i in range(10)))
    cut = subset(wl, window=(20, 60), limit=3)
    assert [j.job_id for j in cut.jobs] == ["j2", "j3", "j4"]
    assert [j.submit_time for j in cut.jobs] == [0.0, 10.0, 20.0]


def test_subset_sampling_is_seeded() -> None:
    wl = workload(*(job(f"j{i}", i, 5, 1) for i in range(200)))
    a = subset(wl, sample=0.5, seed=3)
    b = subset(wl, sample=0.5, seed=3)
    c = subset(wl, sample=0.5, seed=4)
    assert a == b
    assert a != c
    assert 60 < len(a.jobs) < 140


def test_subset_of_empty_window_is_empty() -> None:
    wl = workload(job("a", 0, 1, 1))
    assert subset(wl, window=(10, 20)) == Workload("test", ())
