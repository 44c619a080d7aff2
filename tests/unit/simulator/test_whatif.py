"""Config patches and what-if replays of a reconstructed log (``services.simulator.whatif``), no Kafka."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.core.model import SchedulerConfig
from services.simulator.replay import reconstruct
from services.simulator.whatif import PatchError, apply_patch, load_patch, render_text, what_if, write_plot
from services.spec.merge_patch import merge_patch
from tests.unit.simulator.builders import one_node_cluster
from tests.unit.simulator.log_builders import Log, at

BASE = one_node_cluster(8, ("team-a", "team-b"))
SCHED = SchedulerConfig()


@pytest.mark.parametrize(("target", "patch", "expected"), [
    ({"a": 1, "b": {"c": 2}}, {"b": {"c": 3}}, {"a": 1, "b": {"c": 3}}),
    ({"a": 1, "b": 2}, {"b": None}, {"a": 1}),
    ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
    ({"a": 1}, {"b": {"c": None, "d": 1}}, {"a": 1, "b": {"d": 1}}),
    ({"a": {"x": 1}}, {"a": 5}, {"a": 5}),
])
def test_merge_patch(target: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    assert merge_patch(target, patch) == expected


@pytest.mark.parametrize(("patch", "check"), [
    ({"queues": {"team-b": {"quotas": {"gpu:a100": {"nominal": 24}}}}},
     lambda cfg, s: {q.name: q.quotas["gpu:a100"].nominal for q in cfg.queues} == {"team-a": 8, "team-b": 24}),
    ({"queues": {"team-a": {"weight": 3}}}, lambda cfg, s: cfg.queues[0].weight == 3),
    ({"cohorts": {"all": {"weight": 2}}}, lambda cfg, s: cfg.cohorts[0].weight == 2),
    ({"clusters": {"tiny": {"node_groups": {"gpu": {"count": 3}}}}},
     lambda cfg, s: cfg.clusters[0].node_groups[0].count == 3),
    ({"clusters": {"tiny": {"node_groups": {"more": {"count": 2, "gpus_per_node": 8, "gpu_type": "a100"}}}}},
     lambda cfg, s: [g.name for g in cfg.clusters[0].node_groups] == ["gpu", "more"]),
    ({"queues": {"team-c": {"cohort": "all"}}}, lambda cfg, s: [q.name for q in cfg.queues][-1] == "team-c"),
    ({"queues": {"team-b": None}}, lambda cfg, s: [q.name for q in cfg.queues] == ["team-a"]),
    ({"scheduler": {"preemption": False, "min_runtime_s": 60}},
     lambda cfg, s: not s.preemption and s.min_runtime_s == 60.0),
])
def test_patches_that_apply(patch: dict[str, Any], check: Any) -> None:
    patched = apply_patch(BASE, SCHED, patch)
    assert check(patched.config, patched.scheduler)
    assert patched.changes  # every patch here changes something, and says so


@pytest.mark.parametrize(("patch", "message"), [
    ({"queue": {}}, "config patch: unknown key 'queue' (did you mean 'queues'?)"),
    ({"queues": {"team-b": {"wieght": 2}}}, "queues.team-b: unknown key 'wieght' (did you mean 'weight'?)"),
    ({"clusters": {"tiny": {"node_groups": {"gpu": {"nodes": 3}}}}},
     "clusters.tiny.node_groups.gpu: unknown key 'nodes'"),
    ({"scheduler": {"preempt": False}}, "scheduler: unknown key 'preempt' (did you mean 'preemption'?)"),
    ({"scheduler": {"preemption": "no"}}, "scheduler.preemption: expected bool"),
    ({"queues": {"team-b": {"quotas": {"gpu:a100": {"nominal": -1}}}}}, "queues.team-b.quotas.gpu:a100.nominal"),
    ({"queues": {"team-b": {"quotas": {"gpu:a100": {"nominl": 1}}}}}, "queues.team-b.quotas.gpu:a100.nominl"),
    ({"queues": {"team-b": {"cohort": "nope"}}}, "unknown cohort 'nope'"),
    ({"queues": ["team-b"]}, "queues: expected a mapping"),
])
def test_patches_that_do_not(patch: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError) as err:
        apply_patch(BASE, SCHED, patch)
    assert message in str(err.value)


def test_a_patch_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("queues:\n  team-b:\n    quotas: {gpu:a100: {nominal: 16}}\n")
    assert load_patch(path) == {"queues": {"team-b": {"quotas": {"gpu:a100": {"nominal": 16}}}}}
    path.write_text("- a\n")
    with pytest.raises(PatchError, match="must be a mapping"):
        load_patch(path)


def _contended_log() -> Log:
    """team-a's 16-GPU job borrows team-b's quota for 600 s; team-b's job waits for it, then runs 100 s."""
    log = Log().cluster(nodes=2, gpus=8, quota=8)
    log.submit("big", "team-a", 0, pods=2).admit("big", 0).start("big", 1).succeed("big", 601)
    log.submit("eval", "team-b", 10).admit("eval", 601).start("eval", 602).succeed("eval", 702)
    return log


