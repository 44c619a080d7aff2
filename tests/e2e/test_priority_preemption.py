"""One precious GPU node, a queue of low-priority jobs, and an urgent job that preempts the running one.

Three low-priority jobs that each need the whole node run one at a time in submission order; a
high-priority job submitted while the second runs preempts it; the preempted job goes back to the
queue, runs again as its next attempt once the urgent job is done, and all four succeed.
"""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise

import pytest

from schemas.config import MusterConfig
from schemas.decisions import JobAdmitted, JobPreemptionRequested
from schemas.runs import JobStopped, RunDeleted, RunStarted, RunSucceeded
from tests.e2e.builders import gpu_cluster, job_spec, muster_config
from tests.e2e.system import System

pytestmark = pytest.mark.e2e


@pytest.fixture
def e2e_config() -> MusterConfig:
    return muster_config([gpu_cluster("precious", nodes=1, gpus_per_node=8)], nominal=8)


def first_starts(system: System) -> list[tuple[datetime, str, int]]:
    """(first observed start, job, attempt) of every run, in start order."""
    starts: dict[tuple[str, int], datetime] = {}
    for started in system.log.messages(RunStarted):
        key = (started.job_id, started.attempt)
        starts[key] = min(starts.get(key, started.observed_at), started.observed_at)
    return sorted((at, job, attempt) for (job, attempt), at in starts.items())


async def test_urgent_job_preempts_the_running_one_which_later_completes(system: System) -> None:
    low = [await system.api.submit(job_spec(f"test{i}", gpus=8, duration_s=3.0, priority_class="low"))
           for i in (1, 2, 3)]
    await system.api.wait_job(low[1], lambda j: j["state"] == "running" and j["attempt"] == 0, within=30)
    first = await system.api.job(low[0])
    assert first["state"] == "succeeded", (first, [(e.occurred_at, e.payload) for e in system.log.envelopes
                                                   if getattr(e.payload, "job_id", None) in low])
    assert (await system.api.job(low[2]))["state"] == "pending"

    urgent = await system.api.submit(job_spec("test-p1", gpus=8, duration_s=2.0, priority_class="high"))

    for job_id in [urgent, *low]:
        assert (await system.api.wait_state(job_id, "succeeded", "failed", within=60))["state"] == "succeeded"

    [preempt] = system.log.messages(JobPreemptionRequested, job_id=low[1])
    assert (preempt.attempt, preempt.preemptor, preempt.requeue) == (0, urgent, True)
    [stopped] = system.log.messages(JobStopped, job_id=low[1])
    assert stopped.attempt == 0 and stopped.requeue
    assert "pending" in system.log.states(low[1])[system.log.states(low[1]).index("preempting"):]
    assert sorted(a.attempt for a in system.log.messages(JobAdmitted, job_id=low[1])) == [0, 1]
    assert (await system.api.job(low[1]))["attempt"] == 1
    assert [s.attempt for s in system.log.messages(RunSucceeded, job_id=low[1])] == [1]
    for job_id in (low[0], low[2], urgent):
        assert [a.attempt for a in system.log.messages(JobAdmitted, job_id=job_id)] == [0]

    order = [(job, attempt) for _, job, attempt in first_starts(system)]
    assert order == [(low[0], 0), (low[1], 0), (urgent, 0), (low[1], 1), (low[2], 0)]
    # one job at a time on the precious node: each run starts after the previous one ended
    ends = {(s.job_id, s.attempt): s.observed_at for s in system.log.messages(RunSucceeded)}
    # a preempted run ends when its Job is gone (the node watcher's RunDeleted may come before JobStopped)
    deleted = [d.observed_at for d in system.log.messages(RunDeleted, job_id=low[1]) if d.attempt == 0]
    ends[(low[1], 0)] = min([stopped.observed_at, *deleted])
    starts = first_starts(system)
    for (_, prev_job, prev_attempt), (start, _, _) in pairwise(starts):
        assert start >= ends[(prev_job, prev_attempt)]
