"""``muster bench ... --plot FILE`` and the progress bars, with a stand-in benchmark (no broker): the command
hands the run a progress callback, collects its scenarios and writes a valid PNG of plausible size."""

from __future__ import annotations

import math
import random
import struct
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image

from bench.system.measure import Timeline
from bench.system.observe import OBSERVER, Series
from bench.system.plots import write_plot
from services.cli import bench as bench_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def scenario(name: str, count: int, rate: float | None, seed: int) -> Series:
    rng = random.Random(seed)
    timeline = Timeline()
    for i in range(count):
        job = f"{name}-{i}"
        timeline.submitted[job] = 1000.0 + (i / rate if rate else i * 1e-4)
        if i % 50 != 49:  # a few are never admitted
            timeline.decided[job] = timeline.submitted[job] + 0.05 + rng.expovariate(20) + i * 1e-5
    return Series.of(name, timeline, list(timeline.submitted), rate)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_series_are_seconds_from_the_first_submission() -> None:
    s = scenario("100/s", 100, 100.0, 1)
    assert s.submitted[0] == 0.0 and math.isclose(s.submitted[-1], 0.99)
    assert math.isnan(s.decided[49]) and len(s.latencies()) == 98
    assert all(lat > 0 for lat in s.latencies())


def test_the_plot_is_a_valid_png_of_plausible_size(tmp_path: Path) -> None:
    path = tmp_path / "throughput.png"
    write_plot([scenario("100/s", 200, 100.0, 1), scenario("2000/s", 1000, 2000.0, 2),
                scenario("burst", 1000, None, 3)], path, "muster bench throughput")
    assert png_size(path) == (1100, 1100)
    assert 20_000 < path.stat().st_size < 2_000_000
    with Image.open(path) as image:
        image.verify()  # decodes the whole file: a truncated or corrupt PNG raises


def fake_benchmark(told: list[tuple[str, float, float | None]]) -> types.ModuleType:
    module = types.ModuleType("fake_throughput")

    async def main(**options: Any) -> str:
        for done in range(0, 101, 25):
            OBSERVER.progress("100/s: decided", done, 100)
        OBSERVER.series.append(scenario("100/s", 100, 100.0, 1))
        OBSERVER.series.append(scenario("burst", 300, None, 2))
        return "| scenario |\n|---|\n| 100/s |"

    module.main = main  # type: ignore[attr-defined]
    return module


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float, float | None]]:
    told: list[tuple[str, float, float | None]] = []
    real_load = bench_cli._load
    monkeypatch.setattr(bench_cli, "_load", lambda module: fake_benchmark(told) if module == bench_cli.BENCHMARKS[
        "throughput"] else real_load(module))
    monkeypatch.setattr(bench_cli, "progress_wanted", lambda flag: flag)  # as if stderr were a terminal
    monkeypatch.setattr("services.runtime.collector.configure_collector", lambda: None)
    return told


def test_bench_plot_writes_the_png_and_draws_progress_on_stderr(stand_in: object, tmp_path: Path) -> None:
    path = tmp_path / "out.png"
    result = CliRunner().invoke(bench_cli.bench, ["throughput", "--quick", "--plot", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("| scenario |") and f"plot: {path}" in result.stdout
    assert "100/s: decided" in result.stderr and "ETA" in result.stderr and "100/100" in result.stderr
    width, height = png_size(path)
    assert width > 500 and height > 500 and path.stat().st_size > 20_000

    quiet = CliRunner().invoke(bench_cli.bench, ["throughput", "--quick", "--no-progress"])
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr


def test_plot_is_refused_where_there_is_nothing_to_draw(tmp_path: Path) -> None:
    result = CliRunner().invoke(bench_cli.bench, ["gang", "--quick", "--plot", str(tmp_path / "x.png")])
    assert result.exit_code == 2 and "--plot applies to throughput, shards, largescale" in result.output
    assert not (tmp_path / "x.png").exists()
