"""The service child handle: a second start never leaves the first process running."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from services.runtime import supervise
from services.runtime.supervise import Child


async def test_a_start_over_a_live_process_kills_it_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[asyncio.subprocess.Process] = []
    real = asyncio.create_subprocess_exec

    async def sleeper(*_: Any, **options: Any) -> asyncio.subprocess.Process:
        process = await real(sys.executable, "-c", "import time; time.sleep(60)", **options)
        started.append(process)
        return process

    monkeypatch.setattr(supervise.asyncio, "create_subprocess_exec", sleeper)
    child = Child("svc", ["queue-manager"], 1, tmp_path / "svc.log")
    await child.start()
    await child.start()  # as a restart racing a fault injector's restart would
    try:
        first, second = started
        assert await asyncio.wait_for(first.wait(), 10) == -signal.SIGKILL
        assert child.process is second and second.returncode is None
    finally:
        await child.stop(grace_s=5)
    assert second.returncode is not None


def test_each_run_starts_its_logs_afresh_keeping_the_previous_run(tmp_path: Path) -> None:
    """Logs used to accumulate across ``muster up`` runs in one file."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "queue-manager.log").write_text("second run\n")
    (logs / "queue-manager.log.1").write_text("first run\n")
    children = [Child("queue-manager", [], 1, logs / "queue-manager.log"),
                Child("gateway", [], 2, logs / "gateway.log")]
    supervise.keep_previous_logs(children)
    assert not (logs / "queue-manager.log").exists() and not (logs / "gateway.log").exists()
    assert (logs / "queue-manager.log.1").read_text() == "second run\n"
