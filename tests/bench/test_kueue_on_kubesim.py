"""Kueue's scenario through the whole of Muster on Kubernetes (``muster bench kueue --kube real``'s kubesim
half) on the small scenario: the queue manager, the dispatcher and the node watcher with kubesim in a process
of its own, every workload admitted, run for its runtime and reported back on Muster's topics, whether each
workload reaches Kubernetes as a Job of its pods or as its pods alone (``--objects pods``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.peers.kueue import SMOKE
from bench.peers.kueue_kube import OBJECTS, run_on
from bench.peers.kueue_scenario import load

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.mark.parametrize("objects", OBJECTS)
def test_every_workload_of_the_smoke_scenario_is_admitted_run_and_reported_back(tmp_path: Path, objects: str) -> None:
    scenario = load(SMOKE)
    done = asyncio.run(run_on(scenario, "sim", bootstrap=None, root=tmp_path, objects=objects))
    assert not [n for n in done.notes if "NOT all finished" in n or "rejected" in n], done.notes
    figures = done.figures
    assert {n: (c.count, c.admitted) for n, c in figures.classes.items()} == {
        "small": (160, 160), "medium": (40, 40), "large": (16, 16)}
    assert all(c.avg_finish_s >= c.avg_admission_s >= 0 for c in figures.classes.values())
    assert 0 < figures.usage["cq"] <= 100
    assert set(figures.cpu_s) >= {"queue manager", "kubesim"}
    # where a workload's time between its admission and its finish went, read from the same topics
    [hops] = [n for n in done.notes if "from admission to finish" in n]
    assert "average over" in hops and "quota held beyond runtimeMs" in hops, hops
    print(hops)
