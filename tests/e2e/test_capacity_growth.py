"""Capacity that grows, end to end on kubesim and on a real control plane: every service, cluster-autoscaler's
ProvisioningRequest API, and the fake cloud of ``services.kubereal.fake_cloud`` playing cluster-autoscaler (with
KWOK nodes on the real control plane).

A 32-GPU gang that the cluster's one 8-GPU node cannot hold has nodes requested for it, waits the cloud's delay,
runs on the new nodes, and the nodes are given back once idle, the quota accountant charging the queue's burst
budget for their real time; a queue whose burst budget cannot pay waits
instead; a request the cloud cannot serve falls back to waiting, with the reason in the job's status.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from schemas.config import (
    AutoscaleConfig,
    BurstBudgetConfig,
    ClusterConfig,
    MusterConfig,
    NodeGroupConfig,
    TopologyConfig,
)
from schemas.decisions import JobAdmitted, NodeReleaseRequested, NodesRequested
from schemas.runs import NodesProvisioned, ProvisioningFailed
from schemas.topics import USAGE_TOPIC
from schemas.usage import BurstSpendReported
from services.kubereal.fake_cloud import FakeCloud
from services.runtime.kafka import KafkaSettings
from services.runtime.kube.resources import PROVISIONING_REQUESTS
from tests.builders.realkube import RealKube
from tests.e2e.builders import gpu_cluster, job_spec, muster_config
from tests.e2e.log import TopicLog
from tests.e2e.system import System, running_system

pytestmark = pytest.mark.e2e

DELAY_S = 10.0
IDLE_S = 15.0


def _config() -> MusterConfig:
    """One 8-GPU node, and a group of 8-GPU nodes the cloud sells (up to 4, ready 10 s after the request);
    team-a may spend 50 GPU-hours a month on it, team-b a tenth of one."""
    east = gpu_cluster("east", nodes=1, gpus_per_node=8)
    burst = NodeGroupConfig(
        name="burst", count=0, gpus_per_node=8, gpu_type="a100", cpu=64, memory_gb=512,
        topology=TopologyConfig(zone="east-z", block="b1", racks=1), taints=["nvidia.com/gpu"],
        autoscale=AutoscaleConfig(max=4, provision_delay_s=DELAY_S, price_per_gpu_hour=2.5, idle_s=IDLE_S))
    east = east.model_copy(update={"node_groups": [*east.node_groups, burst]})
    cfg = muster_config([east], nominal=8)
    budgets = {"team-a": BurstBudgetConfig(gpu_hours=50, window="month"),
               "team-b": BurstBudgetConfig(gpu_hours=0.1, window="month")}
    return cfg.model_copy(update={"queues": [q.model_copy(update={"burst_budget": budgets[q.name]})
                                             for q in cfg.queues]})


def _burst_config() -> MusterConfig:
    """The on-premises cluster (one 8-GPU node) and a cloud cluster to pour over into, empty until nodes are bought
    (up to 4); team-a may spend 50 GPU-hours a month there."""
    cloud = ClusterConfig(name="cloud", burst=True, node_groups=[NodeGroupConfig(
        name="a100", count=0, gpus_per_node=8, gpu_type="a100", cpu=64, memory_gb=512,
        topology=TopologyConfig(zone="cloud-z", block="b0", racks=1), taints=["nvidia.com/gpu"],
        autoscale=AutoscaleConfig(max=4, provision_delay_s=DELAY_S, price_per_gpu_hour=4.0, idle_s=IDLE_S))])
    cfg = muster_config([gpu_cluster("east", nodes=1, gpus_per_node=8), cloud], nominal=8)
    return cfg.model_copy(update={"queues": [q.model_copy(update={
        "burst_budget": BurstBudgetConfig(gpu_hours=50, window="month") if q.name == "team-a" else None})
        for q in cfg.queues]})


@contextlib.asynccontextmanager
async def _growing(settings: KafkaSettings, real_kube: RealKube | None, tmp_path: Path,
                   stock: dict[str, int] | None = None, config: MusterConfig | None = None,
                   ) -> AsyncIterator[tuple[System, FakeCloud]]:
    """The system, and the fake cloud of the config's (last) cluster with a growable group."""
    config = config or _config()
    grows = [c for c in config.clusters if c.grows][-1]
    async with running_system(settings, config, tmp_path, real=real_kube) as system:
        cluster = system.clusters[grows.name]
        try:
            await cluster.rest.list(PROVISIONING_REQUESTS, page_size=1)
        except Exception as exc:
            pytest.fail(f"the control plane does not serve ProvisioningRequests: {exc}")
        cloud = FakeCloud(cluster.rest, grows, stock=stock, poll_s=0.5, kwok=real_kube is not None)
        stop = asyncio.Event()
        task = asyncio.create_task(cloud.run(stop), name="fake-cloud")
        try:
            yield system, cloud
        finally:
            stop.set()
            await task
        assert system.log.dead_letters == [], "messages went to a dead-letter topic"


async def _charged_like_usage(settings: KafkaSettings, queue: str, *, nodes: int, price: float, since: float) -> None:
    """The quota accountant charged the queue's burst budget for the bought nodes' real time, ready to release:
    more than nothing, less than every node held since the request, at the group's price."""
    usage = TopicLog(settings, (USAGE_TOPIC,))
    await usage.start()
    try:
        def given_back() -> bool:
            return any(r.nodes_held == 0 and r.gpu_hours > 0 for r in usage.messages(BurstSpendReported, queue=queue))
        await usage.wait_until(given_back, within=30, what="the accountant's report of the bought nodes")
    finally:
        await usage.stop()
    report = [r for r in usage.messages(BurstSpendReported, queue=queue) if r.nodes_held == 0][-1]
    held_at_most = nodes * 8 * (time.time() - since) / 3600
    assert 0 < report.gpu_hours < held_at_most, report
    assert report.money == pytest.approx(report.gpu_hours * price) and report.window == "month"


