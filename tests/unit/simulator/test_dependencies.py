"""Dependencies in the simulator: a DAG workload replayed through the core's dependency rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.dependencies import On
from services.simulator.engine import simulate
from services.simulator.policies import policy_config
from services.simulator.report import build_report
from services.simulator.workload import read_workload_csv, subset, write_workload_csv
from services.spec.cluster_file import load_cluster_file
from tests.unit.simulator.builders import EXAMPLES, job, one_node_cluster, workload

HEADER = "job_id,submit_time,duration,num_gpus,queue,after\n"


def _read(tmp_path: Path, body: str) -> None:
    path = tmp_path / "w.csv"
    path.write_text(HEADER + body, encoding="utf-8")
    read_workload_csv(path)


def test_a_chain_runs_in_order_although_everything_is_submitted_at_once() -> None:
    wl = workload(job("train", 0, 100, 4), job("evaluate", 0, 30, 4, after=(("train", On.SUCCEEDED),)),
                  job("publish", 0, 10, 4, after=(("evaluate", On.SUCCEEDED),)))
    result = simulate(wl, one_node_cluster(8), policy_config("muster"))
    recs = result.records
    assert [(j, recs[j].first_start, recs[j].end, recs[j].outcome) for j in ("train", "evaluate", "publish")] == [
        ("train", 0.0, 100.0, "succeeded"), ("evaluate", 100.0, 130.0, "succeeded"),
        ("publish", 130.0, 140.0, "succeeded")]
    report = build_report(result)
    assert report["jobs_completed"] == 3 and report["jobs_dependency_failed"] == 0
    assert report["avg_jct_s"] == pytest.approx((100 + 130 + 140) / 3)  # from submission: the wait counts


def test_a_failed_dependency_cancels_or_fails_its_dependants_in_turn() -> None:
    wl = workload(
        job("train", 0, 50, 8, fails=True),
        job("evaluate", 0, 10, 1, after=(("train", On.SUCCEEDED),)),  # cancelled
        job("publish", 0, 10, 1, after=(("evaluate", On.SUCCEEDED),), on_dependency_failure="fail"),
        job("alert", 0, 10, 1, after=(("train", On.FAILED),)),
        job("cleanup", 0, 10, 1, after=(("train", On.FINISHED),)),
    )
    result = simulate(wl, one_node_cluster(8), policy_config("fifo"))
    recs = result.records
    assert {j: r.outcome for j, r in recs.items()} == {
        "train": "failed", "evaluate": "cancelled", "publish": "failed", "alert": "succeeded", "cleanup": "succeeded"}
    assert recs["evaluate"].first_start is None and recs["publish"].first_start is None
    assert recs["evaluate"].dependency_failed == "dependency not met: train ended failed, not succeeded"
    assert recs["alert"].first_start == 50.0 and recs["cleanup"].first_start == 50.0
    report = build_report(result)
    assert (report["jobs_dependency_failed"], report["jobs_unfinished"]) == (2, 0)


def test_the_policy_sees_the_same_jobs_with_or_without_dependencies() -> None:
    """The core gets the job as without ``after`` (no duration, no outcome), only later."""
    plain = simulate(workload(job("a", 0, 100, 4), job("b", 0, 30, 4)), one_node_cluster(8), policy_config("fifo"))
    chained = simulate(workload(job("a", 0, 100, 4), job("b", 0, 30, 4, after=(("a", On.SUCCEEDED),), fails=True)),
                       one_node_cluster(8), policy_config("fifo"))
    assert chained.records["b"].job == plain.records["b"].job
    assert (plain.records["b"].first_start, chained.records["b"].first_start) == (0.0, 100.0)


def test_the_example_pipeline() -> None:
    wl = read_workload_csv(EXAMPLES / "pipeline.csv")
    result = simulate(wl, load_cluster_file(EXAMPLES / "cluster-tiny.yaml"), policy_config("muster"))
    recs = result.records
    for job_id, rec in recs.items():
        for dep, _ in rec.spec.after:
            if rec.first_start is not None:
                assert recs[dep].end is not None and rec.first_start >= recs[dep].end, (job_id, dep)
    assert recs["alert"].outcome == "cancelled" and recs["alert"].first_start is None
    assert all(r.outcome == "succeeded" for j, r in recs.items() if j != "alert")


def test_after_round_trips_through_the_csv(tmp_path: Path) -> None:
    original = workload(job("a", 0, 1, 1),
                        job("b", 1, 1, 1, after=(("a", On.SUCCEEDED),), fails=True),
                        job("c", 2, 1, 1, after=(("a", On.FINISHED), ("b", On.FAILED)), on_dependency_failure="fail"))
    path = tmp_path / "w.csv"
    write_workload_csv(original, path)
    assert read_workload_csv(path).jobs == original.jobs
    assert "a:finished;b:failed" in path.read_text(encoding="utf-8")


@pytest.mark.parametrize(("body", "message"), [
    ("a,0,1,1,q,\nb,0,1,1,q,ghost\n", "job 'b' waits for 'ghost', which the workload has not got"),
    ("a,0,1,1,q,b\nb,0,1,1,q,c:finished\nc,0,1,1,q,a\n", "cycle: a -> b -> c -> a"),
    ("a,0,1,1,q,a\n", "cycle: a -> a"),
    ("a,0,1,1,q,\nb,0,1,1,q,a:done\n", "line 3: after: 'a:done' waits on 'done'"),
    ("a,0,1,1,q,\nb,0,1,1,q,a;a:failed\n", "line 3: after names a job more than once"),
])
def test_bad_dependencies_are_refused_when_the_file_is_read(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"w\.csv") as refused:
        _read(tmp_path, body)
    assert message in str(refused.value)


def test_on_dependency_failure_is_cancel_or_fail(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("job_id,submit_time,duration,num_gpus,queue,on_dependency_failure\na,0,1,1,q,ignore\n",
                    encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: on_dependency_failure must be cancel or fail"):
        read_workload_csv(path)


def test_a_subset_drops_the_conditions_on_jobs_left_out() -> None:
    wl = workload(job("a", 0, 1, 1), job("b", 10, 1, 1, after=(("a", On.SUCCEEDED),)),
                  job("c", 20, 1, 1, after=(("a", On.SUCCEEDED), ("b", On.FINISHED))))
    kept = subset(wl, window=(5.0, 100.0))
    assert [(j.job_id, j.after) for j in kept.jobs] == [("b", ()), ("c", (("b", On.FINISHED),))]
