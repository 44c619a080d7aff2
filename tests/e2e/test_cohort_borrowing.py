"""Borrowing inside a cohort, and the lender reclaiming its quota by preemption of the borrower."""

from __future__ import annotations

import pytest

from schemas.config import MusterConfig
from schemas.decisions import JobAdmitted, JobPreemptionRequested
from schemas.runs import JobStopped
from tests.e2e.builders import gpu_cluster, job_spec, muster_config
from tests.e2e.system import System

pytestmark = pytest.mark.e2e


@pytest.fixture
def e2e_config() -> MusterConfig:
    """16 GPUs; team-a and team-b each own 8 and may borrow 8 of the other's."""
    return muster_config([gpu_cluster("east", nodes=2, gpus_per_node=8)], nominal=8, borrowing_limit=8)


async def test_lender_reclaims_quota_from_the_borrower(system: System) -> None:
    own = await system.api.submit(job_spec("a-own", gpus=8, duration_s=120.0))
    await system.api.wait_state(own, "running", within=30)
    borrower = await system.api.submit(job_spec("a-borrow", gpus=8, duration_s=120.0))
    await system.api.wait_state(borrower, "running", within=30)
    [lent] = system.log.messages(JobAdmitted, job_id=borrower)
    assert lent.borrowed
    assert not system.log.messages(JobAdmitted, job_id=own)[0].borrowed

    lender = await system.api.submit(job_spec("b-own", queue="team-b", gpus=8, duration_s=120.0), tenant="team-b")

    await system.api.wait_state(lender, "running", within=30)
    [reclaim] = system.log.messages(JobPreemptionRequested, job_id=borrower)
    assert reclaim.attempt == 0 and reclaim.requeue and reclaim.preemptor == lender
    # the stop is reported once the borrower's pods are gone (the lender may start on the node watcher's
    # RunDeleted a moment before the dispatcher's JobStopped arrives)
    await system.log.wait_until(lambda: bool(system.log.messages(JobStopped, job_id=borrower, attempt=0)),
                                within=30, what="the borrower's JobStopped")
    [admitted] = system.log.messages(JobAdmitted, job_id=lender)
    assert not admitted.borrowed
    # the borrower is back in its queue as its next attempt; team-a's own job was never touched
    back = await system.api.wait_job(borrower, lambda j: j["state"] == "pending" and j["attempt"] == 1, within=20)
    assert back["reason"]
    assert (await system.api.job(own))["state"] == "running"
    assert not system.log.messages(JobPreemptionRequested, job_id=own)
    assert [p["status"]["phase"] for p in await system.first_cluster().pods(lender)] == ["Running"]
