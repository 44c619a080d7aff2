"""Submitting and following jobs through the API (in-memory publisher and views)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from schemas.envelope import JobId, make_envelope
from schemas.intents import CancelJob, ChangePriority, ResumeJob, ScaleJob, SubmitJob, SuspendJob
from schemas.status import ActionOutcome
from schemas.topics import INTENTS_TOPIC, STATUS_TOPIC
from tests.gateway.builders import T0, Harness, answering, auth, feed, spec_json, status_changed


async def test_submission_publishes_submit_job_and_answers_202_with_location(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    r = await client.post("/v1/jobs", json=spec_json(), headers=auth("alice"))
    assert r.status_code == 202
    body = r.json()
    assert r.headers["location"] == f"/v1/jobs/{body['job_id']}" == body["location"]
    assert body["state"] == "submitted" and body["duplicate"] is False
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, SubmitJob)
    assert (sent.job_id, sent.tenant, sent.user, sent.submitted_at) == (body["job_id"], "team-a", "alice", T0)
    assert sent.spec.template.resources.gpus == 4


async def test_job_unknown_to_status_view_reads_as_submitted_then_as_its_status(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    job_id = (await client.post("/v1/jobs", json=spec_json(), headers=auth("alice"))).json()["job_id"]
    first = await client.get(f"/v1/jobs/{job_id}", headers=auth("alice"))
    assert first.status_code == 200 and first.json()["state"] == "submitted"
    feed(gw.ctx.status, status_changed(job_id, state="pending", position=3, reason="QuotaExhausted"))
    second = (await client.get(f"/v1/jobs/{job_id}", headers=auth("alice"))).json()
    assert (second["state"], second["position"], second["reason"]) == ("pending", 3, "QuotaExhausted")


async def test_same_idempotency_key_is_the_same_job_and_publishes_once(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    headers = {**auth("alice"), "Idempotency-Key": "run-42"}
    first = await client.post("/v1/jobs", json=spec_json(), headers=headers)
    again = await client.post("/v1/jobs", json=spec_json(), headers=headers)
    assert first.status_code == 202 and again.status_code == 200
    assert first.json()["job_id"] == again.json()["job_id"]
    assert again.json()["duplicate"] is True
    assert len(gw.publisher.on(INTENTS_TOPIC)) == 1
    assert gw.publisher.on(INTENTS_TOPIC)[0].idempotency_key == "run-42"  # type: ignore[attr-defined]


async def test_keyed_job_id_is_deterministic_and_known_jobs_are_not_resubmitted(gw: Harness) -> None:
    headers = {**auth("alice"), "Idempotency-Key": "nightly-2026-11-01"}
    ids = []
    for _ in range(2):  # two gateway replicas (fresh local records) see the same key
        other = Harness(gw.ctx, gw.app, gw.publisher, gw.registry)
        other.ctx.recent = type(gw.ctx.recent)()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other.app), base_url="http://g") as c:
            ids.append((await c.post("/v1/jobs", json=spec_json(), headers=headers)).json()["job_id"])
            feed(gw.ctx.status, status_changed(ids[-1]))
    assert ids[0] == ids[1]
    assert len(gw.publisher.on(INTENTS_TOPIC)) == 1  # the second replica found the job in the status view


async def test_reusing_a_key_with_a_different_spec_is_409(client: httpx.AsyncClient) -> None:
    headers = {**auth("alice"), "Idempotency-Key": "k1"}
    assert (await client.post("/v1/jobs", json=spec_json(), headers=headers)).status_code == 202
    r = await client.post("/v1/jobs", json=spec_json(replicas=3), headers=headers)
    assert r.status_code == 409
    assert r.json()["error"] == "idempotency_key_reused" and r.json()["field"] == "Idempotency-Key"


async def test_key_known_only_to_status_view_with_another_queue_is_409(client: httpx.AsyncClient,
                                                                       gw: Harness) -> None:
    headers = {**auth("alice"), "Idempotency-Key": "k2"}
    job_id = (await client.post("/v1/jobs", json=spec_json(), headers=headers)).json()["job_id"]
    gw.ctx.recent = type(gw.ctx.recent)()  # as after a restart
    feed(gw.ctx.status, status_changed(job_id, queue="team-a"))
    r = await client.post("/v1/jobs", json=spec_json(queue="team-a-ops"), headers=headers)
    assert r.status_code == 409


@pytest.mark.parametrize(("path", "value", "field"), [
    (("template", "resources", "gpus"), -1, "spec.template.resources.gpus"),
    (("template", "image"), "", "spec.template.image"),
    (("replicas",), 0, "spec.replicas"),
    (("name",), "Not_A_Name", "spec.name"),
    (("unexpected",), 1, "spec.unexpected"),
])
async def test_invalid_specs_answer_422_naming_the_field(
    client: httpx.AsyncClient, gw: Harness, path: tuple[str, ...], value: object, field: str
) -> None:
    body = spec_json()
    target = body
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert r.status_code == 422
    assert r.json()["field"] == field
    assert r.json()["detail"]
    assert gw.publisher.sent == []


async def test_unknown_queue_and_priority_class_are_422(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/jobs", json=spec_json(queue="nowhere"), headers=auth("alice"))
    assert (r.status_code, r.json()["field"]) == (422, "spec.queue")
    r = await client.post("/v1/jobs", json=spec_json(priority_class="urgent"), headers=auth("alice"))
    assert (r.status_code, r.json()["field"]) == (422, "spec.priority_class")


@pytest.mark.parametrize(("security", "field"), [
    ({"privileged": True}, "spec.template.security.privileged"),
    ({"run_as_root": True}, "spec.template.security.run_as_root"),
    ({"host_network": True}, "spec.template.security.host_network"),
    ({"host_pid": True}, "spec.template.security.host_pid"),
    ({"host_path_volumes": ["/var/run"]}, "spec.template.security.host_path_volumes"),
])
async def test_elevated_specs_are_refused_unless_the_queue_allows_them(
    client: httpx.AsyncClient, security: dict[str, object], field: str
) -> None:
    body = spec_json()
    body["template"]["security"] = security
    r = await client.post("/v1/jobs", json=body, headers=auth("alice"))
    assert (r.status_code, r.json()["field"], r.json()["error"]) == (403, field, "privileged_not_allowed")
    body["queue"] = "team-a-ops"  # allow_privileged
    assert (await client.post("/v1/jobs", json=body, headers=auth("alice"))).status_code == 202


async def test_list_filters_and_orders_newest_first(client: httpx.AsyncClient, gw: Harness) -> None:
    from datetime import timedelta

    for i, state in enumerate(["pending", "running", "succeeded"]):
        feed(gw.ctx.status, status_changed(f"job-{i}", state=state, submitted_at=T0 + timedelta(minutes=i)))
    r = (await client.get("/v1/jobs", headers=auth("alice"))).json()
    assert [j["job_id"] for j in r["items"]] == ["job-2", "job-1", "job-0"] and r["total"] == 3
    r = (await client.get("/v1/jobs", params={"state": "running"}, headers=auth("alice"))).json()
    assert [j["job_id"] for j in r["items"]] == ["job-1"]
    r = (await client.get("/v1/jobs", params={"limit": 1}, headers=auth("alice"))).json()
    assert len(r["items"]) == 1 and r["total"] == 3
    r = (await client.get("/v1/jobs", params={"limit": 2, "offset": 1}, headers=auth("alice"))).json()
    assert [j["job_id"] for j in r["items"]] == ["job-1", "job-0"] and r["total"] == 3
    r = (await client.get("/v1/jobs", params={"offset": 3}, headers=auth("alice"))).json()
    assert r["items"] == [] and r["total"] == 3
    bad = await client.get("/v1/jobs", params={"limit": 0}, headers=auth("alice"))
    assert (bad.status_code, bad.json()["field"]) == (422, "limit")


async def test_explain_gives_reason_position_estimate_and_history(client: httpx.AsyncClient, gw: Harness) -> None:
    from datetime import timedelta

    feed(gw.ctx.status, status_changed("j1", state="pending", position=5, reason="QuotaExhausted",
                                       message="queue team-a uses 16 of 16 a100", minutes=0))
    feed(gw.ctx.status, status_changed("j1", state="pending", position=2, reason="WaitingForReservation",
                                       message="behind a 64-GPU reservation", minutes=5,
                                       estimated_start=T0 + timedelta(minutes=65)))
    r = (await client.get("/v1/jobs/j1/explain", headers=auth("alice"))).json()
    assert (r["reason"], r["position"]) == ("WaitingForReservation", 2)
    assert r["estimated_start"] == "2026-11-01T13:05:00Z"
    assert [h["reason"] for h in r["history"]] == ["QuotaExhausted", "WaitingForReservation"]
    assert "position 3" in r["summary"] and "behind a 64-GPU reservation" in r["summary"]


@pytest.mark.parametrize(("method", "suffix", "body", "message_type"), [
    ("POST", "/cancel", {"reason": "wrong data"}, CancelJob),
    ("POST", "/suspend", None, SuspendJob),
    ("POST", "/resume", None, ResumeJob),
    ("PATCH", "", {"priority_class": "high"}, ChangePriority),
    ("POST", "/scale", {"replicas": 3}, ScaleJob),
])
async def test_actions_publish_their_intent(client: httpx.AsyncClient, gw: Harness, method: str, suffix: str,
                                            body: dict[str, object] | None, message_type: type) -> None:
    feed(gw.ctx.status, status_changed("j1", state="running"))
    r = await client.request(method, f"/v1/jobs/j1{suffix}", json=body, headers=auth("alice"))
    assert r.status_code == 202, r.text
    [sent] = gw.publisher.on(INTENTS_TOPIC)
    assert isinstance(sent, message_type)
    assert sent.job_id == "j1" and sent.requested_by == "alice"  # type: ignore[attr-defined]
    assert r.json()["event_id"] == gw.publisher.sent[0][1].event_id


async def test_actions_on_finished_or_unknown_jobs(client: httpx.AsyncClient, gw: Harness) -> None:
    feed(gw.ctx.status, status_changed("done", state="succeeded"))
    r = await client.post("/v1/jobs/done/cancel", headers=auth("alice"))
    assert (r.status_code, r.json()["error"]) == (409, "job_finished")
    assert (await client.post("/v1/jobs/missing/cancel", headers=auth("alice"))).status_code == 404
    bad = await client.post("/v1/jobs/done/scale", json={"replicas": 0}, headers=auth("alice"))
    assert (bad.status_code, bad.json()["field"]) == (422, "scale.replicas")
    bad = await client.patch("/v1/jobs/done", json={"priority_class": "urgent"}, headers=auth("alice"))
    assert (bad.status_code, bad.json()["field"]) == (422, "patch.priority_class")
    assert gw.publisher.on(INTENTS_TOPIC) == []


async def test_job_ids_are_dns_labels_for_long_names(client: httpx.AsyncClient, gw: Harness) -> None:
    from pydantic import TypeAdapter

    name = "a-very-long-experiment-name.with.dots-and-more-words-than-fit"
    headers = {**auth("alice"), "Idempotency-Key": "x"}
    job_id = (await client.post("/v1/jobs", json=spec_json(name=name), headers=headers)).json()["job_id"]
    assert TypeAdapter(JobId).validate_python(job_id) == job_id and len(job_id) <= 48


async def test_broker_failure_is_503_and_a_retry_with_the_key_then_succeeds(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    headers = {**auth("alice"), "Idempotency-Key": "k"}
    gw.publisher.fail = ConnectionError("broker down")
    r = await client.post("/v1/jobs", json=spec_json(), headers=headers)
    assert (r.status_code, r.json()["error"], r.headers["retry-after"]) == (503, "unavailable", "2")
    assert len(gw.ctx.recent) == 0
    gw.publisher.fail = None
    retry = await client.post("/v1/jobs", json=spec_json(), headers=headers)
    assert retry.status_code == 202 and len(gw.publisher.on(INTENTS_TOPIC)) == 1


async def test_metrics_count_requests_by_route_and_code_and_status_view_size(
    client: httpx.AsyncClient, gw: Harness
) -> None:
    feed(gw.ctx.status, status_changed("j1"))
    await client.get("/v1/jobs/j1", headers=auth("alice"))
    await client.get("/v1/jobs/j1")
    text = (await client.get("/metrics")).text
    assert 'muster_gateway_requests_total{code="200",method="GET",route="/v1/jobs/{job_id}"} 1.0' in text
    assert 'muster_gateway_requests_total{code="401",method="GET",route="/v1/jobs/{job_id}"} 1.0' in text
    assert "muster_gateway_status_view_jobs 1.0" in text
    assert STATUS_TOPIC not in text


async def test_metrics_exposure_is_a_setting(gw: Harness) -> None:
    """The gateway's /metrics follows MUSTER_METRICS_EXPOSE like every service's; the API's routes do not."""
    from services.gateway.app import create_app
    from services.runtime.metrics_access import MetricsAccess

    async def status(access: MetricsAccess, client_host: str, headers: dict[str, str] | None = None) -> int:
        app = create_app(gw.ctx, gw.registry, access)
        transport = httpx.ASGITransport(app=app, client=(client_host, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            assert (await client.get("/healthz")).status_code == 200
            return (await client.get("/metrics", headers=headers)).status_code

    assert await status(MetricsAccess(), "127.0.0.1") == 200
    assert await status(MetricsAccess(), "10.1.2.3") == 403
    assert await status(MetricsAccess("public"), "10.1.2.3") == 200
    assert await status(MetricsAccess("off"), "127.0.0.1") == 404
    assert await status(MetricsAccess("public", "t"), "10.1.2.3") == 401
    assert await status(MetricsAccess("public", "t"), "10.1.2.3", {"Authorization": "Bearer t"}) == 200


async def test_a_request_waits_for_its_answer_and_tells_it(client: httpx.AsyncClient, gw: Harness) -> None:
    """``?wait=``: 200 with the outcome when applied or unchanged, 409 with the reason when refused."""
    feed(gw.ctx.status, status_changed("j1", state="running"))
    answering(gw, "applied")
    r = await client.post("/v1/jobs/j1/cancel", params={"wait": 5}, headers=auth("alice"))
    assert (r.status_code, r.json()["outcome"]) == (200, "applied")
    answering(gw, "refused", "runs_on_borrowed_quota", "the job runs on borrowed quota")
    r = await client.patch("/v1/jobs/j1", params={"wait": 5}, json={"priority_class": "high"}, headers=auth("alice"))
    assert (r.status_code, r.json()["error"], r.json()["detail"]) == (
        409, "runs_on_borrowed_quota", "the job runs on borrowed quota")
    refused_id = gw.publisher.sent[-1][1].event_id
    view = (await client.get("/v1/jobs/j1", headers=auth("alice"))).json()
    assert view["last_action"]["event_id"] == refused_id and view["last_action"]["outcome"] == "refused"
    r = await client.get(f"/v1/jobs/j1/actions/{refused_id}", headers=auth("alice"))
    assert (r.status_code, r.json()["outcome"], r.json()["reason"]) == (200, "refused", "runs_on_borrowed_quota")
    assert (await client.get(f"/v1/jobs/j1/actions/{refused_id}", headers=auth("bob"))).status_code == 404


async def test_an_answer_that_comes_late_is_pending_then_told(client: httpx.AsyncClient, gw: Harness) -> None:
    feed(gw.ctx.status, status_changed("j1", state="pending"))
    r = await client.post("/v1/jobs/j1/suspend", params={"wait": 0.05}, headers=auth("alice"))
    assert (r.status_code, r.json()["outcome"]) == (202, "pending")
    event_id = r.json()["event_id"]
    missing = await client.get(f"/v1/jobs/j1/actions/{event_id}", headers=auth("alice"))
    assert (missing.status_code, missing.json()["error"]) == (404, "not_answered")
    told = ActionOutcome(event_id=event_id, action="suspend", outcome="applied", requested_by="alice", at=T0)
    late = make_envelope(status_changed("j1", state="suspended", last_action=told), "queue_manager")
    gw.ctx.status.apply(late.key(), late)
    gw.ctx.status_changed(late.key(), late)
    r = await client.get(f"/v1/jobs/j1/actions/{event_id}", headers=auth("alice"))
    assert (r.status_code, r.json()["action"], r.json()["outcome"]) == (200, "suspend", "applied")


async def test_waiting_ends_when_the_answer_arrives(gw: Harness) -> None:
    waiting = asyncio.create_task(gw.ctx.answers.wait("j1", "e1", 10.0))
    await asyncio.sleep(0)
    told = ActionOutcome(event_id="e1", action="scale", outcome="unchanged", requested_by="alice", at=T0)
    gw.ctx.answers.add("j1", told)
    assert await asyncio.wait_for(waiting, 1.0) == told
    assert await gw.ctx.answers.wait("j2", "e1", 0.01) is None  # an answer about another job is not this one's
