"""A gang that requires one rack lands whole in one rack, on the nodes planned for it, even when the
other rack has more free GPUs in total; a second such gang takes the other rack."""

from __future__ import annotations

import pytest

from schemas.config import ClusterConfig, MusterConfig, NodeGroupConfig, TopologyConfig
from schemas.decisions import JobAdmitted
from services.runtime.kube import NODES
from tests.e2e.builders import job_spec, muster_config
from tests.e2e.system import System

pytestmark = pytest.mark.e2e
RACK = "topology.muster.dev/rack"


@pytest.fixture
def e2e_config() -> MusterConfig:
    """Two racks of two 8-GPU nodes each."""
    cluster = ClusterConfig(name="east", node_groups=[NodeGroupConfig(
        name="a100", count=4, gpus_per_node=8, gpu_type="a100", cpu=64, memory_gb=512,
        topology=TopologyConfig(zone="east-z", block="b0", racks=2), taints=["nvidia.com/gpu"])])
    return muster_config([cluster], nominal=32)


async def test_rack_gangs_stay_in_one_rack_each(system: System) -> None:
    cluster = system.first_cluster()
    nodes, _ = await cluster.rest.list(NODES)
    rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][RACK] for n in nodes}
    assert len(set(rack_of.values())) == 2
    spec = {"topology": {"level": "rack", "mode": "required"}}
    first = await system.api.submit(job_spec("rack-1", gpus=4, replicas=4, duration_s=60, **spec))
    second = await system.api.submit(job_spec("rack-2", gpus=4, replicas=4, duration_s=60, **spec))
    racks = []
    for job_id in (first, second):
        await system.api.wait_state(job_id, "running", within=60)
        [admitted] = system.log.messages(JobAdmitted, job_id=job_id)
        planned = {n.node for n in admitted.placement.nodes}
        pods = await cluster.pods(job_id)
        assert len(pods) == 4 and {p["spec"]["nodeName"] for p in pods} <= planned
        assert len({rack_of[p["spec"]["nodeName"]] for p in pods}) == 1, [p["spec"]["nodeName"] for p in pods]
        racks.append(rack_of[pods[0]["spec"]["nodeName"]])
    assert racks[0] != racks[1]
