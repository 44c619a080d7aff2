"""Authentication and the tenant-isolation matrix: nobody reads or acts on another tenant's work."""

from __future__ import annotations

import re

import httpx
import pytest

from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC
from tests.gateway.builders import Harness, auth, feed, spec_json, status_changed

JOB_OF_B = "train-of-b"


@pytest.fixture
def with_b_job(gw: Harness) -> Harness:
    feed(gw.ctx.status, status_changed(JOB_OF_B, tenant="team-b", queue="team-b", state="pending"))
    return gw


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope-not-a-token"},
                                     {"Authorization": "Basic dXNlcjpwYXNz"}])
@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/v1/jobs"), ("GET", "/v1/jobs/x"), ("POST", "/v1/jobs"), ("GET", "/v1/queues"),
    ("GET", "/v1/config"), ("POST", "/v1/jobs/x/cancel"),
])
async def test_every_api_route_needs_a_known_bearer_token(client: httpx.AsyncClient, method: str, path: str,
                                                          headers: dict[str, str]) -> None:
    r = await client.request(method, path, headers=headers, json=spec_json() if method == "POST" else None)
    assert r.status_code == 401
    assert r.json()["error"] == "unauthenticated"
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/openapi.json", "/docs"])
async def test_open_routes(client: httpx.AsyncClient, path: str) -> None:
    assert (await client.get(path)).status_code == 200


async def test_the_api_docs_load_nothing_from_another_host(client: httpx.AsyncClient) -> None:
    page = (await client.get("/docs")).text
    sources = re.findall(r'(?:src|href)=["\']([^"\']+)["\']', page) + re.findall(r"url: *'([^']+)'", page)
    assert sources and all(s.startswith("/") for s in sources), sources
    for source in sources:
        r = await client.get(source)
        assert r.status_code == 200, source
    assert "swagger-ui" in (await client.get("/docs/assets/swagger-ui.css")).text


async def test_submitting_to_another_tenants_queue_is_403(client: httpx.AsyncClient, gw: Harness) -> None:
    r = await client.post("/v1/jobs", json=spec_json(queue="team-b"), headers=auth("alice"))
    assert (r.status_code, r.json()["field"]) == (403, "spec.queue")
    assert gw.publisher.sent == []


async def test_another_tenants_job_is_invisible(client: httpx.AsyncClient, with_b_job: Harness) -> None:
    assert (await client.get(f"/v1/jobs/{JOB_OF_B}", headers=auth("bob"))).status_code == 200
    for path in (f"/v1/jobs/{JOB_OF_B}", f"/v1/jobs/{JOB_OF_B}/explain", f"/v1/jobs/{JOB_OF_B}/events"):
        r = await client.get(path, headers=auth("alice"))
        assert r.status_code == 404  # not 403: existence is not revealed
    listed = (await client.get("/v1/jobs", headers=auth("alice"))).json()
    assert listed["items"] == [] and listed["total"] == 0
    r = await client.get("/v1/jobs", params={"tenant": "team-b"}, headers=auth("alice"))
    assert (r.status_code, r.json()["field"]) == (403, "tenant")


@pytest.mark.parametrize(("method", "suffix", "body"), [
    ("POST", "/cancel", None), ("POST", "/suspend", None), ("POST", "/resume", None),
    ("PATCH", "", {"priority_class": "high"}), ("POST", "/scale", {"replicas": 1}),
])
async def test_acting_on_another_tenants_job_is_refused(client: httpx.AsyncClient, with_b_job: Harness,
                                                        method: str, suffix: str,
                                                        body: dict[str, object] | None) -> None:
    r = await client.request(method, f"/v1/jobs/{JOB_OF_B}{suffix}", json=body, headers=auth("alice"))
    assert r.status_code == 404
    assert with_b_job.publisher.on(INTENTS_TOPIC) == []


async def test_recent_submissions_are_private_too(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=spec_json(queue="team-b"), headers=auth("bob"))).json()["job_id"]
    assert (await client.get(f"/v1/jobs/{job_id}", headers=auth("alice"))).status_code == 404
    assert (await client.post(f"/v1/jobs/{job_id}/cancel", headers=auth("alice"))).status_code == 404
    assert (await client.get(f"/v1/jobs/{job_id}", headers=auth("bob"))).json()["state"] == "submitted"


async def test_same_key_of_two_tenants_is_two_jobs(client: httpx.AsyncClient) -> None:
    a = await client.post("/v1/jobs", json=spec_json(queue="team-a"), headers={**auth("alice"), "Idempotency-Key": "k"})
    b = await client.post("/v1/jobs", json=spec_json(queue="team-b"), headers={**auth("bob"), "Idempotency-Key": "k"})
    assert a.status_code == b.status_code == 202
    assert a.json()["job_id"] != b.json()["job_id"]


async def test_admin_sees_and_acts_on_every_tenant(client: httpx.AsyncClient, with_b_job: Harness) -> None:
    feed(with_b_job.ctx.status, status_changed("train-of-a", tenant="team-a", queue="team-a"))
    listed = (await client.get("/v1/jobs", headers=auth("root"))).json()
    assert {j["job_id"] for j in listed["items"]} == {JOB_OF_B, "train-of-a"}
    only_b = (await client.get("/v1/jobs", params={"tenant": "team-b"}, headers=auth("root"))).json()
    assert [j["job_id"] for j in only_b["items"]] == [JOB_OF_B]
    assert (await client.post(f"/v1/jobs/{JOB_OF_B}/cancel", headers=auth("root"))).status_code == 202
    r = await client.post("/v1/jobs", json=spec_json(queue="team-b"), headers=auth("root"))
    assert r.status_code == 202
    submitted = with_b_job.publisher.on(INTENTS_TOPIC)[-1]
    assert (submitted.tenant, submitted.user) == ("team-b", "root")  # type: ignore[attr-defined]


async def test_queues_and_config_show_a_member_only_its_own(client: httpx.AsyncClient) -> None:
    queues = (await client.get("/v1/queues", headers=auth("bob"))).json()["items"]
    assert [q["name"] for q in queues] == ["team-b"]
    assert (await client.get("/v1/queues/team-a", headers=auth("bob"))).status_code == 404
    config = (await client.get("/v1/config", headers=auth("bob"))).json()
    assert [q["name"] for q in config["queues"]] == ["team-b"]
    assert [t["name"] for t in config["tenants"]] == ["team-b"]
    assert [c["name"] for c in config["cohorts"]] == ["research"]
    all_queues = (await client.get("/v1/queues", headers=auth("root"))).json()["items"]
    assert [q["name"] for q in all_queues] == ["team-a", "team-a-ops", "team-b"]


@pytest.mark.parametrize(("method", "path", "body"), [
    ("PUT", "/v1/config/queues/team-b", {"name": "team-b", "tenant": "team-b", "allow_privileged": True}),
    ("PUT", "/v1/config/cohorts/c2", {"name": "c2"}),
    ("PUT", "/v1/config/priority-classes/top", {"name": "top", "value": 99999}),
    ("PUT", "/v1/config/tenants/team-a", {"name": "team-a", "namespace": "team-a", "gpu_hour_budget": 1e9}),
    ("DELETE", "/v1/config/queues/team-b", None),
])
async def test_configuration_changes_need_an_admin(client: httpx.AsyncClient, gw: Harness, method: str, path: str,
                                                   body: dict[str, object] | None) -> None:
    r = await client.request(method, path, json=body, headers=auth("alice"))
    assert (r.status_code, r.json()["error"]) == (403, "admin_required")
    assert gw.publisher.on(CONFIG_TOPIC) == []
