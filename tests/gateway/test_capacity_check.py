"""A job no known cluster could ever host is refused at submission (422), unless it opts in."""

from __future__ import annotations

import httpx
import pytest

from schemas.capacity import NodeRemoved, NodeState, NodeStateObserved
from schemas.config import AutoscaleConfig, ClusterConfig, ClusterDefined, NodeGroupConfig
from schemas.envelope import Envelope, Message, make_envelope
from schemas.topics import INTENTS_TOPIC
from tests.builders.jobspecs import job_spec
from tests.gateway.builders import T0, Harness, auth, feed


def add_node(gw: Harness, name: str, gpus: int, gpu_type: str = "a100", cluster: str = "east") -> None:
    msg = NodeStateObserved(state=NodeState(cluster=cluster, node=name, gpu_type=gpu_type, gpus_allocatable=gpus),
                            observed_at=T0)
    gw.ctx.dashboard_feeds().capacity(msg.key(), _envelope(msg))


def _envelope(msg: Message) -> Envelope:
    return make_envelope(msg, "test")


def sized(gpus: int, replicas: int, **fields: object) -> dict[str, object]:
    """The JSON body of a job of ``replicas`` pods of ``gpus`` GPUs (a100 unless ``gpu_type`` says) each."""
    return job_spec(replicas=replicas, gpus=gpus, **fields).model_dump(mode="json")


@pytest.fixture
def two_nodes(gw: Harness) -> Harness:
    add_node(gw, "n1", 8)
    add_node(gw, "n2", 8)
    add_node(gw, "w1", 8, cluster="west")
    return gw


@pytest.mark.parametrize(("body", "field", "detail"), [
    (sized(8, 3), "spec.replicas", "no cluster can ever host 3 pods of 8 GPU(s) a100: at most 2 fit"),
    (sized(4, 1, gpu_type="h100"), "spec.template.resources.gpu_type", "no node has GPU type 'h100' (known: a100)"),
])
async def test_impossible_jobs_are_422(client: httpx.AsyncClient, two_nodes: Harness, body: dict[str, object],
                                       field: str, detail: str) -> None:
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (422, "no_matching_nodes", field)
    assert r.json()["detail"].startswith(detail) and "allow_future_capacity" in r.json()["detail"]
    assert two_nodes.publisher.on(INTENTS_TOPIC) == []
    opted = await client.post("/v1/jobs", json={**body, "allow_future_capacity": True}, headers=auth("alice"))
    assert opted.status_code == 202


async def test_what_fits_or_is_elastic_is_accepted(client: httpx.AsyncClient, two_nodes: Harness) -> None:
    for body in (sized(8, 2), sized(4, 4), sized(8, 3, min_replicas=2), sized(0, 1)):
        r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
        assert r.status_code == 202, (body, r.text)


async def test_no_nodes_known_means_no_check(client: httpx.AsyncClient, gw: Harness) -> None:
    assert (await client.post("/v1/jobs", json=sized(8, 50), headers=auth("alice"))).status_code == 202


async def test_removed_nodes_no_longer_count(client: httpx.AsyncClient, two_nodes: Harness) -> None:
    gone = NodeRemoved(cluster="east", node="n2", observed_at=T0)
    two_nodes.ctx.dashboard_feeds().capacity(gone.key(), _envelope(gone))
    r = await client.post("/v1/jobs", json=sized(8, 2), headers=auth("alice"))
    assert r.status_code == 422


async def test_a_gang_that_fits_once_a_growable_group_grows_is_accepted(client: httpx.AsyncClient,
                                                                       two_nodes: Harness) -> None:
    """A cluster defined with a node group that can grow counts the nodes it may still add (max less count)."""
    assert (await client.post("/v1/jobs", json=sized(8, 5), headers=auth("alice"))).status_code == 422
    grows = NodeGroupConfig(name="burst", count=1, gpus_per_node=8, gpu_type="a100",
                            autoscale=AutoscaleConfig(max=4))
    feed(two_nodes.ctx.config, ClusterDefined(item=ClusterConfig(name="east", node_groups=[grows])))
    assert (await client.post("/v1/jobs", json=sized(8, 5), headers=auth("alice"))).status_code == 202  # 2 + 3
    r = await client.post("/v1/jobs", json=sized(8, 6), headers=auth("alice"))
    assert r.status_code == 422 and "at most 5 fit" in r.json()["detail"]
