"""Per job-size class figures and the allocation while jobs arrive."""

from __future__ import annotations

import pytest

from services.simulator.engine import simulate
from services.simulator.policies import policy_config
from services.simulator.report import build_report, held_gpu_seconds, size_class
from services.simulator.workload import read_workload_csv
from services.spec.cluster_file import load_cluster_file
from tests.unit.simulator.builders import EXAMPLES, job, one_node_cluster, workload


@pytest.mark.parametrize(("gpus", "name"), [(0, "1"), (1, "1"), (2, "2-4"), (4, "2-4"), (5, "5-8"), (8, "5-8"),
                                            (9, ">8"), (128, ">8")])
def test_size_classes(gpus: int, name: str) -> None:
    assert size_class(gpus) == name


def test_per_size_class_on_the_tiny_workload() -> None:
    # tiny.csv under fifo (worked out in test_engine): a (8 GPUs, submitted at 0) runs 0-100, b (4, at 10)
    # 100-150, c (4, at 20) 100-130, d (8, at 30) 150-160
    wl = read_workload_csv(EXAMPLES / "tiny.csv")
    report = build_report(simulate(wl, load_cluster_file(EXAMPLES / "cluster-tiny.yaml"), policy_config("fifo")))
    classes = report["per_size_class"]
    assert list(classes) == ["2-4", "5-8"]  # no 1-GPU or >8 jobs: left out
    small, large = classes["2-4"], classes["5-8"]
    assert (small["jobs"], small["jobs_completed"], large["jobs"]) == (2, 2, 2)
    assert small["avg_jct_s"] == pytest.approx((140 + 110) / 2)
    assert small["avg_queue_s"] == pytest.approx((90 + 80) / 2)
    assert large["avg_jct_s"] == pytest.approx((100 + 130) / 2)
    assert large["p50_queue_s"] == pytest.approx(60.0) and large["p99_queue_s"] == pytest.approx(118.8)
    assert large["gpu_hours"] == pytest.approx((800 + 80) / 3600)
    assert sum(c["jobs"] for c in classes.values()) == report["jobs"]


def test_allocation_while_arriving_leaves_out_the_drain() -> None:
    # one 8-GPU node: a 1-GPU job 0-100, a 4-GPU job submitted at 50 running 50-250; arrivals span 0-50
    wl = workload(job("a", 0.0, 100.0, 1), job("b", 50.0, 200.0, 4))
    report = build_report(simulate(wl, one_node_cluster(), policy_config("fifo")))
    assert report["makespan_s"] == 250.0
    assert report["gpu_allocation"] == pytest.approx((100 + 800) / (8 * 250))
    assert report["gpu_allocation_arrivals"] == pytest.approx(50 / (8 * 50))  # only job a held GPUs in 0-50


def test_held_gpu_seconds_integrates_a_timeline() -> None:
    timeline = [(0.0, "q", 2), (10.0, "q", 4), (20.0, "q", -2), (30.0, "q", -4)]
    assert held_gpu_seconds(timeline, 0.0, 40.0) == pytest.approx(20 + 60 + 40)
    assert held_gpu_seconds(timeline, 5.0, 25.0) == pytest.approx(10 + 60 + 20)
    assert held_gpu_seconds(timeline, 35.0, 50.0) == 0.0
    assert held_gpu_seconds([], 0.0, 10.0) == 0.0