def test_more_gpus_for_team_b_shorten_its_wait(tmp_path: Path) -> None:
    recon = reconstruct(_contended_log().envelopes, as_of=at(800), since=at(0))
    patch = {"queues": {"team-b": {"quotas": {"gpu:a100": {"nominal": 16}}}},
             "clusters": {"east": {"node_groups": {"a100": {"count": 3}}}}}
    result = what_if(recon, SchedulerConfig(preemption=False), patch)
    team_b = result.report["per_queue"]["team-b"]
    assert team_b["actual"]["avg_wait_s"] == pytest.approx(591)
    assert team_b["baseline"]["avg_wait_s"] == pytest.approx(590, abs=5)  # the replay comes close to reality
    assert team_b["whatif"]["avg_wait_s"] == pytest.approx(0, abs=1)  # 8 more GPUs: no wait
    assert team_b["whatif"]["avg_jct_s"] < team_b["baseline"]["avg_jct_s"]
    assert result.report["all"]["whatif"]["capacity_gpus"] == 24
    assert any("nominal: 8 -> 16" in c for c in result.changes)
    text = render_text(result.report, result.changes)
    assert "team-b" in text and "what-if" in text and "baseline replay" in text
    write_plot(result.report, tmp_path / "w.png")
    assert (tmp_path / "w.png").stat().st_size > 0


def test_without_a_patch_only_the_baseline_runs() -> None:
    recon = reconstruct(_contended_log().envelopes, as_of=at(800), since=at(0))
    result = what_if(recon, SCHED, None)
    assert result.whatif is None and list(result.report["all"]) == ["actual", "baseline"]
    assert result.report["all"]["actual"]["capacity_gpus"] == 16


def test_what_if_team_b_could_burst_to_cloud_nodes() -> None:
    """The burst what-if: team-b may have 8-GPU cloud nodes bought (ready after 60 s) within a budget; its wait
    shrinks to about the delay, and the report says what was bought for whom."""
    recon = reconstruct(_contended_log().envelopes, as_of=at(800), since=at(0))
    patch = {"queues": {"team-b": {"quotas": {"gpu:a100": {"nominal": 16}}, "burst_budget": {"gpu_hours": 50}}},
             "clusters": {"cloud": {"burst": True, "node_groups": {"a100": {
                 "count": 0, "gpus_per_node": 8, "gpu_type": "a100",
                 "autoscale": {"max": 2, "provision_delay_s": 60, "price_per_gpu_hour": 3.0}}}}}}
    result = what_if(recon, SchedulerConfig(preemption=False), patch)
    team_b = result.report["per_queue"]["team-b"]
    assert team_b["whatif"]["avg_wait_s"] < team_b["baseline"]["avg_wait_s"] / 2
    bought = result.report["bought"]["whatif"]
    assert bought["nodes"] >= 1 and set(bought["per_queue"]) == {"team-b"}
    assert bought["money"] == pytest.approx(bought["gpu_hours"] * 3.0)
    assert "bought (what-if):" in render_text(result.report, result.changes)
