"""Submitting a job that waits for others: names become the tenant's job ids; unknown or foreign jobs are 422."""

from __future__ import annotations

from datetime import timedelta

import httpx

from schemas.intents import SubmitJob
from schemas.topics import INTENTS_TOPIC
from tests.gateway.builders import T0, Harness, auth, feed, spec_json, status_changed


def sent(gw: Harness) -> SubmitJob:
    message = gw.publisher.on(INTENTS_TOPIC)[-1]
    assert isinstance(message, SubmitJob)
    return message


async def test_a_name_becomes_the_latest_job_of_that_name(client: httpx.AsyncClient, gw: Harness) -> None:
    feed(gw.ctx.status, status_changed("train-old", name="train", state="succeeded"))
    feed(gw.ctx.status, status_changed("train-new", name="train", submitted_at=T0 + timedelta(hours=1)))
    body = spec_json("evaluate", after=[{"job": "train"}, {"job": "train-old", "on": "finished"}])
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 202, r.text
    assert [(d.job, d.on) for d in sent(gw).spec.after] == [("train-new", "succeeded"), ("train-old", "finished")]


async def test_a_job_submitted_a_moment_ago_can_be_waited_for(client: httpx.AsyncClient, gw: Harness) -> None:
    r = await client.post("/v1/jobs", json=spec_json("train"), headers=auth("alice"))
    train_id = r.json()["job_id"]
    r = await client.post("/v1/jobs", json=spec_json("evaluate", after=[{"job": "train"}]), headers=auth("alice"))
    assert r.status_code == 202 and sent(gw).spec.after[0].job == train_id


async def test_unknown_and_other_tenants_jobs_are_422_alike(client: httpx.AsyncClient, gw: Harness) -> None:
    feed(gw.ctx.status, status_changed("theirs", tenant="team-b", queue="team-b", name="secret"))
    for target in ("nope", "theirs", "secret"):
        r = await client.post("/v1/jobs", json=spec_json("evaluate", after=[{"job": target}]), headers=auth("alice"))
        assert r.status_code == 422
        body = r.json()
        assert (body["error"], body["field"]) == ("unknown_dependency", "spec.after.0.job")
        assert body["detail"] == f"no job with id or name {target!r} in tenant 'team-a'"
    assert gw.publisher.on(INTENTS_TOPIC) == []


async def test_a_job_named_twice_is_422(client: httpx.AsyncClient) -> None:
    body = spec_json("evaluate", after=[{"job": "train"}, {"job": "train", "on": "failed"}])
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 422 and "more than once" in r.text
