"""Recurring jobs through the API: definition by a scheduled submission, idempotence, authorisation, actions."""

from __future__ import annotations

from datetime import timedelta

import httpx

from schemas.config import ConfigItemDeleted, RecurringJobDefined
from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC
from services.gateway.cron import firing_job_id
from tests.gateway.builders import T0, Harness, auth, feed, spec_json, status_changed

NIGHTLY = spec_json("nightly", schedule="0 2 * * *")


def published(gw: Harness) -> list[RecurringJobDefined | ConfigItemDeleted]:
    return [m for m in gw.publisher.on(CONFIG_TOPIC) if isinstance(m, RecurringJobDefined | ConfigItemDeleted)]


async def test_scheduled_submission_defines_a_recurring_job_instead_of_a_job(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    r = await client.post("/v1/jobs", json=NIGHTLY, headers=auth("alice"))
    assert r.status_code == 201
    body = r.json()
    assert (body["name"], body["tenant"], body["schedule"]) == ("team-a.nightly", "team-a", "0 2 * * *")
    assert body["next_firings"] == ["2026-11-02T02:00:00Z", "2026-11-03T02:00:00Z", "2026-11-04T02:00:00Z"]
    assert r.headers["location"] == "/v1/recurring/team-a.nightly" == body["location"]
    assert (body["created"], body["changed"], body["suspended"]) == (True, True, False)
    [defined] = published(gw)
    assert isinstance(defined, RecurringJobDefined) and defined.key() == "recurring-job/team-a.nightly"
    assert (defined.item.user, defined.item.created_at, defined.item.spec.schedule) == ("alice", T0, "0 2 * * *")
    assert gw.publisher.on(INTENTS_TOPIC) == []


async def test_reposting_the_same_spec_is_the_same_recurring_job_and_publishes_nothing(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    first = await client.post("/v1/jobs", json=NIGHTLY, headers=auth("alice"))
    again = await client.post("/v1/jobs", json=NIGHTLY, headers={**auth("alice"), "Idempotency-Key": "k"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["name"] == first.json()["name"]
    assert (again.json()["created"], again.json()["changed"]) == (False, False)
    assert len(published(gw)) == 1


async def test_reposting_a_changed_spec_updates_it_and_keeps_its_state(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    await client.post("/v1/jobs", json=NIGHTLY, headers=auth("alice"))
    await client.post("/v1/recurring/team-a.nightly/suspend", headers=auth("alice"))
    gw.ctx.now = lambda: T0 + timedelta(hours=1)
    r = await client.post("/v1/jobs", json={**NIGHTLY, "schedule": "30 3 * * *"}, headers=auth("alice"))
    assert r.status_code == 200 and (r.json()["created"], r.json()["changed"]) == (False, True)
    assert r.json()["suspended"] is True and r.json()["next_firings"] == []
    updated = published(gw)[-1]
    assert isinstance(updated, RecurringJobDefined)
    assert (updated.item.spec.schedule, updated.item.created_at, updated.item.suspended) == ("30 3 * * *", T0, True)


async def test_scheduled_submission_is_authorised_like_a_submission(client: httpx.AsyncClient, gw: Harness) -> None:
    other = await client.post("/v1/jobs", json=spec_json("nightly", "team-b", schedule="@daily"), headers=auth("alice"))
    assert (other.status_code, other.json()["error"], other.json()["field"]) == (403, "forbidden", "spec.queue")
    privileged = spec_json("nightly", schedule="@daily")
    privileged["template"]["security"] = {"privileged": True}
    r = await client.post("/v1/jobs", json=privileged, headers=auth("alice"))
    assert (r.status_code, r.json()["error"]) == (403, "privileged_not_allowed")
    r = await client.post("/v1/jobs", json=spec_json("nightly", schedule="61 * * * *"), headers=auth("alice"))
    assert (r.status_code, r.json()["error"], r.json()["field"]) == (422, "invalid_schedule", "spec.schedule")
    r = await client.post("/v1/jobs", json=spec_json("n" * 60, schedule="@daily"), headers=auth("alice"))
    assert (r.status_code, r.json()["field"]) == (422, "spec.name")
    r = await client.post("/v1/jobs", json=spec_json("nightly", schedule="every day"), headers=auth("alice"))
    assert r.status_code == 422
    assert (await client.post("/v1/jobs", json=NIGHTLY)).status_code == 401
    assert gw.publisher.sent == []


async def test_an_administrator_defines_it_for_the_queue_tenant(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/jobs", json=NIGHTLY, headers=auth("root"))
    assert (r.status_code, r.json()["name"], r.json()["tenant"]) == (201, "team-a.nightly", "team-a")


async def test_each_tenant_lists_its_own_and_administrators_all(client: httpx.AsyncClient) -> None:
    await client.post("/v1/jobs", json=NIGHTLY, headers=auth("alice"))
    await client.post("/v1/jobs", json=spec_json("nightly", "team-b", schedule="@hourly"), headers=auth("bob"))

    async def names(user: str, **params: str) -> list[str]:
        r = await client.get("/v1/recurring", params=params, headers=auth(user))
        assert r.status_code == 200, r.text
        return [item["name"] for item in r.json()["items"]]

    assert await names("alice") == ["team-a.nightly"]
    assert await names("bob") == ["team-b.nightly"]
    assert await names("root") == ["team-a.nightly", "team-b.nightly"]
    assert await names("root", tenant="team-b") == ["team-b.nightly"]
    r = await client.get("/v1/recurring", params={"tenant": "team-b"}, headers=auth("alice"))
    assert r.status_code == 403


async def test_get_shows_next_firings_and_jobs_of_recent_firings(client: httpx.AsyncClient, gw: Harness) -> None:
    await client.post("/v1/jobs", json=NIGHTLY, headers=auth("alice"))
    fired = [T0 - timedelta(days=d) + timedelta(hours=-10) for d in (1, 0)]  # 02:00 of the last two days
    for when, state in zip(fired, ("succeeded", "running"), strict=True):
        feed(gw.ctx.status, status_changed(firing_job_id("team-a.nightly", "nightly", when), name="nightly",
                                           state=state))
    feed(gw.ctx.status, status_changed("nightly-3f2a9c1b", name="nightly"))  # a one-off job of the same name
    r = await client.get("/v1/recurring/team-a.nightly", headers=auth("alice"))
    assert r.status_code == 200
    body = r.json()
    assert body["next_firings"] == ["2026-11-02T02:00:00Z", "2026-11-03T02:00:00Z", "2026-11-04T02:00:00Z"]
    assert [(f["fired_at"], f["state"]) for f in body["recent_firings"]] == [
        ("2026-11-01T02:00:00Z", "running"), ("2026-10-31T02:00:00Z", "succeeded")]
    assert body["spec"]["schedule"] == "0 2 * * *" and body["queue"] == "team-a"
    assert (await client.get("/v1/recurring/team-a.nightly", headers=auth("bob"))).status_code == 404
    assert (await client.get("/v1/recurring/team-a.nope", headers=auth("alice"))).status_code == 404


async def test_suspend_resume_and_delete(client: httpx.AsyncClient, gw: Harness) -> None:
    await client.post("/v1/jobs", json=NIGHTLY, headers=auth("alice"))
    path = "/v1/recurring/team-a.nightly"
    assert (await client.post(f"{path}/suspend", headers=auth("bob"))).status_code == 404
    r = await client.post(f"{path}/suspend", headers=auth("alice"))
    assert (r.status_code, r.json()["changed"]) == (202, True)
    assert gw.ctx.config.recurring("team-a.nightly").suspended  # type: ignore[union-attr]
    r = await client.post(f"{path}/suspend", headers=auth("alice"))
    assert (r.status_code, r.json()["changed"]) == (200, False)
    assert (await client.get(path, headers=auth("alice"))).json()["next_firings"] == []
    assert (await client.post(f"{path}/resume", headers=auth("root"))).status_code == 202
    assert not gw.ctx.config.recurring("team-a.nightly").suspended  # type: ignore[union-attr]
    assert (await client.delete(path, headers=auth("bob"))).status_code == 404
    r = await client.delete(path, headers=auth("alice"))
    assert (r.status_code, r.json()["action"]) == (202, "delete")
    assert isinstance(published(gw)[-1], ConfigItemDeleted)
    assert (await client.get(path, headers=auth("alice"))).status_code == 404
    assert (await client.delete(path, headers=auth("alice"))).status_code == 404
    assert len(published(gw)) == 4  # defined, suspended, resumed, deleted
