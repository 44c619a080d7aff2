"""Two simulated clusters, each with its own dispatcher and node watcher: gangs never span clusters."""

from __future__ import annotations

import pytest

from schemas.config import MusterConfig
from schemas.decisions import JobAdmitted
from schemas.runs import JobDispatched
from tests.e2e.builders import gpu_cluster, job_spec, muster_config
from tests.e2e.system import System

pytestmark = pytest.mark.e2e


@pytest.fixture
def e2e_config() -> MusterConfig:
    """east and west, two 8-GPU nodes each; the queues hold all 32 GPUs."""
    return muster_config([gpu_cluster("east", nodes=2, gpus_per_node=8), gpu_cluster("west", nodes=2, gpus_per_node=8)],
                         nominal=32)


async def test_gangs_land_on_both_clusters_and_never_span_them(system: System) -> None:
    gangs = [await system.api.submit(job_spec(f"gang-{i}", gpus=8, replicas=2, duration_s=3.0)) for i in range(2)]
    for job_id in gangs:
        assert (await system.api.wait_state(job_id, "succeeded", "failed", within=60))["state"] == "succeeded"

    placed = {}
    for job_id in gangs:
        [admitted] = system.log.messages(JobAdmitted, job_id=job_id)
        cluster = admitted.placement.cluster
        assert {n.node.split("-")[0] for n in admitted.placement.nodes} == {cluster}
        [dispatched] = system.log.messages(JobDispatched, job_id=job_id)
        assert dispatched.cluster == cluster
        pods = await system.clusters[cluster].pods(job_id)
        assert len(pods) == 2 and {p["spec"]["nodeName"].split("-")[0] for p in pods} == {cluster}
        other = next(name for name in system.clusters if name != cluster)
        assert await system.clusters[other].jobs(job_id) == []
        placed[job_id] = cluster
    assert set(placed.values()) == {"east", "west"}

    # 24 GPUs in one gang: 32 are free in all, but no single cluster has 24: refused at the door, and
    # never admitted when it asks to wait for capacity still to come
    refused = await system.api.http.post("/v1/jobs", json=job_spec("too-big", gpus=8, replicas=3),
                                         headers=system.api._auth("team-a"))
    assert (refused.status_code, refused.json()["error"]) == (422, "no_matching_nodes"), refused.text
    too_big = await system.api.submit(job_spec("too-big", gpus=8, replicas=3, duration_s=1.0,
                                               allow_future_capacity=True))
    pending = await system.api.wait_job(too_big, lambda j: j["state"] == "pending" and j["reason"] != "", within=20)
    assert not system.log.messages(JobAdmitted, job_id=too_big), pending
    # no wait of a chosen length: the scheduling cycles that then admit and run a small job, submitted after
    # it to the same queue, all had too-big waiting in that queue, and none admitted it
    small = await system.api.submit(job_spec("small", gpus=1, duration_s=1.0))
    assert (await system.api.wait_state(small, "succeeded", within=30))["state"] == "succeeded"
    await system.log.wait_for(JobAdmitted, job_id=small, within=30)  # the log has read that far
    assert not system.log.messages(JobAdmitted, job_id=too_big)
    assert (await system.api.job(too_big))["state"] == "pending"
