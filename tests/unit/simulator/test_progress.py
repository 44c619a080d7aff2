"""Progress of long runs: the simulator tells a callback how far it is (and draws nothing itself); the
commands draw rich bars with an ETA on stderr, only on a terminal and unless --no-progress."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from services.simulator import cli as sim_cli
from services.simulator import engine
from services.simulator.engine import simulate
from services.simulator.policies import policy_config
from services.simulator.progress import TerminalProgress, progress_wanted
from services.simulator.sources import resolve
from tests.unit.simulator.builders import EXAMPLES


def test_the_simulator_tells_how_many_jobs_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "PROGRESS_EVERY_S", 0.0)
    workload, config = resolve(str(EXAMPLES / "two-teams.csv"), str(EXAMPLES / "cluster-two-teams.yaml"), EXAMPLES)
    told: list[tuple[int, int, float]] = []
    result = simulate(workload, config, policy_config("muster"), on_progress=lambda *a: told.append(a))
    assert len(told) > 10
    assert all(total == 120 for _, total, _ in told)
    done = [d for d, _, _ in told]
    assert done == sorted(done) and done[-1] == 120 == sum(r.end is not None for r in result.records.values())
    assert told[-1][2] == result.end_time


def test_bars_draw_on_a_terminal_with_an_eta_and_start_anew_per_description() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with TerminalProgress(True, console=console) as bars:
        bars.update("fifo: jobs finished", 3, 10)
        bars.log("a note above the bars")
        bars.update("fifo: jobs finished", 10, 10)
        bars.update("muster: jobs finished", 4, 10)
    text = out.getvalue()
    assert "fifo: jobs finished" in text and "muster: jobs finished" in text
    assert "ETA" in text and "a note above the bars" in text and "10/10" in text


def test_disabled_bars_draw_nothing_and_log_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    with TerminalProgress(False, console=Console(file=out, force_terminal=True)) as bars:
        bars.update("x", 1, 2)
        bars.log("plain")
    assert out.getvalue() == ""
    assert capsys.readouterr().err == "plain\n"


def test_bars_only_on_a_terminal_and_when_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("TERM", "xterm")
    assert progress_wanted(True, Tty()) and not progress_wanted(False, Tty())
    assert not progress_wanted(True, io.StringIO())  # a pipe or a file
    monkeypatch.setenv("TERM", "dumb")
    assert not progress_wanted(True, Tty())


def _sim_args(tmp_path: Path) -> list[str]:
    return ["--workload", str(EXAMPLES / "two-teams.csv"), "--cluster", str(EXAMPLES / "cluster-two-teams.yaml"),
            "--policy", "fifo", "--policy", "muster", "--report", str(tmp_path / "r.json")]


def test_sim_draws_bars_on_stderr_and_keeps_stdout_parseable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_cli, "progress_wanted", lambda flag: flag)  # as if stderr were a terminal
    result = CliRunner().invoke(sim_cli.sim, _sim_args(tmp_path))
    assert result.exit_code == 0, result.output
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["fifo", "muster"]
    assert "fifo: jobs finished" in result.stderr and "muster: jobs finished" in result.stderr
    assert "120/120" in result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["policies"] == ["fifo", "muster"]

    quiet = CliRunner().invoke(sim_cli.sim, [*_sim_args(tmp_path), "--no-progress"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert [line.split(" ")[:4] for line in quiet.stdout.splitlines()] == \
        [line.split(" ")[:4] for line in result.stdout.splitlines()]
