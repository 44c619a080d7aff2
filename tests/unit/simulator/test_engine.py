from __future__ import annotations

from typing import Any

import pytest

from services.simulator.engine import SimOptions, Simulator, simulate
from services.simulator.policies import policy_config
from services.simulator.report import build_report
from services.simulator.workload import read_workload_csv
from services.spec.cluster_file import load_cluster_file, parse_cluster_yaml
from tests.unit.simulator.builders import EXAMPLES, job, one_node_cluster, workload

REQUIRED_KEYS = {
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "avg_queue_s",
    "p99_queue_s",
    "makespan_s",
    "gpu_allocation",
    "jain_fairness",
    "preemptions",
    "jobs_completed",
    "jobs_rejected",
    "policy",
    "seed",
    "per_queue",
    "cycles",
    "wall_s",
}


def _timing_free(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in {"wall_s", "cycle_wall_s"}}


def test_tiny_workload_under_fifo_matches_hand_computation() -> None:
    wl = read_workload_csv(EXAMPLES / "tiny.csv")
    result = simulate(wl, load_cluster_file(EXAMPLES / "cluster-tiny.yaml"), policy_config("fifo"))
    ends = {r.spec.job_id: r.end for r in result.records.values()}
    starts = {r.spec.job_id: r.first_start for r in result.records.values()}
    # a holds the node 0-100; b and c (4 GPUs each) start together at 100; d needs all 8 after b.
    assert starts == {"a": 0.0, "b": 100.0, "c": 100.0, "d": 150.0}
    assert ends == {"a": 100.0, "b": 150.0, "c": 130.0, "d": 160.0}
    report = build_report(result)
    assert report["avg_jct_s"] == pytest.approx((100 + 140 + 110 + 130) / 4)
    assert report["avg_queue_s"] == pytest.approx((0 + 90 + 80 + 120) / 4)
    assert report["makespan_s"] == 160.0
    assert report["gpu_allocation"] == pytest.approx(1200 / (8 * 160))
    assert report["jobs_completed"] == 4 and report["preemptions"] == 0
    assert report["p50_jct_s"] == pytest.approx(120.0)


def test_report_has_every_documented_key() -> None:
    wl = read_workload_csv(EXAMPLES / "tiny.csv")
    report = build_report(simulate(wl, load_cluster_file(EXAMPLES / "cluster-tiny.yaml"), policy_config("muster")))
    assert report.keys() >= REQUIRED_KEYS
    assert report["policy"] == "muster"
    assert set(report["per_queue"]) == {"research"}
    assert 0 < report["jain_fairness"] <= 1.0


@pytest.mark.parametrize("policy", ["fifo", "muster"])
def test_every_job_completes_for_finite_load(policy: str) -> None:
    wl = read_workload_csv(EXAMPLES / "two-teams.csv")
    cluster = load_cluster_file(EXAMPLES / "cluster-two-teams.yaml")
    report = build_report(simulate(wl, cluster, policy_config(policy)))
    assert report["jobs_completed"] == report["jobs"] == 120
    assert report["jobs_unfinished"] == 0
    assert 0 < report["gpu_allocation"] <= 1.0
    assert all(s["jobs_completed"] > 0 for s in report["per_queue"].values())


def test_same_seed_gives_identical_report() -> None:
    wl = read_workload_csv(EXAMPLES / "two-teams.csv")
    cluster = load_cluster_file(EXAMPLES / "cluster-two-teams.yaml")
    first = build_report(simulate(wl, cluster, policy_config("muster"), seed=5))
    second = build_report(simulate(wl, cluster, policy_config("muster"), seed=5))
    assert _timing_free(first) == _timing_free(second)


def test_allocation_never_exceeds_capacity() -> None:
    wl = read_workload_csv(EXAMPLES / "two-teams.csv")
    cluster = load_cluster_file(EXAMPLES / "cluster-two-teams.yaml")
    result = simulate(wl, cluster, policy_config("muster"))
    held = 0
    for _, _, delta in sorted(result.timeline, key=lambda e: e[0]):
        held += delta
        assert held >= 0
    assert held == 0
    assert max(r.rate for r in result.records.values()) == 0


