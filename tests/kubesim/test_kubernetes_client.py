"""kubernetes-asyncio (the client Muster's runtime uses) against a served KubeSim."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.rest import ApiException

from services.kubesim import KubeSim
from tests.kubesim.builders import job


async def test_list_watch_and_errors_through_kubernetes_asyncio(sim: KubeSim) -> None:
    async with client.ApiClient(client.Configuration(host=sim.url)) as api_client:
        core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
        nodes = await core.list_node(label_selector="nvidia.com/gpu.product=t4")
        assert [n.metadata.name for n in nodes.items] == ["east-t4-0", "east-t4-1"]
        assert nodes.items[0].status.allocatable["nvidia.com/gpu"] == "4"
        listed = await core.list_namespaced_pod("team-a")
        await batch.create_namespaced_job("team-a", job("k", duration=0.1))  # type: ignore[arg-type]
        phases: list[str] = []
        async for event in watch.Watch().stream(core.list_namespaced_pod, "team-a",
                                                resource_version=listed.metadata.resource_version,
                                                timeout_seconds=1):
            phases.append(event["object"].status.phase)
            if phases[-1] == "Succeeded":
                break
        assert phases[0] == "Pending" and phases[-1] == "Succeeded" and "Running" in phases
        with pytest.raises(ApiException) as missing:
            await core.read_namespaced_pod("nope", "team-a")
        assert missing.value.status == 404
        sim.compact()
        with pytest.raises(ApiException) as expired:
            async for _ in watch.Watch().stream(core.list_namespaced_pod, "team-a",
                                                resource_version=listed.metadata.resource_version,
                                                timeout_seconds=1):
                pass
        assert expired.value.status == 410
