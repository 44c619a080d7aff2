"""The simulator buys nodes as the core decides (after the group's delay), bills them until they are given back,
and reports what was bought, per group and per queue."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.config import MusterConfig
from services.core.model import SchedulerConfig
from services.simulator.engine import simulate
from services.simulator.report import build_report
from services.simulator.workload import Workload, WorkloadJob


def burst_config(budget: dict[str, Any] | None) -> MusterConfig:
    team_a: dict[str, Any] = {"name": "team-a", "quotas": {"gpu:a100": {"nominal": 64}}}
    if budget is not None:
        team_a["burst_budget"] = budget
    return MusterConfig.model_validate({
        "clusters": [
            {"name": "home", "node_groups": [{"name": "a100", "count": 2, "gpus_per_node": 8, "gpu_type": "a100"}]},
            {"name": "cloud", "burst": True, "node_groups": [{
                "name": "a100", "count": 0, "gpus_per_node": 8, "gpu_type": "a100",
                "autoscale": {"max": 8, "provision_delay_s": 360, "price_per_gpu_hour": 2.0, "idle_s": 600}}]},
        ],
        "queues": [team_a, {"name": "team-b", "quotas": {"gpu:a100": {"nominal": 64}}}],
    })


JOBS = Workload("burst", (
    WorkloadJob("busy", 0, 7200, 16, "team-b", "a100", runtime_estimate=7200),
    WorkloadJob("gang", 60, 1800, 32, "team-a", "a100", runtime_estimate=1800),
))


def test_a_gang_too_big_for_home_runs_on_bought_nodes_that_are_given_back_when_idle() -> None:
    result = simulate(JOBS, burst_config({"gpu_hours": 200}), SchedulerConfig())
    gang = result.records["gang"]
    assert (gang.first_start, gang.end) == (420.0, 2220.0)  # requested at 60, ready 360 s later
    assert [(b.node, b.ready_at, b.released_at) for b in result.bought] == [
        (f"cloud-a100-b{i}", 420.0, 2820.0) for i in range(1, 5)]  # idle 600 s after the gang ended
    bought = build_report(result)["bought"]
    hours = 4 * 8 * 2400 / 3600
    assert bought["nodes"] == 4 and bought["requests"] == 1
    assert bought["gpu_hours"] == pytest.approx(hours)
    assert bought["money"] == pytest.approx(hours * 2.0)
    assert bought["per_queue"]["team-a"]["nodes"] == 4
    assert bought["per_group"]["cloud-a100"]["gpu_hours"] == pytest.approx(hours)


@pytest.mark.parametrize("budget", [None, {"gpu_hours": 20}, {"money": 10, "window": "day"}])
def test_a_queue_without_room_in_its_budget_waits_instead(budget: dict[str, Any] | None) -> None:
    result = simulate(JOBS, burst_config(budget), SchedulerConfig())
    assert result.records["gang"].first_start is None  # nothing at home can ever host 32 GPUs
    assert result.bought == []
    assert "bought" not in build_report(result)


def test_burst_clusters_must_be_able_to_grow() -> None:
    with pytest.raises(ValueError, match="need autoscale"):
        MusterConfig.model_validate({"clusters": [{"name": "cloud", "burst": True, "node_groups": [
            {"name": "a100", "count": 0, "gpus_per_node": 8}]}]})
    with pytest.raises(ValueError, match=r"count must not exceed autoscale\.max"):
        MusterConfig.model_validate({"clusters": [{"name": "c", "node_groups": [
            {"name": "a100", "count": 3, "gpus_per_node": 8, "autoscale": {"max": 2}}]}]})


def test_the_burst_example_shortens_team_a_wait_and_buys_for_team_a_only() -> None:
    from pathlib import Path

    from services.simulator.workload import read_workload_csv
    from services.spec.cluster_file import load_cluster_file

    examples = Path(__file__).resolve().parents[3] / "examples" / "sim"
    workload = read_workload_csv(examples / "two-teams.csv")
    home = build_report(simulate(workload, load_cluster_file(examples / "cluster-two-teams.yaml"), SchedulerConfig()))
    burst = build_report(simulate(workload, load_cluster_file(examples / "cluster-two-teams-burst.yaml"),
                                  SchedulerConfig()))
    assert burst["jobs_completed"] == home["jobs_completed"] == 120
    assert burst["per_queue"]["team-a"]["avg_queue_s"] < home["per_queue"]["team-a"]["avg_queue_s"] / 2
    assert set(burst["bought"]["per_queue"]) == {"team-a"}
    assert burst["bought"]["money"] == pytest.approx(burst["bought"]["gpu_hours"] * 2.5)
