"""The Philly loader's two set-ups: static partitions (each VC only on its own nodes) and one cohort."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.simulator.engine import Simulator, simulate
from services.simulator.policies import policy_config
from services.simulator.sources import resolve
from services.simulator.traces.philly import load_philly, parse_philly_variant, vc_nodes
from services.spec.cluster_file import POOL_LABEL, core_nodes, parse_cluster_yaml
from tests.unit.simulator.builders import job, workload, write_philly_fixture


def test_partitioned_gives_each_vc_its_own_pool_and_no_cohort(tmp_path: Path) -> None:
    cfg = load_philly(write_philly_fixture(tmp_path), setup="partitioned").cluster
    assert cfg.cohorts == []
    queues = {q.name: q for q in cfg.queues}
    assert all(q.cohort is None and q.pool == name for name, q in queues.items())
    assert {n: q.quotas["gpu:generic"].nominal for n, q in queues.items()} == {
        "vc-aaa111": 16,
        "vc-bbb222": 24,
        "vc-ccc333": 16,
    }
    by_pool: dict[str, int] = {}
    for node in core_nodes(cfg):
        by_pool[node.labels[POOL_LABEL]] = by_pool.get(node.labels[POOL_LABEL], 0) + node.gpus
    assert by_pool == {"vc-aaa111": 16, "vc-bbb222": 24, "vc-ccc333": 16}  # a pool's GPUs = its queue's quota
    # same nodes as the cohort set-up
    cohort = load_philly(write_philly_fixture(tmp_path / "again")).cluster
    assert sum(n.gpus for n in core_nodes(cohort)) == sum(by_pool.values())


def test_partitioned_queue_places_only_on_its_own_nodes_and_never_borrows(tmp_path: Path) -> None:
    cfg = load_philly(write_philly_fixture(tmp_path), setup="partitioned").cluster
    # bbb222 owns 24 GPUs; five 8-GPU jobs: three run at once on its own three nodes, the others wait
    # although aaa111's and ccc333's nodes stand idle
    wl = workload(*(job(f"b{i}", 0.0, 100.0, 8, queue="vc-bbb222") for i in range(5)))
    sim = Simulator(wl, cfg, policy_config("fifo"))
    sim.run_until(50.0)
    running = sim.state.running
    assert len(running) == 3
    own = {n.name for n in core_nodes(cfg) if n.labels[POOL_LABEL] == "vc-bbb222"}
    for run in running.values():
        assert {a.node for a in run.placement.nodes} <= own
    result = sim.run()
    assert sorted(r.first_start for r in result.records.values()) == [0.0, 0.0, 0.0, 100.0, 100.0]
    # the cohort set-up lets the same jobs borrow the idle VCs' quota: all four start at once
    cohort = load_philly(write_philly_fixture(tmp_path / "again")).cluster
    pooled = simulate(wl, cohort, policy_config("fifo"))
    assert [r.first_start for r in pooled.records.values()] == [0.0] * 5


def test_simulator_confines_a_pooled_queue_to_its_pool_whatever_its_quota() -> None:
    cfg = parse_cluster_yaml(
        """
node_groups:
  - {name: small, count: 1, gpus_per_node: 8, labels: {team: a}}
  - {name: big, count: 4, gpus_per_node: 8}
pools: [{name: pa, node_labels: {team: a}}]
queues:
  - {name: qa, pool: pa, quotas: {"gpu:generic": {nominal: 100}}}
  - {name: qb, quotas: {"gpu:generic": {nominal: 100}}}
"""
    )
    wl = workload(job("a0", 0.0, 100.0, 8, queue="qa"), job("a1", 0.0, 100.0, 8, queue="qa"),
                  job("b0", 0.0, 100.0, 8, queue="qb"))
    result = simulate(wl, cfg, policy_config("fifo"))
    starts = {j: r.first_start for j, r in result.records.items()}
    assert starts == {"a0": 0.0, "a1": 100.0, "b0": 0.0}  # qa waits for its one node; qb uses any node


def test_node_scale_keeps_every_vc_able_to_run_its_largest_job() -> None:
    nodes = vc_nodes(["a", "b", "c"], {"a": 16, "b": 10}, node_scale=0.1, largest_job={"a": 32, "b": 1, "c": 8})
    assert nodes == {"a": 4, "b": 1, "c": 1}


@pytest.mark.parametrize(
    ("variant", "expected"),
    [("", ("cohort", 1.0)), ("0.25", ("cohort", 0.25)), ("partitioned", ("partitioned", 1.0)),
     ("partitioned:0.3", ("partitioned", 0.3)), ("cohort:0.5", ("cohort", 0.5))],
)
def test_philly_variants(variant: str, expected: tuple[str, float]) -> None:
    assert parse_philly_variant(variant) == expected


def test_philly_variant_errors_and_resolve(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="SETUP"):
        parse_philly_variant("static")
    _, cfg = resolve("philly:partitioned:0.5", None, write_philly_fixture(tmp_path))
    assert all(q.pool for q in cfg.queues) and not cfg.cohorts
