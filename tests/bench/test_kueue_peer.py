"""``muster bench kueue``'s pure parts: Kueue's generator config translated into Muster's queues and a timed
stream of submissions, Kueue's summary and checker output read, and the same figures computed for Muster."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench.peers.kueue import SMOKE
from bench.peers.kueue_build import checker_results
from bench.peers.kueue_figures import muster_figures, read_kueue, usage_percent
from bench.peers.kueue_kube import virtual_shape
from bench.peers.kueue_scenario import ScenarioError, ScenarioLayout, job_id, load, parse, scaled
from bench.peers.kueue_virtual import replay
from bench.system.measure import Timeline
from schemas.config import CohortDefined, PriorityClassDefined, QueueDefined

CONFIG = {
    "cohorts": [{
        "className": "cohort", "count": 2,
        "queuesSets": [{
            "className": "cq", "count": 3, "nominalQuota": 20, "borrowingLimit": "100",
            "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
            "workloadsSets": [
                {"count": 4, "creationIntervalMs": 100,
                 "workloads": [{"className": "small", "runtimeMs": 200, "priority": 50, "request": 1}]},
                {"count": 2, "creationIntervalMs": 500,
                 "workloads": [{"className": "large", "runtimeMs": 1000, "priority": 200, "request": "20"},
                               {"className": "medium", "runtimeMs": 500, "priority": 100, "request": 5}]},
            ],
        }],
    }],
}


def test_queues_and_cohorts_are_named_as_kueues_generator_names_them() -> None:
    scenario = parse(CONFIG)
    assert scenario.cohorts == ["cohort-0", "cohort-1"]
    assert [q.name for q in scenario.queues][:3] == ["cq-0-0-cohort-0", "cq-0-1-cohort-0", "cq-0-2-cohort-0"]
    assert {(q.nominal, q.borrowing_limit) for q in scenario.queues} == {(20, 100)}
    assert scenario.priorities == {"p50": 50, "p100": 100, "p200": 200}
    assert scenario.classes == ["small", "large", "medium"]
    assert scenario.nominal_total == 120 and scenario.nodes == 15
    assert scenario.differences == ()


def test_each_set_creates_its_nth_workload_n_intervals_after_the_start() -> None:
    arrivals = [a for a in parse(CONFIG).arrivals() if a.queue == "cq-0-0-cohort-0"]
    assert len(arrivals) == 4 + 2 * 2
    small = [(a.at_s, a.name) for a in arrivals if a.template.class_name == "small"]
    assert small == [(0.1, "small-0-0-0"), (pytest.approx(0.2), "small-0-1-0"), (pytest.approx(0.3), "small-0-2-0"),
                     (0.4, "small-0-3-0")]
    second = [(a.at_s, a.name) for a in arrivals if a.name.endswith(("-1-0", "-1-1")) and "small" not in a.name]
    # two templates per step: large then medium, each after its own interval
    assert [name for _, name in sorted(second)] == ["large-1-1-0", "medium-1-1-1"]
    assert [at for at, _ in sorted(second)] == [1.5, 2.0]
    assert all(a.job_id == f"{a.queue}--{a.name}" for a in arrivals)
    assert [a.at_s for a in parse(CONFIG).arrivals()] == sorted(a.at_s for a in parse(CONFIG).arrivals())


def test_the_layout_defines_cohorts_priorities_and_queues_with_the_quotas() -> None:
    messages = ScenarioLayout(parse(CONFIG)).messages()
    assert [m.item.name for m in messages if isinstance(m, CohortDefined)] == ["cohort-0", "cohort-1"]
    assert {m.item.name: m.item.value for m in messages if isinstance(m, PriorityClassDefined)} == {
        "p50": 50, "p100": 100, "p200": 200}
    queues = [m.item for m in messages if isinstance(m, QueueDefined)]
    assert len(queues) == 6 and queues[0].cohort == "cohort-0"
    assert queues[0].quotas["gpu:h100"].nominal == 20 and queues[0].quotas["gpu:h100"].borrowing_limit == 100


def test_what_muster_cannot_express_is_reported_and_fractions_are_refused() -> None:
    other = {"cohorts": [{**CONFIG["cohorts"][0], "queuesSets": [  # type: ignore[dict-item]
        {**CONFIG["cohorts"][0]["queuesSets"][0], "withinClusterQueue": "Never",  # type: ignore[index]
         "reclaimWithinCohort": None}]}]}
    differences = parse(other).differences
    assert any("withinClusterQueue Never" in d for d in differences)
    assert any("reclaimWithinCohort Never" in d for d in differences)
    fraction = {"cohorts": [{**CONFIG["cohorts"][0], "queuesSets": [  # type: ignore[dict-item]
        {**CONFIG["cohorts"][0]["queuesSets"][0], "nominalQuota": "500m"}]}]}  # type: ignore[index]
    with pytest.raises(ScenarioError, match="500m"):
        parse(fraction)
    with pytest.raises(ScenarioError, match="cohorts"):
        parse({"topology": {}})
    with pytest.raises(ScenarioError, match="'request' is missing"):
        parse({"cohorts": [{"className": "c", "count": 1, "queuesSets": [{
            "className": "q", "count": 1, "nominalQuota": 1,
            "workloadsSets": [{"count": 1, "workloads": [{"className": "w", "runtimeMs": 1}]}]}]}]})


def test_a_long_name_becomes_a_valid_job_id_and_a_scaled_scenario_keeps_every_set() -> None:
    long = job_id("a" * 40, "small-0-123-0")
    assert len(long) <= 48 and long.startswith("kueue-") and long == job_id("a" * 40, "small-0-123-0")
    small = scaled(parse(CONFIG), 0.1)
    assert [s.count for s in small.queues[0].sets] == [1, 1]


def test_the_smoke_scenario_ci_runs_is_a_valid_config() -> None:
    scenario = load(SMOKE)
    assert scenario.classes == ["small", "medium", "large"] and len(scenario.queues) == 4
    assert scenario.differences == ()


SUMMARY = """\
clusterQueueClasses:
  cq:
    cpuAverageUsage: 11800
    cpuUsed: 3540000000
    firstEventTime: "2026-11-28T01:00:00Z"
    lastEventTime: "2026-11-28T01:05:00Z"
    nominalQuota: 20000
