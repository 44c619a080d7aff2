"""``muster sim`` as the CLI has it: the simulator's command plus the replay of a log export."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from schemas.codec import encode
from services.cli.log import parse_since
from services.cli.whatif import sim
from services.simulator.logfile import write_export
from tests.unit.simulator.builders import EXAMPLES
from tests.unit.simulator.log_builders import Log, at

ENV = {"MUSTER_SCHEDULER_PREEMPTION": "false"}


def _export(tmp_path: Path) -> Path:
    log = Log().cluster(nodes=2, gpus=8, quota=8)
    log.submit("big", "team-a", 0, pods=2).admit("big", 0).start("big", 1).succeed("big", 601)
    log.submit("eval", "team-b", 10).admit("eval", 601).start("eval", 602).succeed("eval", 702)
    buffer = io.BytesIO()
    write_export(buffer, [encode(e) for e in log.envelopes], as_of=at(800), since=None)
    path = tmp_path / "log.jsonl"
    path.write_bytes(buffer.getvalue())
    return path


def test_a_workload_still_replays_as_before(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    args = ["--workload", str(EXAMPLES / "tiny.csv"), "--cluster", str(EXAMPLES / "cluster-tiny.yaml"),
            "--policy", "fifo", "--report", str(report)]
    out = CliRunner().invoke(sim, args)
    assert out.exit_code == 0, out.output
    assert json.loads(report.read_text())["avg_jct_s"] == 120.0


def test_an_export_replays_with_a_patch(tmp_path: Path) -> None:
    patch = tmp_path / "p.yaml"
    patch.write_text("queues: {team-b: {quotas: {gpu:a100: {nominal: 16}}}}\n"
                     "clusters: {east: {node_groups: {a100: {count: 3}}}}\n")
    report = tmp_path / "r.json"
    out = CliRunner().invoke(sim, ["--from-file", str(_export(tmp_path)), "--config-patch", str(patch),
                                   "-o", "json", "--report", str(report)], env=ENV)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data == json.loads(report.read_text())
    team_b = data["per_queue"]["team-b"]
    assert team_b["whatif"]["avg_wait_s"] < team_b["baseline"]["avg_wait_s"]
    assert data["patch"] == ["clusters.east.node_groups.a100.count: 2 -> 3",
                             "queues.team-b.quotas.gpu:a100.nominal: 8 -> 16"]


@pytest.mark.parametrize(("args", "message"), [
    (["--config-patch", "{patch}"], "go with --from-kafka or --from-file"),
    (["--report", "r.json"], "Missing option '--workload'"),
    (["--from-file", "{log}", "--from-kafka", "x:1"], "not both"),
    (["--from-file", "{log}", "--since", "7d"], "--since applies to --from-kafka"),
    (["--from-file", "{log}", "--config-patch", "{patch}"], "queues.team-b: unknown key 'wieght'"),
    (["--from-file", "{patch}"], "not a Muster log export"),
])
def test_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    patch = tmp_path / "p.yaml"
    patch.write_text("queues: {team-b: {wieght: 2}}\n")
    names = {"{patch}": str(patch), "{log}": str(_export(tmp_path))}
    out = CliRunner().invoke(sim, [names.get(a, a) for a in args], env=ENV)
    assert out.exit_code == 2
    assert message in out.output


def test_the_replayed_workload_can_be_written(tmp_path: Path) -> None:
    csv = tmp_path / "w.csv"
    out = CliRunner().invoke(sim, ["--from-file", str(_export(tmp_path)), "--write-workload", str(csv)], env=ENV)
    assert out.exit_code == 0, out.output
    assert csv.read_text().splitlines()[1:] == ["big,0,600,16,team-a,a100,100,,,true,false,,cancel,false",
                                               "eval,10,100,8,team-b,a100,100,,,true,false,,cancel,false"]


def test_options_of_a_workload_replay_are_refused(tmp_path: Path) -> None:
    out = CliRunner().invoke(sim, ["--from-file", str(_export(tmp_path)), "--policy", "fifo"], env=ENV)
    assert out.exit_code == 2 and "--policy does not apply to a replay of the log" in out.output


@pytest.mark.parametrize(("text", "expected"), [
    (None, None),
    ("7d", at(0) - timedelta(days=7)),
    ("90m", at(0) - timedelta(minutes=90)),
    ("2026-10-01T00:00:00+00:00", datetime(2026, 10, 1, tzinfo=UTC)),
    ("2026-10-01T00:00:00", datetime(2026, 10, 1, tzinfo=UTC)),
])
def test_since(text: str | None, expected: datetime | None) -> None:
    assert parse_since(text, at(0)) == expected


def test_since_that_is_neither() -> None:
    with pytest.raises(ValueError, match="--since"):
        parse_since("last week", at(0))


def test_a_replay_of_the_log_takes_the_simulators_options_as_a_workload_replay_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One translation of the flags (``services.simulator.cli.sim_options``):
    ``--all-elastic`` used to be dropped by the replay of the log."""
    import services.simulator.whatif as whatif

    seen = []
    real = whatif.what_if

    def spy(*args: object, **kw: object) -> object:
        seen.append(kw["options"])
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(whatif, "what_if", spy)
    out = CliRunner().invoke(sim, ["--from-file", str(_export(tmp_path)), "--all-elastic", "--restart-cost", "30",
                                   "--round", "60", "-o", "json"], env=ENV)
    assert out.exit_code == 0, out.output
    (options,) = seen
    assert (options.all_elastic, options.restart_cost_s, options.round_s, options.tick_s) == (True, 30.0, 60.0, 5.0)
