"""A preempted gang's stop: the checkpoint handshake and the pods' own grace period share one budget,
and the stop is reported only once the pods are gone, so the GPUs Muster counts free are free."""

from __future__ import annotations

import pytest

from schemas.config import MusterConfig
from schemas.decisions import JobPreemptionRequested
from schemas.runs import JobStopped
from tests.e2e.builders import gpu_cluster, job_spec, muster_config
from tests.e2e.system import System

pytestmark = pytest.mark.e2e

GRACE_S = 3
#: the dispatcher's stop floor (DispatchSettings.stop_floor_s) plus room for a loaded machine
SLACK_S = 10.0


@pytest.fixture
def e2e_config() -> MusterConfig:
    return muster_config([gpu_cluster("east", nodes=1, gpus_per_node=8)], nominal=8)


async def test_a_preempted_gang_is_reported_stopped_only_once_its_pods_are_gone(system: System) -> None:
    victim = await system.api.submit(job_spec("victim", gpus=4, replicas=2, duration_s=600, priority_class="low",
                                              checkpoint={"enabled": True, "grace_period_s": GRACE_S}))
    await system.api.wait_state(victim, "running", within=60)
    urgent = await system.api.submit(job_spec("urgent", gpus=8, duration_s=2, priority_class="high"))

    await system.log.wait_for(JobStopped, within=60)
    cluster = system.first_cluster()
    assert await cluster.pods(victim) == [], "the stop was reported while the victim's pods still held the GPUs"
    [requested] = [e for e in system.log.envelopes
                   if isinstance(e.payload, JobPreemptionRequested) and e.payload.job_id == victim]
    [stopped] = system.log.messages(JobStopped, job_id=victim)
    assert not stopped.checkpointed  # nothing acknowledged: the whole grace was given, once
    assert (stopped.observed_at - requested.occurred_at).total_seconds() <= GRACE_S + SLACK_S
    assert (await system.api.wait_state(urgent, "succeeded", within=60))["state"] == "succeeded"
    assert (await system.api.job(victim))["state"] in ("pending", "admitted", "running")