droppedWorkloadEvents: 0
workloadClasses:
  large:
    averageTimeToAdmissionMs: 27300
    averageTimeToFinishMs: 28400
    count: 1500
    totalEvictions: 12
  small:
    averageTimeToAdmissionMs: 245000
    averageTimeToFinishMs: 245300
    count: 10500
    totalEvictions: 0
"""


def test_kueues_summary_is_read_and_its_usage_computed_as_its_checker_does(tmp_path: Path) -> None:
    (tmp_path / "summary.yaml").write_text(SUMMARY)
    (tmp_path / "minimalkueue.stats.yaml").write_text("maxrss: 1\nsysMs: 11000\nuserMs: 98000\nwallMs: 423000\n")
    figures = read_kueue(tmp_path / "summary.yaml", tmp_path / "minimalkueue.stats.yaml")
    assert figures.classes["small"].avg_admission_s == 245.0 and figures.classes["large"].evictions == 12
    # 3.54e9 mCPU ms over 20,000 mCPU x 300,000 ms
    assert figures.usage["cq"] == pytest.approx(59.0)
    assert figures.wall_s == 423.0 and figures.cpu_s == {"minimalkueue": 109.0}
    assert usage_percent(1.0, 0.0, 5.0) == 0.0


def test_the_checkers_leaf_subtests_are_read_from_its_verbose_output() -> None:
    output = """=== RUN   TestScalability
=== RUN   TestScalability/CommandStats
=== RUN   TestScalability/WorkloadClasses/medium
    checker_test.go:112: Average wait for admission 114000ms is more then expected 90000ms
--- FAIL: TestScalability (0.00s)
    --- PASS: TestScalability/CommandStats (0.00s)
    --- PASS: TestScalability/ClusterQueueClasses (0.00s)
        --- PASS: TestScalability/ClusterQueueClasses/cq (0.00s)
    --- FAIL: TestScalability/WorkloadClasses (0.00s)
        --- FAIL: TestScalability/WorkloadClasses/medium (0.00s)
        --- PASS: TestScalability/WorkloadClasses/small (0.00s)
