"""The queue manager stopped and replaced in the middle of a run: nothing lost, nothing admitted twice."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from schemas.decisions import JobAdmitted
from tests.e2e.builders import job_spec
from tests.e2e.system import System

pytestmark = pytest.mark.e2e


async def test_queue_manager_restart_loses_nothing(system: System) -> None:
    # Long enough that both first jobs are still running when their state is read, on a busy machine too
    # (at 3 s one was seen to start and finish between two reads of the other).
    run_s = 8.0
    before = [await system.api.submit(job_spec(f"before-{i}", gpus=8, duration_s=run_s)) for i in range(4)]
    await asyncio.gather(*(system.api.wait_state(job_id, "running", within=30) for job_id in before[:2]))
    assert (await system.api.job(before[3]))["state"] == "pending"

    await system.stop("queue-manager")
    during = [await system.api.submit(job_spec(f"during-{i}", gpus=4, duration_s=1.0)) for i in range(2)]
    await asyncio.sleep(run_s + 0.5)  # the running jobs end while nobody schedules
    await system.start_queue_manager()

    for job_id in before + during:
        assert (await system.api.wait_state(job_id, "succeeded", "failed", within=90))["state"] == "succeeded"
    admissions = Counter((a.job_id, a.attempt) for a in system.log.messages(JobAdmitted))
    assert set(admissions) == {(job_id, 0) for job_id in before + during}
    assert all(count == 1 for count in admissions.values()), admissions
