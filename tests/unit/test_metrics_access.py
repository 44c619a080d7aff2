"""Who may read /metrics (``MUSTER_METRICS_EXPOSE``, ``MUSTER_METRICS_TOKEN``): the decision, and the aiohttp
endpoint every service but the gateway serves."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from services.runtime.metrics_access import MetricsAccess, is_loopback
from services.runtime.service import ServiceRunner


@pytest.mark.parametrize(("peer", "local"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("::ffff:127.0.0.1", True), (None, True),
    ("10.0.0.5", False), ("192.168.1.2", False), ("::ffff:10.0.0.5", False), ("2001:db8::1", False),
    ("not-an-address", False),
])
def test_loopback_peers(peer: str | None, local: bool) -> None:
    assert is_loopback(peer) is local


def test_the_default_serves_this_host_only() -> None:
    access = MetricsAccess.from_env({})
    assert (access.expose, access.token) == ("localhost", None)
    assert access.check("127.0.0.1", None).allowed
    refused = access.check("10.0.0.5", None)
    assert refused.status == 403 and "MUSTER_METRICS_EXPOSE=localhost" in refused.reason


def test_off_and_public() -> None:
    assert MetricsAccess.from_env({"MUSTER_METRICS_EXPOSE": "off"}).check("127.0.0.1", None).status == 404
    assert MetricsAccess.from_env({"MUSTER_METRICS_EXPOSE": "PUBLIC"}).check("10.0.0.5", None).allowed


def test_a_token_is_required_in_every_mode_once_set(tmp_path: Path) -> None:
    for expose in ("localhost", "public"):
        access = MetricsAccess.from_env({"MUSTER_METRICS_EXPOSE": expose, "MUSTER_METRICS_TOKEN": "s3cret"})
        assert access.check("127.0.0.1", "Bearer s3cret").allowed
        for header in (None, "Bearer wrong", "Basic s3cret", "s3cret", "Bearer "):
            verdict = access.check("127.0.0.1", header)
            assert verdict.status == 401 and verdict.headers == {"WWW-Authenticate": 'Bearer realm="metrics"'}
    assert MetricsAccess(token="s3cret").check("10.0.0.5", "Bearer s3cret").status == 403  # still this host only
    path = tmp_path / "token"
    path.write_text("from-a-file\n", encoding="utf-8")
    assert MetricsAccess.from_env({"MUSTER_METRICS_TOKEN_FILE": str(path)}).token == "from-a-file"


@pytest.mark.parametrize(("env", "problem"), [
    ({"MUSTER_METRICS_EXPOSE": "everyone"}, "expected one of off, localhost, public"),
    ({"MUSTER_METRICS_TOKEN": "   "}, "an empty token protects nothing"),
    ({"MUSTER_METRICS_TOKEN": "a", "MUSTER_METRICS_TOKEN_FILE": "/x"}, "not both"),
    ({"MUSTER_METRICS_TOKEN_FILE": "/nonexistent/token"}, "MUSTER_METRICS_TOKEN_FILE=/nonexistent/token"),
])
def test_a_wrong_setting_stops_the_service_from_starting(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        MetricsAccess.from_env(env)


def test_an_empty_token_variable_means_no_token() -> None:
    """The Secret template's empty value must not lock everyone out (nor crash the service)."""
    assert MetricsAccess.from_env({"MUSTER_METRICS_TOKEN": ""}).token is None


async def test_the_service_endpoint_applies_the_setting() -> None:
    async def check(access: MetricsAccess, headers: dict[str, str]) -> tuple[int, int]:
        runner = ServiceRunner("probe", metrics_access=access)
        http = await runner._serve_http()  # the endpoint alone, without the service's loops
        assert http is not None
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{runner.url}/metrics", headers=headers) as metrics:
                    body = await metrics.text()
                    if metrics.status != 200:  # a refusal says why, and never leaks a metric
                        assert "MUSTER_METRICS" in body or "Bearer" in body
                        assert "# HELP" not in body
                async with session.get(f"{runner.url}/healthz") as health:
                    return metrics.status, health.status
        finally:
            await http.cleanup()

    assert await check(MetricsAccess(), {}) == (200, 200)  # the client is on this host
    assert await check(MetricsAccess("off"), {}) == (404, 200)
    assert await check(MetricsAccess("public", "t0k"), {}) == (401, 200)
    assert await check(MetricsAccess("public", "t0k"), {"Authorization": "Bearer t0k"}) == (200, 200)