FAIL
"""
    assert checker_results(output) == {
        "TestScalability/CommandStats": True, "TestScalability/ClusterQueueClasses/cq": True,
        "TestScalability/WorkloadClasses/medium": False, "TestScalability/WorkloadClasses/small": True}


def test_musters_figures_count_the_last_admission_and_every_admitted_span() -> None:
    scenario = parse({"cohorts": [{"className": "c", "count": 1, "queuesSets": [{
        "className": "cq", "count": 1, "nominalQuota": 10, "workloadsSets": [
            {"count": 2, "creationIntervalMs": 1000,
             "workloads": [{"className": "w", "runtimeMs": 1000, "priority": 1, "request": 5}]}]}]}]})
    first, second = scenario.arrivals()
    timeline = Timeline()
    timeline.submitted.update({first.job_id: 101.0, second.job_id: 102.0})
    timeline.hold(first.job_id, 101.5)
    timeline.release(first.job_id, 102.0, evicted=True)  # preempted after 0.5 s
    timeline.hold(second.job_id, 102.0)
    timeline.release(second.job_id, 103.0)
    timeline.finished[second.job_id] = 103.0
    timeline.hold(first.job_id, 103.0)  # admitted again
    timeline.release(first.job_id, 104.0)
    timeline.finished[first.job_id] = 104.0
    figures = muster_figures(scenario, scenario.arrivals(), timeline, started=100.0, cpu_s={"queue manager": 1.5})
    w = figures.classes["w"]
    assert (w.count, w.admitted, w.evictions) == (2, 2, 1)
    assert w.avg_admission_s == pytest.approx((2.0 + 0.0) / 2)  # to the last admission: 103 - 101, 102 - 102
    assert w.avg_finish_s == pytest.approx((3.0 + 1.0) / 2)
    # 5 GPUs x (0.5 + 1 + 1) s over 10 GPUs x 4 s
    assert figures.usage["cq"] == pytest.approx(31.25)
    assert figures.wall_s == pytest.approx(4.0)
    empty = muster_figures(scenario, scenario.arrivals(), Timeline(), started=100.0)
    assert math.isnan(empty.classes["w"].avg_admission_s) and empty.wall_s is None


def test_the_smoke_scenario_on_virtual_time_admits_and_finishes_every_workload_the_same_each_time() -> None:
    scenario = load(SMOKE)
    figures = replay(scenario)
    assert {n: (c.count, c.admitted) for n, c in figures.classes.items()} == {
        "small": (160, 160), "medium": (40, 40), "large": (16, 16)}
    assert all(c.avg_finish_s >= c.avg_admission_s for c in figures.classes.values())
    # 4 queues' worth of work: 40 x 1 x 0.2 + 10 x 5 x 0.5 + 4 x 20 x 1 = 113 GPU-s each, on 80 GPUs
    assert figures.wall_s is not None and 452 / 80 <= figures.wall_s < 30
    assert 0 < figures.usage["cq"] <= 100
    assert replay(scenario) == figures


def test_on_the_kubernetes_runs_shape_the_systems_latency_is_quota_held_and_so_waiting() -> None:
    # one pod per workload on nodes as big as the largest request, as the Kubernetes runs place them; a
    # workload seen running late and finished late holds its quota that much longer than its runtimeMs
    scenario = load(SMOKE)
    fleet, submit = virtual_shape(scenario)
    assert fleet.gpus_per_node == 20 and fleet.gpus >= scenario.nominal_total
    at_once = replay(scenario, fleet=fleet, submit=submit)
    late = replay(scenario, fleet=fleet, submit=submit, start_delay_s=0.3, finish_delay_s=0.2)
    runtimes = {t.class_name: t.runtime_s for t in scenario.templates()}
    for name, c in late.classes.items():
        assert c.admitted == c.count
        # each workload's last attempt: seen running 0.3 s after its admission, finished 0.2 s late (events
        # are read at the next 50 ms cycle)
        assert c.avg_finish_s - c.avg_admission_s == pytest.approx(runtimes[name] + 0.5, abs=0.06)
    assert sum(c.avg_admission_s for c in late.classes.values()) > sum(
        c.avg_admission_s for c in at_once.classes.values())
    assert replay(scenario, fleet=fleet, submit=submit, start_delay_s=0.3, finish_delay_s=0.2) == late


def test_a_scaled_generator_config_is_the_scaled_scenario_kueue_and_muster_both_run() -> None:
    import yaml

    from bench.peers.kueue import scaled_config

    text = scaled_config(yaml.safe_dump(CONFIG), 0.3)
    assert parse(yaml.safe_load(text)) == scaled(parse(CONFIG), 0.3)
    counts = [s["count"] for s in yaml.safe_load(text)["cohorts"][0]["queuesSets"][0]["workloadsSets"]]
    assert counts == [1, 1]  # 4 x 0.3 and 2 x 0.3 round to 1, never to none


def test_on_kubernetes_a_workload_is_one_pod_asking_its_request_on_nodes_that_hold_the_largest() -> None:
    from bench.peers.kueue_kube import cluster_config, node_gpus, pod_submission
    from services.kubesim.kubelet import DURATION_ANNOTATION

    scenario = parse(CONFIG)
    assert node_gpus(scenario) == 20  # the largest request, one pod on one node
    group = cluster_config("k", scenario).node_groups[0]
    assert group.count * group.gpus_per_node >= scenario.nominal_total == 120 and group.count == 6
    large = next(a for a in scenario.arrivals() if a.template.class_name == "large")
    job = pod_submission(large, at_s=1_000.0)
    assert (job.spec.replicas, job.spec.template.resources.gpus) == (1, 20)
    assert job.spec.annotations[DURATION_ANNOTATION] == "1"
    assert job.submitted_at.timestamp() == 1_000.0 and job.spec.priority_class == "p200"


TAS_CONFIG = {
    "topology": {"name": "default-topology", "levels": [
        {"name": "block", "count": 1, "nodeLabel": "cloud.provider.com/topology-block"},
        {"name": "rack", "count": 2, "nodeLabel": "cloud.provider.com/topology-rack"},
        {"name": "node", "count": 2, "nodeLabel": "kubernetes.io/hostname", "capacity": {"cpu": "4", "memory": "8Gi"}},
    ]},
    "cohorts": [{
        "className": "cohort", "count": 1,
        "queuesSets": [{
            "className": "cq", "count": 2, "nominalQuota": "2", "borrowingLimit": "4",
            "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
            "workloadsSets": [
                {"count": 6, "creationIntervalMs": 100, "workloads": [{
                    "className": "small-required-rack", "runtimeMs": 200, "priority": 50, "request": "500m",
                    "podCount": 2, "tasConstraint": "required", "tasLevel": "cloud.provider.com/topology-rack"}]},
                {"count": 3, "creationIntervalMs": 300, "workloads": [{
                    "className": "large-balanced-rack", "runtimeMs": 500, "priority": 200, "request": "1",
                    "podCount": 2, "tasConstraint": "balanced", "tasLevel": "cloud.provider.com/topology-rack",
                    "sliceSize": 1}]},
            ],
        }],
    }],
}


def test_a_tas_config_keeps_its_cpu_its_nodes_and_each_workloads_topology_request() -> None:
    scenario = parse(TAS_CONFIG)
    assert scenario.resource == "cpu"
    assert {(q.nominal, q.borrowing_limit) for q in scenario.queues} == {(2_000, 4_000)}
    small, large = (next(scenario.templates()), list(scenario.templates())[1])
    assert (small.request, small.pods, small.cpu) == (500, 2, True)
    assert small.topology is not None and (small.topology.level, small.topology.mode) == ("rack", "required")
    assert large.topology is not None and (large.topology.constraint, large.topology.mode) == ("balanced", "preferred")
    assert any("balanced (large-balanced-rack)" in d for d in scenario.differences)
    fleet = scenario.fleet()
    assert (fleet.nodes, fleet.gpus_per_node, fleet.nodes_per_rack, fleet.cpu_m, fleet.memory_mb) == (
        4, 0, 2, 4_000, 8_192)
    assert {n.state.topology.rack for n in fleet.node_states()} == {"r0", "r1"}
    [queue] = [m.item for m in ScenarioLayout(scenario).messages() if isinstance(m, QueueDefined)][:1]
    assert set(queue.quotas) == {"cpu"} and queue.quotas["cpu"].nominal == 2_000


def test_a_tas_workload_is_submitted_as_its_pods_asking_cpu_inside_one_rack() -> None:
    from bench.peers.kueue_scenario import submission

    arrivals = parse(TAS_CONFIG).arrivals()
    small = submission(next(a for a in arrivals if a.template.class_name == "small-required-rack")).spec
    assert (small.replicas, small.template.resources.gpus, small.template.resources.cpu) == (2, 0, "500m")
    assert small.topology is not None and (small.topology.level, small.topology.mode) == ("rack", "required")
    large = submission(next(a for a in arrivals if a.template.class_name == "large-balanced-rack")).spec
    assert large.template.resources.cpu == "1000m" and large.topology is not None
    assert large.topology.mode == "preferred"


def test_a_tas_scenario_on_virtual_time_admits_and_finishes_every_workload() -> None:
    figures = replay(parse(TAS_CONFIG))
    assert {n: (c.count, c.admitted) for n, c in figures.classes.items()} == {
        "small-required-rack": (12, 12), "large-balanced-rack": (6, 6)}
    assert all(c.avg_finish_s >= c.avg_admission_s for c in figures.classes.values())
    assert 0 < figures.usage["cq"] <= 100


def test_a_tas_config_naming_an_unknown_level_or_constraint_is_refused() -> None:
    def with_workload(**changes: object) -> dict[str, object]:
        config = yaml_copy(TAS_CONFIG)
        config["cohorts"][0]["queuesSets"][0]["workloadsSets"][0]["workloads"][0].update(changes)
        return config

    with pytest.raises(ScenarioError, match="tasLevel 'zone'"):
        parse(with_workload(tasLevel="zone"))
    with pytest.raises(ScenarioError, match="tasConstraint 'spread'"):
        parse(with_workload(tasConstraint="spread"))
    broken = yaml_copy(TAS_CONFIG)
    broken["topology"]["levels"] = broken["topology"]["levels"][1:]
    with pytest.raises(ScenarioError, match="block, rack and node"):
        parse(broken)


def yaml_copy(config: dict[str, object]) -> Any:
    import copy

    return copy.deepcopy(config)
