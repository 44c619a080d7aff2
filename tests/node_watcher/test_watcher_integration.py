"""The node-state watcher alone on Apache Kafka and the simulated cluster: capacity, health, run observations."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from schemas.capacity import NodeRemoved, NodeStateObserved
from schemas.decisions import NodePods, PlacementPlan
from schemas.runs import RunAllPodsReady, RunDeleted, RunFailed, RunStarted, RunSucceeded
from services.dispatcher.render import JobTemplate, render_job
from services.runtime.kafka import KafkaSettings
from services.runtime.kube import JOBS, NODES, create_or_get, delete
from tests.builders.realkube import RealKube
from tests.dispatcher.harness import Cluster, running

pytestmark = pytest.mark.integration


def new_job(job_id: str, nodes: tuple[str, ...], seconds: float, exit_code: int = 0) -> dict:  # type: ignore[type-arg]
    template = JobTemplate(job_id=job_id, namespace="team-a", queue="team-a", image="busybox", replicas=len(nodes),
                           gpus_per_pod=2, gpu_type="a100",
                           annotations={"kubesim.muster.dev/duration-seconds": str(seconds),
                                        "kubesim.muster.dev/exit-code": str(exit_code)})
    placement = PlacementPlan(cluster="east", nodes=[NodePods(node=n, pods=1) for n in nodes])
    return render_job(template, 0, placement)


def states_since(cluster: Cluster, start: datetime, node: str | None = None) -> list[NodeStateObserved]:
    return [m for m in cluster.outputs.messages(NodeStateObserved)
            if m.observed_at >= start and (node is None or m.state.node == node)]


async def test_capacity_of_every_node(registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    start = datetime.now(UTC)
    async with running(registry_settings, kube_backend, dispatcher=False) as cluster:
        expected = {f"east-a100-{i}" for i in range(4)} | {"east-t4-0", "east-t4-1"}
        await cluster.outputs.wait_until(lambda: {m.state.node for m in states_since(cluster, start)} == expected)
        by_node = {m.state.node: m.state for m in states_since(cluster, start)}
        assert by_node["east-a100-0"].gpus_allocatable == 8 and by_node["east-a100-0"].gpu_type == "a100"
        assert by_node["east-a100-0"].topology.nvlink_groups == [4, 4]
        assert by_node["east-t4-1"].gpus_allocatable == 4 and by_node["east-t4-1"].topology.block == "b1"
        assert all(s.healthy and s.schedulable and s.cluster == "east" for s in by_node.values())
        before = len(states_since(cluster, start))
        cluster.require_sim().set_node_ready("east-t4-0", False)
        await cluster.outputs.wait_until(
            lambda: any(not s.state.healthy for s in states_since(cluster, start, "east-t4-0")))
        assert cluster.watcher is not None
        await cluster.watcher.outbox.drained()
        assert len(states_since(cluster, start)) == before + 1  # exactly the one node that changed


async def test_run_observations_of_a_job_and_its_gpus(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = f"watched-{uuid.uuid4().hex[:6]}"
    start = datetime.now(UTC)
    async with running(registry_settings, kube_backend, dispatcher=False) as cluster:
        await create_or_get(cluster.rest, JOBS, new_job(jid, ("east-a100-3",), seconds=1.0))
        await cluster.outputs.wait_for(RunSucceeded, job_id=jid)
        kinds = [type(m).__name__ for m in cluster.outputs.of_job(jid)]
        assert kinds == ["RunStarted", "RunAllPodsReady", "RunSucceeded"]
        used = [s.state.gpus_in_use for s in states_since(cluster, start, "east-a100-3")]
        assert 2 in used and used[-1] == 0  # held while the pod ran, released when it ended
        assert await delete(cluster.rest, JOBS, f"{jid}-a0", "team-a")
        deleted = (await cluster.outputs.wait_for(RunDeleted, job_id=jid))[0]
        assert deleted.by == "external"


async def test_a_failed_pod_is_reported_once_even_across_dropped_watches(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    jid = f"broken-{uuid.uuid4().hex[:6]}"
    async with running(registry_settings, kube_backend, dispatcher=False) as cluster:
        await create_or_get(cluster.rest, JOBS, new_job(jid, ("east-a100-0", "east-a100-1"), seconds=0.5,
                                                        exit_code=7))
        await cluster.outputs.wait_for(RunStarted, job_id=jid)
        await cluster.drop_watches()
        failed = (await cluster.outputs.wait_for(RunFailed, job_id=jid))[0]
        assert failed.exit_code == 7 and failed.pod is not None and failed.pod.startswith(f"{jid}-a0-")
        await cluster.drop_watches()
        await cluster.outputs.wait_for(RunAllPodsReady, job_id=jid)
        assert cluster.watcher is not None
        await cluster.watcher.outbox.drained()
        assert len(cluster.outputs.messages(RunFailed, job_id=jid)) == 1
        assert len(cluster.outputs.messages(RunStarted, job_id=jid)) == 1


async def test_a_node_deleted_while_the_watcher_was_down_is_removed(
        registry_settings: KafkaSettings, kube_backend: RealKube | None) -> None:
    async with running(registry_settings, kube_backend, dispatcher=False) as cluster:
        assert cluster.watcher is not None
        await cluster.watcher.outbox.drained()
        await cluster.stop("watcher")
        assert await delete(cluster.rest, NODES, "east-t4-1")
        start = datetime.now(UTC)
        await cluster.start_watcher()
        # (the module's broker is shared by both backends' runs: only this run's removal counts)
        await cluster.outputs.wait_until(lambda: any(
            r.observed_at >= start for r in cluster.outputs.messages(NodeRemoved, node="east-t4-1")),
            within=60, what="NodeRemoved of east-t4-1 after the restart")
        removed = cluster.outputs.messages(NodeRemoved, node="east-t4-1")
        assert removed[-1].observed_at >= start and removed[-1].cluster == "east"
        assert cluster.watcher is not None
        await cluster.watcher.outbox.drained()
        assert not [m for m in cluster.outputs.messages(NodeRemoved) if m.node != "east-t4-1"]

