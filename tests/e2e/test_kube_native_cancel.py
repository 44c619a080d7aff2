"""``muster cancel`` of a kube-native Job through the whole system: its owner's object is left in place.

The Job is created the Kubernetes way (labelled, suspended), queued, admitted and run; cancelled over the
API, it is stopped as a preemption stops it but not deleted: it stays, suspended, marked
``muster.dev/cancelled``, with no pod left, and its owner is told ``Cancelled`` once. Changed afterwards by its
owner, it is not queued again: its job has ended.
"""

from __future__ import annotations

import asyncio

import pytest

from schemas.runs import JobStopped
from schemas.status import JobStatusChanged
from services.runtime.kube import EVENTS, JOBS, KubeObject
from tests.e2e.builders import suspended_kube_job
from tests.e2e.system import System

pytestmark = pytest.mark.e2e

NAMESPACE = "team-a"
CANCELLED = "muster.dev/cancelled"


async def test_a_cancelled_kube_native_job_is_left_suspended_and_not_queued_again(system: System) -> None:
    cluster = system.first_cluster()
    created = await cluster.rest.create(JOBS, suspended_kube_job("sweep-cancel", gang=2, gpus=4, duration_s=600),
                                        NAMESPACE)
    uid = created["metadata"]["uid"]
    await system.log.wait_until(lambda: bool(system.log.messages(JobStatusChanged, name="sweep-cancel")),
                                what="the Job queued")
    job_id = system.log.messages(JobStatusChanged, name="sweep-cancel")[0].job_id
    await system.api.wait_state(job_id, "running", within=60)

    await system.api.cancel(job_id)
    await system.api.wait_state(job_id, "cancelled", within=60)
    [stopped] = system.log.messages(JobStopped, job_id=job_id)
    assert (stopped.reason, stopped.requeue) == ("cancelled", False)

    async def marked() -> KubeObject:
        async with asyncio.timeout(30):
            while True:
                job: KubeObject = await cluster.rest.get(JOBS, "sweep-cancel", NAMESPACE)
                if CANCELLED in (job["metadata"].get("annotations") or {}):
                    return job
                await asyncio.sleep(0.2)

    job = await marked()
    assert job["metadata"]["uid"] == uid and not job["metadata"].get("deletionTimestamp")
    assert job["spec"]["suspend"] is True
    assert await cluster.pods(job_id, NAMESPACE) == []  # its GPUs are free

    # its owner changes it afterwards: the same object, whose job ended, is not queued again
    await cluster.rest.patch(JOBS, "sweep-cancel", {"metadata": {"annotations": {
        "muster.dev/runtime-estimate": "2h"}}}, NAMESPACE)
    await asyncio.sleep(3)
    assert {s.job_id for s in system.log.messages(JobStatusChanged, name="sweep-cancel")} == {job_id}
    assert (await system.api.job(job_id))["state"] == "cancelled"
    assert (await cluster.rest.get(JOBS, "sweep-cancel", NAMESPACE))["spec"]["suspend"] is True
    events, _ = await cluster.rest.list(EVENTS, NAMESPACE)
    told = [e["reason"] for e in events if e["involvedObject"].get("uid") == uid
            and e.get("reportingComponent") == "muster-gateway"]
    assert told.count("Cancelled") == 1
