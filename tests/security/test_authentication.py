"""Authentication on every route the gateway serves except health, metrics and the API documentation."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.builders import Harness, harness
from tests.security.routes import OPEN_PATHS, STATIC_MOUNTS, concrete, documented_routes, served_routes

BAD_CREDENTIALS = [
    {},
    {"Authorization": "Bearer "},
    {"Authorization": "Bearer not-a-known-token"},
    {"Authorization": "Basic dG9rZW4tYWxpY2UtdGVhbS1hOng="},  # a member's token sent as basic auth
    {"Authorization": "token-alice-team-a"},  # a member's token without a scheme
    {"Authorization": "Bearer token-alice-team-a-but-longer"},
]


def test_every_served_route_is_documented_or_open() -> None:
    app = harness().app
    served, documented = served_routes(app), documented_routes(app)
    assert documented <= served
    assert {path for _, path in served - documented} <= OPEN_PATHS | STATIC_MOUNTS
    assert len(documented) >= 24


@pytest.mark.parametrize("headers", BAD_CREDENTIALS, ids=["none", "empty", "unknown", "basic", "no-scheme",
                                                          "extended"])
async def test_every_protected_route_answers_401(headers: dict[str, str]) -> None:
    gw: Harness = harness()
    routes = sorted((m, p) for m, p in served_routes(gw.app) if p not in OPEN_PATHS | STATIC_MOUNTS)
    answers: dict[tuple[str, str], int] = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as client:
        for method, path in routes:
            body: dict[str, object] | None = {} if method in ("POST", "PUT", "PATCH") else None
            r = await client.request(method, concrete(path), headers=headers, json=body)
            answers[(method, path)] = r.status_code
            if r.status_code == 401:
                assert r.headers["www-authenticate"] == "Bearer"
    assert {route: code for route, code in answers.items() if code != 401} == {}
    assert len(answers) >= 24
    assert gw.publisher.sent == []


@pytest.mark.parametrize("path", sorted(OPEN_PATHS))
async def test_open_routes_need_no_token_and_reveal_no_jobs(path: str) -> None:
    gw = harness()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as client:
        r = await client.get(path)
    assert r.status_code == 200
    assert "token-" not in r.text
