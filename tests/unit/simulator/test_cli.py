from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from services.simulator.cli import sim
from tests.unit.simulator.builders import EXAMPLES, write_philly_fixture

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_sim_writes_report_and_plot(tmp_path: Path) -> None:
    report, plot = tmp_path / "r.json", tmp_path / "p.png"
    args = ["--workload", str(EXAMPLES / "tiny.csv"), "--cluster", str(EXAMPLES / "cluster-tiny.yaml")]
    args += ["--policy", "fifo", "--report", str(report), "--plot", str(plot), "--seed", "3"]
    out = CliRunner().invoke(sim, args)
    assert out.exit_code == 0, out.output
    data = json.loads(report.read_text())
    assert data["policy"] == "fifo" and data["seed"] == 3
    assert data["avg_jct_s"] == 120.0
    assert plot.read_bytes()[:8] == PNG_MAGIC
    assert "fifo: jobs 4/4 completed" in out.output


def test_sim_compares_several_policies_in_one_report(tmp_path: Path) -> None:
    report, plot = tmp_path / "r.json", tmp_path / "p.png"
    args = ["--workload", str(EXAMPLES / "two-teams.csv"), "--cluster", str(EXAMPLES / "cluster-two-teams.yaml")]
    args += ["--policy", "fifo", "--policy", "muster", "--report", str(report), "--plot", str(plot)]
    out = CliRunner().invoke(sim, args)
    assert out.exit_code == 0, out.output
    data = json.loads(report.read_text())
    assert data["policies"] == ["fifo", "muster"]
    assert set(data["runs"]) == {"fifo", "muster"}
    assert all(r["jobs_completed"] == 120 for r in data["runs"].values())
    assert plot.stat().st_size > 10_000
    from PIL import Image

    with Image.open(plot) as image:  # one allocation panel per policy, the delay CDF and the JCT CDF
        assert image.format == "PNG" and image.size == (1210, 1408)
        image.verify()


def test_sim_replays_a_named_trace_with_limit_and_exports_it(tmp_path: Path) -> None:
    traces = write_philly_fixture(tmp_path / "traces")
    report, exported = tmp_path / "r.json", tmp_path / "w.csv"
    args = ["--workload", "philly", "--traces-dir", str(traces), "--policy", "muster", "--limit", "3"]
    args += ["--report", str(report), "--write-workload", str(exported)]
    out = CliRunner().invoke(sim, args)
    assert out.exit_code == 0, out.output
    assert json.loads(report.read_text())["jobs"] == 3
    assert len(exported.read_text().splitlines()) == 4


def test_sim_reports_usage_errors(tmp_path: Path) -> None:
    out = CliRunner().invoke(sim, ["--workload", str(EXAMPLES / "tiny.csv"), "--report", str(tmp_path / "r.json")])
    assert out.exit_code == 2
    assert "--cluster" in out.output
    args = ["--workload", str(EXAMPLES / "tiny.csv"), "--cluster", str(EXAMPLES / "cluster-tiny.yaml")]
    args += ["--window", "bad", "--report", str(tmp_path / "r.json")]
    out = CliRunner().invoke(sim, args)
    assert out.exit_code == 2 and "START:END" in out.output


def test_module_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "services.simulator", "--help"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "--workload" in done.stdout and "--policy" in done.stdout
