"""``muster chaos``'s progress bars (with a stand-in run: no broker, no services): on stderr on a terminal, off
with --no-progress; the findings on stdout stay one JSON document."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from services.chaos import harness
from services.chaos.plan import ChaosPlan
from services.chaos.report import ChaosReport, Violation
from services.cli import chaos as chaos_cli


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run_chaos(plan: ChaosPlan, state_dir: Path, notify: Callable[[str], None],
                        progress: Callable[[str, float, float | None], None]) -> ChaosReport:
        notify("services up")
        for done in range(1, 31):
            progress("jobs submitted", done, 30)
        progress("jobs ended", 30, 30)
        return ChaosReport(seed=plan.seed, jobs_planned=30, brokers=plan.brokers)

    monkeypatch.setattr(harness, "run_chaos", run_chaos)


def test_bars_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chaos_cli, "progress_wanted", lambda flag: flag)
    result = CliRunner().invoke(chaos_cli.chaos, ["--quick"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["seed"] == 1
    assert "jobs submitted" in result.stderr and "30/30" in result.stderr and "ETA" in result.stderr
    assert "services up" in result.stderr and "all invariants held" in result.stderr


def test_no_bars_when_not_a_terminal_or_not_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    for args in (["--quick"], ["--quick", "--no-progress"]):
        result = CliRunner().invoke(chaos_cli.chaos, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["seed"] == 1
        assert "jobs submitted" not in result.stderr and "services up" in result.stderr


def test_a_coverage_finding_is_in_the_json_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that did not do what it planned fails like one that broke an invariant."""
    async def run_chaos(plan: ChaosPlan, state_dir: Path, notify: Callable[[str], None],
                        progress: Callable[[str, float, float | None], None]) -> ChaosReport:
        report = ChaosReport(seed=plan.seed, jobs_planned=30, brokers=plan.brokers)
        report.add("coverage_faults", [Violation("faults_not_performed", None,
                                                 "gateway: 2 kills planned, 0 processes killed with SIGKILL")])
        return report

    monkeypatch.setattr(harness, "run_chaos", run_chaos)
    result = CliRunner().invoke(chaos_cli.chaos, ["--quick", "--no-progress"])
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert body["ok"] is False and body["checks"] == {"coverage_faults": 1}
    assert body["violations"] == [{"check": "faults_not_performed", "job_id": None,
                                   "detail": "gateway: 2 kills planned, 0 processes killed with SIGKILL"}]
