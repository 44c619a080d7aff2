"""``StatusConsumer`` on the real broker of the whole running system: a dashboard that starts mid-run, is killed
(no commit, no goodbye) and restarted with its consumer group sees every job's final state exactly as the
gateway reports it; a fresh reader from the beginning of the compacted topic sees the same."""

from __future__ import annotations

import asyncio

import pytest

from muster.client import AsyncClient, JobForgotten, JobStatus, StatusConsumer, SubmitAccepted
from schemas.status import TERMINAL_STATES, JobStatusChanged
from tests.e2e.builders import job_spec, member_token
from tests.e2e.system import System

pytestmark = pytest.mark.e2e


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
