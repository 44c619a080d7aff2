"""The gateway's job ids carry the tenant's tag; a keyed submission never names another tenant's job or queue,
and finds its job of before ids carried tags; a tenant whose ids could not be told from another's is refused."""

from __future__ import annotations

import httpx

from schemas.config import TenantDefined
from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC
from services.spec.ids import job_id_of_tenant, keyed_job_id, untagged_keyed_job_id
from tests.builders.tenants import COLLIDING
from tests.gateway.builders import Harness, auth, feed, spec_json, status_changed


def _keyed(user: str, key: str) -> dict[str, str]:
    return {**auth(user), "Idempotency-Key": key}


async def test_every_submission_gets_an_id_of_its_tenant(client: httpx.AsyncClient) -> None:
    for user, queue, tenant in (("alice", "team-a", "team-a"), ("alice", "team-a-ops", "team-a"),
                                ("bob", "team-b", "team-b")):
        fresh = (await client.post("/v1/jobs", json=spec_json(queue=queue), headers=auth(user))).json()["job_id"]
        keyed = (await client.post("/v1/jobs", json=spec_json(queue=queue),
                                   headers=_keyed(user, f"k-{queue}"))).json()["job_id"]
        assert job_id_of_tenant(fresh, tenant) and job_id_of_tenant(keyed, tenant)
        assert keyed == keyed_job_id("train", tenant, f"k-{queue}")


async def test_an_id_of_the_tenant_held_by_another_tenants_job_is_never_named(
        client: httpx.AsyncClient, gw: Harness) -> None:
    """team-a claimed the id team-b's key gives (possible only while a queue manager of before ids carried tags
    ran): team-b's submission is refused naming only its key, nothing of team-a's job."""
    claimed = keyed_job_id("train", "team-b", "nightly-1")
    feed(gw.ctx.status, status_changed(claimed, tenant="team-a", queue="team-a-ops", name="train"))
    r = await client.post("/v1/jobs", json=spec_json(queue="team-b"), headers=_keyed("bob", "nightly-1"))
    assert r.status_code == 409 and r.json()["error"] == "idempotency_key_reused"
    text = r.text
    assert "nightly-1" in text
    assert claimed not in text and "team-a" not in text and "team-a-ops" not in text
    assert gw.publisher.on(INTENTS_TOPIC) == []


async def test_a_keyed_job_of_before_tags_is_found_again(client: httpx.AsyncClient, gw: Harness) -> None:
    old = untagged_keyed_job_id("train", "team-a", "run-7")
    feed(gw.ctx.status, status_changed(old, tenant="team-a", queue="team-a", name="train"))
    again = await client.post("/v1/jobs", json=spec_json(), headers=_keyed("alice", "run-7"))
    assert again.status_code == 200 and again.json() == {**again.json(), "job_id": old, "duplicate": True}
    assert gw.publisher.on(INTENTS_TOPIC) == []


async def test_another_tenants_job_under_an_id_of_before_tags_is_not_the_tenants(
        client: httpx.AsyncClient, gw: Harness) -> None:
    """An untagged id the key of team-b named before tags, held by a team-a job: team-b gets a new job of its
    own, and learns nothing of team-a's."""
    old = untagged_keyed_job_id("train", "team-b", "run-8")
    feed(gw.ctx.status, status_changed(old, tenant="team-a", queue="team-a", name="train"))
    r = await client.post("/v1/jobs", json=spec_json(queue="team-b"), headers=_keyed("bob", "run-8"))
    assert r.status_code == 202 and r.json()["duplicate"] is False
    assert r.json()["job_id"] == keyed_job_id("train", "team-b", "run-8") != old
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert sent.tenant == "team-b"  # type: ignore[attr-defined]


async def test_a_tenant_whose_ids_could_not_be_told_from_anothers_is_refused(
        client: httpx.AsyncClient, gw: Harness) -> None:
    first, second = COLLIDING
    body = {"name": first, "namespace": first}
    assert (await client.put(f"/v1/config/tenants/{first}", json=body, headers=auth("root"))).status_code == 202
    r = await client.put(f"/v1/config/tenants/{second}", json={"name": second, "namespace": second},
                         headers=auth("root"))
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (422, "tenant_tag_collision", "item.name")
    assert first in r.json()["detail"] and "choose another name" in r.json()["detail"]
    queue = {"name": "q-745", "tenant": second}  # a queue naming a new tenant: the same check
    r = await client.put("/v1/config/queues/q-745", json=queue, headers=auth("root"))
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (422, "tenant_tag_collision", "item.tenant")
    # the tenant known already may be changed as before
    body["gpu_hour_budget"] = 10
    assert (await client.put(f"/v1/config/tenants/{first}", json=body, headers=auth("root"))).status_code == 202
    assert [type(m) for m in gw.publisher.on(CONFIG_TOPIC)] == [TenantDefined, TenantDefined]
