"""``StatusConsumer`` on the real broker of the whole running system: a dashboard that starts mid-run, is killed
(no commit, no goodbye) and restarted with its consumer group sees every job's final state exactly as the
gateway reports it; a fresh reader from the beginning of the compacted topic sees the same."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from muster.client import AsyncClient, JobForgotten, JobStatus, StatusConsumer, SubmitAccepted
from schemas.status import TERMINAL_STATES, JobStatusChanged
from tests.e2e.builders import job_spec, member_token
from tests.e2e.system import System

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "dashboards"


async def follow(consumer: StatusConsumer, seen: dict[str, JobStatusChanged], stop_when: set[str]) -> None:
    """Fold ``consumer``'s events into ``seen`` (the latest status per job) until every job of ``stop_when`` is
    in a terminal state there."""
    async for event in consumer:
        if isinstance(event, JobStatus):
            earlier = seen.get(event.status.job_id)
            if earlier is None or event.status.updated_at >= earlier.updated_at:
                seen[event.status.job_id] = event.status
        elif isinstance(event, JobForgotten):
            seen.pop(event.job_id, None)
        if stop_when and all(j in seen and seen[j].state in TERMINAL_STATES for j in stop_when):
            return


async def submit(client: AsyncClient, names: list[str], duration_s: float) -> list[str]:
    ids = []
    for name in names:
        accepted = await client.submit(job_spec(name, gpus=4, duration_s=duration_s))
        assert isinstance(accepted, SubmitAccepted)
        ids.append(accepted.job_id)
    return ids


@pytest.mark.parametrize("system", ["kubesim"], indirect=True)
async def test_a_dashboard_killed_and_restarted_sees_every_final_state_as_the_gateway_does(system: System) -> None:
    assert system.gateway_url is not None
    bootstrap = system.settings.bootstrap
    async with AsyncClient(system.gateway_url, member_token("team-a")) as client:
        first = await submit(client, [f"early-{n}" for n in range(3)], duration_s=1.0)
        await client.wait(first[0], "succeeded", timeout=60)  # the run is under way when the dashboard starts
        seen: dict[str, JobStatusChanged] = {}

        dashboard = StatusConsumer(bootstrap=bootstrap, group="dashboard-e2e", commit_interval_s=0.2)
        await dashboard.start()
        second = await submit(client, [f"late-{n}" for n in range(3)], duration_s=3.0)
        reading = asyncio.create_task(follow(dashboard, seen, set(first)))
        await asyncio.wait_for(reading, 60)
        # killed: whatever it read since its last commit is not committed, and it says no goodbye
        await dashboard.stop(commit=False)

        third = await submit(client, [f"after-{n}" for n in range(2)], duration_s=1.0)
        everyone = set(first) | set(second) | set(third)
        async with StatusConsumer(bootstrap=bootstrap, group="dashboard-e2e", commit_interval_s=0.2) as restarted:
            await asyncio.wait_for(follow(restarted, seen, everyone), 90)
            assert restarted.skipped.count == 0

        for job_id in sorted(everyone):
            view = await client.get(job_id)
            got = seen[job_id]
            assert (got.state, got.reason, got.message, got.attempt, got.cluster, got.updated_at) == (
                view.state, view.reason, view.message, view.attempt, view.cluster, view.updated_at), job_id
            assert view.state == "succeeded"

        # a fresh reader without a group rebuilds the same picture from the compacted topic
        fresh: dict[str, JobStatusChanged] = {}
        async with StatusConsumer(bootstrap=bootstrap, start="beginning") as reader:
            await asyncio.wait_for(follow(reader, fresh, everyone), 60)
        assert {j: fresh[j].state for j in everyone} == {j: seen[j].state for j in everyone}

        # from "now", a reader sees only what changes after it started
        async with StatusConsumer(bootstrap=bootstrap, start="now") as live:
            later: dict[str, JobStatusChanged] = {}
            awaited: set[str] = set()  # filled once the job is submitted: follow() then stops at its end
            reading = asyncio.create_task(follow(live, later, awaited))
            await asyncio.sleep(2.0)  # the reader's partitions are assigned and positioned at their ends
            [last] = await submit(client, ["last"], duration_s=1.0)
            awaited.add(last)
            await asyncio.wait_for(reading, 60)
        assert set(later) == {last} and later[last].state == "succeeded"


@pytest.mark.parametrize("system", ["kubesim"], indirect=True)
async def test_the_dashboard_examples_show_what_the_gateway_shows(system: System) -> None:
    """examples/dashboards: the terminal board (``--for``: printed once) counts each queue's jobs by state as
    the gateway lists them, and the notebook snippet returns a row per job."""
    assert system.gateway_url is not None
    async with AsyncClient(system.gateway_url, member_token("team-a")) as a, \
            AsyncClient(system.gateway_url, member_token("team-b")) as b:
        done = await submit(a, ["board-1", "board-2"], duration_s=1.0)
        crashed = await a.submit(job_spec("board-crash", gpus=4, duration_s=1.0, exit_code=2, max_restarts=0))
        other = await b.submit(job_spec("board-b", queue="team-b", gpus=4, duration_s=1.0))
        assert isinstance(crashed, SubmitAccepted) and isinstance(other, SubmitAccepted)
        for client, job_id in [(a, done[0]), (a, done[1]), (b, other.job_id)]:
            await client.wait(job_id, "succeeded", timeout=60)
        await a.wait(crashed.job_id, "failed", timeout=60)

    env = {**os.environ, "COLUMNS": "200"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLES / "live_status.py"), "--bootstrap", system.settings.bootstrap, "--for", "8",
        env=env, cwd=str(EXAMPLES.parents[1]), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    async with asyncio.timeout(120):
        out, _ = await process.communicate()
    text = out.decode()
    assert process.returncode == 0, text
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
            for line in text.splitlines() if line.count("│") > 5 and "queue" not in line}
    # columns: pending admitted running suspended succeeded failed cancelled rejected, GPUs running
    assert rows["team-a"] == ["0", "0", "0", "0", "2", "1", "0", "0", "0"], text
    assert rows["team-b"] == ["0", "0", "0", "0", "1", "0", "0", "0", "0"], text

    from examples.dashboards.notebook_snippet import snapshot  # as a notebook at the repository's root would

    table = await snapshot(system.settings.bootstrap, seconds=5)
    assert sorted((r["name"], r["state"]) for r in table) == [
        ("board-1", "succeeded"), ("board-2", "succeeded"), ("board-b", "succeeded"), ("board-crash", "failed")]
