"""The harness's patience with a restarted service: a slow one is counted and waited for, not a reason to
abandon the run; one that exits while starting is started again; past the give-up bound it raises."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.chaos import system as chaos_system
from services.chaos.system import ChaosSystem


class _Process:
    def __init__(self, returncode: int | None) -> None:
        self.returncode = returncode


class _Child:
    """Answers healthy on its ``healthy_on``-th wait; exits (instead of waiting) on the starts in ``exit_on``."""

    def __init__(self, healthy_on: int, exit_on: frozenset[int] = frozenset()) -> None:
        self.healthy_on, self.exit_on = healthy_on, exit_on
        self.starts = self.waits = 0
        self.process: _Process | None = None

    async def start(self) -> None:
        self.starts += 1
        self.process = _Process(1 if self.starts in self.exit_on else None)

    async def wait_healthy(self, timeout_s: float) -> None:
        self.waits += 1
        if self.process is not None and self.process.returncode is not None:
            raise RuntimeError("exited")
        await asyncio.sleep(timeout_s)
        if self.waits < self.healthy_on:
            raise RuntimeError("not healthy yet")


def _system(child: _Child) -> ChaosSystem:
    fields: dict[str, Any] = dict(state_dir=None, config=None, broker=None, settings=None, sim=None,
                                  gateway_url="", admin_token="", children={"gateway": child})
    return ChaosSystem(**fields)


@pytest.fixture(autouse=True)
def _short_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chaos_system, "HEALTHY_WITHIN_S", 0.05)
    monkeypatch.setattr(chaos_system, "GIVE_UP_S", 0.5)


async def test_a_slow_recovery_is_counted_and_waited_for() -> None:
    child = _Child(healthy_on=3)
    system = _system(child)
    await system.bring_up("gateway")
    assert (child.starts, child.waits) == (1, 3)
    assert system.slow_recoveries == {"gateway": 1}  # counted once, however long it took
    assert system.failed_starts == {}


async def test_a_start_that_exits_is_started_again() -> None:
    child = _Child(healthy_on=2, exit_on=frozenset({1}))
    system = _system(child)
    await system.bring_up("gateway")
    assert child.starts == 2
    assert system.failed_starts == {"gateway": 1}


async def test_past_the_give_up_bound_it_raises() -> None:
    child = _Child(healthy_on=10_000)
    system = _system(child)
    with pytest.raises(RuntimeError):
        await system.bring_up("gateway")
    assert system.slow_recoveries == {"gateway": 1}
