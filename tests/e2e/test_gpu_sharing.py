"""GPU sharing end to end on kubesim: a MIG job and two half-GPU jobs run side by side on one node; the
two halves share one GPU, the MIG job takes a slice of the node's MIG GPU, and a third half waits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schemas.config import ClusterConfig, MusterConfig, NodeGroupConfig, TopologyConfig
from schemas.decisions import JobAdmitted
from tests.e2e.builders import job_spec, muster_config
from tests.e2e.system import System

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def e2e_config() -> MusterConfig:
    """One node of two A100s: one cut into seven 1g.10gb MIG slices, one shared by fractional pods."""
    cluster = ClusterConfig(name="east", node_groups=[NodeGroupConfig(
        name="a100-share", count=1, gpus_per_node=2, gpu_type="a100", cpu=32, memory_gb=256,
        shared_gpus=1, mig_gpus=1, mig_layout={"1g.10gb": 7},
        topology=TopologyConfig(zone="east-z", block="b0"), taints=["nvidia.com/gpu"])])
    return muster_config([cluster], nominal=2)


def _resources(**gpu: object) -> dict[str, Any]:
    return {"template": {"image": "registry.example/e2e:1", "command": ["sleep"],
                         "resources": {"gpu_type": "a100", "cpu": "1", "memory": "1Gi", **gpu}}}


async def test_a_mig_job_and_two_half_gpu_jobs_share_one_node(system: System) -> None:
    cluster = system.first_cluster()
    mig = await system.api.submit(job_spec("mig", duration_s=30, **_resources(mig_profile="1g.10gb", mig_slices=1)))
    halves = [await system.api.submit(job_spec(f"half-{i}", duration_s=30, **_resources(gpu_fraction=0.5)))
              for i in range(2)]
    for job_id in (mig, *halves):
        await system.api.wait_state(job_id, "running", within=60)

    [mig_pod] = await cluster.pods(mig)
    assert mig_pod["spec"]["nodeName"] == "east-a100-share-0"
    assert mig_pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    slots = []
    for job_id in halves:
        [admitted] = system.log.messages(JobAdmitted, job_id=job_id)
        [pods] = admitted.placement.nodes
        assert pods.gpu_fraction == 0.5
        slots.extend(pods.gpu_slots)
        [pod] = await cluster.pods(job_id)
        assert pod["spec"]["nodeName"] == "east-a100-share-0"
        annotations = pod["metadata"]["annotations"]
        assert annotations["gpu-fraction"] == "0.5"
        assert json.loads(annotations["muster.dev/gpu-slots"]) == [0]
        assert "limits" not in pod["spec"]["containers"][0]["resources"]
    assert slots == [0, 0]  # both halves on the one shared GPU

    third = await system.api.submit(job_spec("half-2", duration_s=1, **_resources(gpu_fraction=0.5)))
    waiting = await system.api.wait_job(third, lambda j: j.get("state") == "pending" and bool(j.get("reason")),
                                        within=30)
    assert waiting["state"] == "pending"  # the shared GPU is full: nothing more fits on it
    for job_id in (mig, *halves):
        await system.api.wait_state(job_id, "succeeded", within=90)
    await system.api.wait_state(third, "running", "succeeded", within=60)