@pytest.mark.parametrize(("checkpointable", "low_end"), [(True, 530.0 + 570.0), (False, 530.0 + 1000.0)])
def test_priority_preemption_stops_after_checkpoint_and_resumes(checkpointable: bool, low_end: float) -> None:
    wl = workload(
        job("low", 0, 1000, 8, priority=0, checkpointable=checkpointable),
        job("high", 400, 100, 8, priority=100),
    )
    opts = SimOptions(checkpoint_s=30.0, grace_period_s=60.0)
    result = simulate(wl, one_node_cluster(), policy_config("muster"), options=opts)
    low, high = result.records["low"], result.records["high"]
    assert low.preemptions == 1 and result.preemptions == 1
    assert high.first_start == 430.0 and high.end == 530.0  # the stop waits min(grace 60, checkpoint 30)
    assert low.end == low_end
    assert low.restarts_from_zero == (0 if checkpointable else 1)


def test_runtimes_are_learnt_only_from_jobs_that_finished_before() -> None:
    """A trace job's id is its name: ``train-3`` learns from ``train-1`` and ``train-2`` once they are done."""
    wl = workload(job("train-1", 0, 100, 8), job("train-2", 0, 300, 8), job("train-3", 50, 10, 8))
    sim = Simulator(wl, one_node_cluster(), policy_config("fifo"))
    estimates: dict[float, float | None] = {}
    for t in (50.0, 350.0):  # FIFO: train-1 runs 0-100, train-2 100-400, train-3 400-410
        sim.run_until(t)
        estimates[t] = sim.state.estimate(sim.state.pending["train-3"])
    result = sim.run()
    assert estimates == {50.0: None, 350.0: 100.0}
    assert result.records["train-3"].job.name == "train-3"
    assert sim.state.runtimes.estimate(result.records["train-3"].job) == 100.0  # median of 100, 300, 10 s


def test_restart_cost_holds_the_gpus_without_progress() -> None:
    wl = workload(job("a", 0, 100, 8), job("b", 10, 100, 8))
    result = simulate(wl, one_node_cluster(), policy_config("fifo"), options=SimOptions(restart_cost_s=30.0))
    a, b = result.records["a"], result.records["b"]
    assert (a.first_start, a.end) == (0.0, 130.0)
    assert (b.first_start, b.end) == (130.0, 260.0)
    assert a.gpu_seconds == 8 * 130.0


def test_rounds_decide_only_on_their_boundaries() -> None:
    wl = workload(job("a", 0, 100, 8), job("b", 10, 100, 8), job("c", 130, 5, 1))
    result = simulate(wl, one_node_cluster(), policy_config("fifo"), options=SimOptions(round_s=60.0))
    a, b, c = (result.records[k] for k in "abc")
    assert (a.first_start, a.end) == (60.0, 160.0)  # arrived at 0, the first round is at 60
    assert (b.first_start, b.end) == (180.0, 280.0)  # a ended at 160: the next round
    assert c.first_start == 300.0


def test_all_checkpointable_keeps_progress_across_preemption() -> None:
    wl = workload(job("low", 0, 1000, 8), job("high", 400, 100, 8, priority=100))
    opts = SimOptions(checkpoint_s=30.0, grace_period_s=60.0, all_checkpointable=True)
    result = simulate(wl, one_node_cluster(), policy_config("muster"), options=opts)
    assert result.records["low"].restarts_from_zero == 0
    assert result.records["low"].end == 530.0 + 570.0


def test_given_estimates_are_kept() -> None:
    wl = workload(job("a", 0, 100, 8), job("b", 500, 10, 8, runtime_estimate=42.0))
    result = simulate(wl, one_node_cluster(), policy_config("fifo"))
    assert result.records["b"].job.runtime_estimate == 42.0


def test_a_job_that_never_fits_does_not_hang_the_run() -> None:
    wl = workload(job("ok", 0, 50, 4), job("huge", 10, 50, 64))
    result = simulate(wl, one_node_cluster(), policy_config("muster"), options=SimOptions(max_tick_s=600.0))
    report = build_report(result)
    assert result.records["ok"].end == 50.0
    assert result.records["huge"].end is None
    assert report["jobs_completed"] == 1
    assert report["jobs_rejected"] + report["jobs_unfinished"] == 1