@pytest.mark.realkube
async def test_a_gang_too_big_for_the_cluster_runs_on_bought_nodes_given_back_once_idle(
        e2e_settings: KafkaSettings, real_kube: RealKube, tmp_path: Path) -> None:
    """On the real control plane (kubesim takes the same path in ``test_a_gang_pours_over_into_a_burst_cluster``)."""
    async with _growing(e2e_settings, real_kube, tmp_path) as (system, cloud):
        api = system.api
        asked_at = time.time()
        big = await api.submit(job_spec("big", gpus=8, replicas=4, duration_s=5.0))
        await system.log.wait_until(lambda: bool(system.log.messages(NodesRequested, job_id=big)), within=30,
                                    what="the request for nodes")
        [asked] = system.log.messages(NodesRequested, job_id=big)
        assert (asked.cluster, asked.group, asked.nodes, asked.gpus_per_node) == ("east", "burst", 4, 8)
        waiting = await api.wait_job(big, lambda j: j["reason"] == "waiting_for_provisioning", within=20)
        assert "provisioning 4 x a100 nodes" in waiting["message"], waiting

        # the other queue's budget cannot pay for four nodes: it waits for existing capacity
        small_budget = await api.submit(job_spec("b-big", queue="team-b", gpus=8, replicas=4, duration_s=5.0),
                                        tenant="team-b")

        running = await api.wait_state(big, "running", within=DELAY_S + 60)
        assert running["state"] == "running"
        [provisioned] = system.log.messages(NodesProvisioned, job_id=big)
        assert len(provisioned.nodes) == 4 and all(n.startswith("east-burst-b") for n in provisioned.nodes)
        [admitted] = system.log.messages(JobAdmitted, job_id=big)
        assert {n.node for n in admitted.placement.nodes} == set(provisioned.nodes)
        await api.wait_state(big, "succeeded", within=60)

        # idle for IDLE_S: the queue manager gives the nodes back, the dispatcher marks them, the cloud removes them
        await system.log.wait_until(lambda: len(system.log.messages(NodeReleaseRequested)) >= 4, within=IDLE_S + 40,
                                    what="the bought nodes given back")
        released = {r.node for r in system.log.messages(NodeReleaseRequested)}
        assert released == set(provisioned.nodes)
        await system.first_cluster().wait_nodes_gone(released, within=30)
        assert set(cloud.removed) == released
        await _charged_like_usage(e2e_settings, "team-a", nodes=4, price=2.5, since=asked_at)

        assert not system.log.messages(NodesRequested, job_id=small_budget)
        other = await api.job(small_budget, tenant="team-b")
        assert other["state"] == "pending" and other["reason"] != "waiting_for_provisioning", other
        await api.cancel(small_budget, tenant="team-b")


async def test_a_request_the_cloud_cannot_serve_falls_back_to_waiting_with_the_reason(
        e2e_settings: KafkaSettings, kube_backend: RealKube | None, tmp_path: Path) -> None:
    async with _growing(e2e_settings, kube_backend, tmp_path, stock={"burst": 2}) as (system, _):
        api = system.api
        big = await api.submit(job_spec("big", gpus=8, replicas=4, duration_s=5.0))
        await system.log.wait_until(lambda: bool(system.log.messages(ProvisioningFailed, job_id=big)),
                                    within=DELAY_S + 30, what="the failed request")
        [failed] = system.log.messages(ProvisioningFailed, job_id=big)
        assert failed.reason == "OutOfCapacity"
        status = await api.wait_job(big, lambda j: "buying nodes failed" in j["message"], within=20)
        assert status["state"] == "pending" and status["reason"] != "waiting_for_provisioning"
        assert "OutOfCapacity" in status["message"], status
        assert len(system.log.messages(NodesRequested, job_id=big)) == 1  # not asked again at once
        await api.cancel(big)


async def test_a_gang_pours_over_into_a_burst_cluster(e2e_settings: KafkaSettings, tmp_path: Path) -> None:
    """Burst to a second cluster goes the same way, through the multi-cluster path (kubesim: two clusters)."""
    async with _growing(e2e_settings, None, tmp_path, config=_burst_config()) as (system, cloud):
        api = system.api
        asked_at = time.time()
        big = await api.submit(job_spec("big", gpus=8, replicas=2, duration_s=3.0))
        await api.wait_state(big, "running", within=DELAY_S + 60)
        [asked] = system.log.messages(NodesRequested, job_id=big)
        assert (asked.cluster, asked.group, asked.nodes) == ("cloud", "a100", 2)
        [admitted] = system.log.messages(JobAdmitted, job_id=big)
        assert admitted.placement.cluster == "cloud"
        assert all(n.node.startswith("cloud-a100-b") for n in admitted.placement.nodes)
        assert await system.clusters["cloud"].pods(big) and not await system.clusters["east"].pods(big)
        await api.wait_state(big, "succeeded", within=60)
        await system.log.wait_until(lambda: len(system.log.messages(NodeReleaseRequested)) >= 2,
                                    within=IDLE_S + 40, what="the cloud nodes given back")
        await system.clusters["cloud"].wait_nodes_gone({n.node for n in admitted.placement.nodes}, within=30)
        assert len(cloud.removed) == 2
        await _charged_like_usage(e2e_settings, "team-a", nodes=2, price=4.0, since=asked_at)
