"""``muster bench <name> --quick`` runs each benchmark end to end on a private broker and prints its table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from services.cli.bench import bench

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(120)]


def run_quick(name: str, *extra: str) -> str:
    result = CliRunner().invoke(bench, [name, "--quick", *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def rows(output: str) -> list[list[str]]:
    """The data rows of the printed table(s), split into cells."""
    lines = [ln for ln in output.splitlines() if ln.startswith("| ") and not ln.startswith("|--")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:]]


def test_throughput_admits_every_submission_of_every_scenario(tmp_path: Path) -> None:
    plot = tmp_path / "throughput.png"
    table = rows(run_quick("throughput", "--plot", str(plot)))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 20_000
    assert [r[0] for r in table] == ["100/s", "500/s", "2000/s", "burst"]
    for scenario, jobs, admitted, per_s, *_ in table:
        assert admitted == jobs, scenario
        assert re.fullmatch(r"[\d,]+/s", per_s)


def test_largescale_completes_every_workload_of_the_three_sizes() -> None:
    output = run_quick("largescale")
    table = rows(output)
    assert [r[0] for r in table] == ["small", "medium", "large"]
    assert all(r[3] == r[4] for r in table)  # workloads == completed
    assert "wall time until all complete" in output


def test_kueue_translates_kueues_scenario_format_and_admits_every_workload() -> None:
    output = run_quick("kueue")
    table = {r[0]: r for r in rows(output)}
    for name, count in (("small", 160), ("medium", 40), ("large", 16)):
        row = table[f"avg time to admission, {name} ({count:,} of {count:,})"]
        assert row[1] == "-" and row[2].endswith(" s")  # Kueue is not run with --quick
    assert re.fullmatch(r"\d+\.\d%", table["usage of nominal quota, cq"][2])
    assert "NOT all finished" not in output and "rejected" not in output


def test_gang_places_each_gang_inside_one_rack() -> None:
    table = rows(run_quick("gang"))
    assert len(table) == 3
    for _, decided, _, placement in table:
        assert decided.endswith(" ms")
        assert re.fullmatch(r"512 pods on \d+ nodes in rack\(s\) r\d+", placement)


def test_reclaim_preempts_one_victim_per_urgent_job() -> None:
    table = rows(run_quick("reclaim"))
    assert len(table) == 5
    assert all(r[3] == "1" and r[2].endswith(" ms") for r in table)


def test_shards_admits_every_submission_with_one_two_and_four_shards() -> None:
    table = rows(run_quick("shards"))
    assert [(r[0], r[1]) for r in table] == [(n, s) for n in ("1", "2", "4") for s in ("2000/s", "burst")]
    for shards, scenario, jobs, admitted, *_ in table:
        assert admitted == jobs, (shards, scenario)