def test_gang_bigger_than_a_node_is_split_into_pods() -> None:
    cluster = load_cluster_file(EXAMPLES / "cluster-two-teams.yaml")
    wl = workload(job("big", 0, 100, 16, queue="team-a"), job("odd", 0, 100, 12, queue="team-b"))
    sim = Simulator(wl, cluster, policy_config("fifo"))
    result = sim.run()
    assert (result.records["big"].job.replicas, result.records["big"].job.gpus_per_pod) == (2, 8)
    assert (result.records["odd"].job.replicas, result.records["odd"].job.gpus_per_pod) == (2, 6)
    assert result.records["big"].end == 100.0 and result.records["odd"].end == 100.0
    assert result.records["big"].gpu_seconds == 1600.0


def test_elastic_job_starts_small_and_speeds_up_when_it_grows() -> None:
    cluster = parse_cluster_yaml(
        "clusters:\n  - name: c\n    node_groups:\n      - {name: g, count: 2, gpus_per_node: 8, gpu_type: a100}\n"
        "queues:\n  - name: research\n    quotas:\n      gpu:a100: {nominal: 16}\n"
    )
    wl = workload(job("other", 0, 100, 8), job("elastic", 10, 100, 16, min_gpus=8))
    result = simulate(wl, cluster, policy_config("muster"))
    rec = result.records["elastic"]
    # 1,600 GPU-seconds of work: 8 GPUs from 10 to 100 (720), then 16 GPUs for the remaining 880 -> 55 s
    assert rec.first_start == 10.0
    assert rec.end == 155.0
    assert rec.gpu_seconds == 1600.0
    assert (100.0, "research", 8) in result.timeline


def test_status_depth_override_leaves_decisions_unchanged() -> None:
    wl = read_workload_csv(EXAMPLES / "two-teams.csv")
    cluster = load_cluster_file(EXAMPLES / "cluster-two-teams.yaml")
    full = simulate(wl, cluster, policy_config("muster"))
    lean = simulate(wl, cluster, policy_config("muster"), options=SimOptions(status_depth=0))
    assert {k: r.end for k, r in full.records.items()} == {k: r.end for k, r in lean.records.items()}


def test_a_resize_costs_the_job_a_restart() -> None:
    """The job re-forms its gang at the new size from a checkpoint: ``restart_cost_s`` without progress."""
    cluster = parse_cluster_yaml(
        "clusters:\n  - name: c\n    node_groups:\n      - {name: g, count: 2, gpus_per_node: 8, gpu_type: a100}\n"
        "queues:\n  - name: research\n    quotas:\n      gpu:a100: {nominal: 16}\n"
    )
    wl = workload(job("other", 0, 100, 8), job("elastic", 10, 100, 16, min_gpus=8))
    result = simulate(wl, cluster, policy_config("muster"), options=SimOptions(restart_cost_s=30.0))
    rec = result.records["elastic"]
    # 8 GPUs from 10 (progress from 40) to 130, when "other" (started at 0, warm until 30) ends: 720 of
    # 1,600 GPU-seconds; then 16 GPUs, warm until 160, for the remaining 880 -> 55 s
    assert rec.first_start == 10.0
    assert rec.end == 215.0
    assert rec.gpu_seconds == 8 * 120.0 + 16 * 85.0


@pytest.mark.parametrize(("policy", "elastic"), [("muster", True), ("tiresias", False), ("muster-no-elastic", False)])
def test_all_elastic_makes_jobs_elastic_only_under_a_policy_that_resizes(policy: str, elastic: bool) -> None:
    cluster = load_cluster_file(EXAMPLES / "cluster-two-teams.yaml")
    wl = workload(job("gang", 0, 100, 16, queue="team-a"), job("single", 0, 100, 1, queue="team-a"))
    result = simulate(wl, cluster, policy_config(policy), options=SimOptions(all_elastic=True))
    gang = result.records["gang"].job
    assert gang.min_replicas == (1 if elastic else None) and gang.replicas == 2
    assert result.records["single"].job.min_replicas is None  # one pod: nothing to shrink
