"""The wait breakdown of the replay report: each explained job's queueing by the reason the core gave."""

from __future__ import annotations

import pytest

from services.core import SchedulerConfig
from services.simulator.engine import BEYOND_STATUS_DEPTH, SimOptions, simulate
from services.simulator.report import build_report
from services.simulator.sources import parse_size_range

from .builders import job, one_node_cluster, workload

FIFO_FREE = SchedulerConfig(min_runtime_s=0.0, backfill=False, preemption=False, queue_order="submit")  # type: ignore[arg-type]


def _run(options: SimOptions, config: SchedulerConfig = FIFO_FREE) -> dict[str, object]:
    # an 8-GPU node: a 6-GPU job runs 0-100 s; the 8-GPU gang (t=10) waits for capacity while 1-GPU jobs
    # submitted after it start on the 2 free GPUs (no reservation: backfill is off)
    jobs = [job("long", 0, 100, 6), job("gang", 10, 50, 8), job("s1", 20, 30, 1), job("s2", 30, 30, 1)]
    result = simulate(workload(*jobs), one_node_cluster(8), config, options=options)
    return build_report(result)


def test_the_breakdown_adds_up_to_the_queueing_delay_and_names_the_reason() -> None:
    report = _run(SimOptions(tick_s=10.0, explain_gpus=(8, float("inf"))))
    big = report["wait_breakdown"]["5-8"]  # type: ignore[index]
    gang_queue = report["per_size_class"]["5-8"]["avg_queue_s"]  # type: ignore[index]
    # only the gang is explained; the 6-GPU job of the same class started at once and is not in it
    assert big["jobs"] == 1
    assert big["avg_queue_s"] == pytest.approx(90.0)  # submitted at 10, started when "long" ended at 100
    assert sum(big["by_reason_s"].values()) == pytest.approx(big["avg_queue_s"])
    assert gang_queue == pytest.approx(45.0)  # the class's average over both 5-8 jobs (0 and 90 s)
    # the queue's nominal quota is the node's 8 GPUs: with 6 in use the quota check refuses the gang first
    assert list(big["by_reason_s"]) == ["cohort_quota_exhausted"]
    assert big["by_reason_share"]["cohort_quota_exhausted"] == pytest.approx(1.0)
    assert big["avg_overtaken_gpus"] == 2  # s1 and s2 came after it and started while it waited


def test_a_job_beyond_the_status_depth_waits_for_no_reason_the_core_gave() -> None:
    report = _run(SimOptions(tick_s=10.0, explain_gpus=(8, 8), status_depth=0))
    big = report["wait_breakdown"]["5-8"]  # type: ignore[index]
    assert list(big["by_reason_s"]) == [BEYOND_STATUS_DEPTH]


def test_no_breakdown_unless_asked_and_decisions_are_the_same() -> None:
    plain = _run(SimOptions(tick_s=10.0))
    explained = _run(SimOptions(tick_s=10.0, explain_gpus=(1, float("inf"))))
    assert "wait_breakdown" not in plain
    assert set(explained["wait_breakdown"]) == {"1", "5-8"}  # type: ignore[call-overload]
    for key in ("avg_jct_s", "avg_queue_s", "preemptions", "decisions"):
        assert plain[key] == explained[key]


@pytest.mark.parametrize(("text", "expected"), [
    (">8", (9, float("inf"))), ("9+", (9, float("inf"))), ("5-8", (5, 8.0)), ("1", (1, 1.0)),
])
def test_size_ranges(text: str, expected: tuple[int, float]) -> None:
    assert parse_size_range(text) == expected


@pytest.mark.parametrize("text", ["big", "8-5", ">x", ""])
def test_bad_size_ranges(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size_range(text)
