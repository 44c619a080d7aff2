"""A tenant administrator's queues on the real broker: the gateway reads its changes back from the config
topic some time after publishing them, and the tenant's quota holds meanwhile."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from services.cli.configure import apply, delete
from services.runtime.options import ServeOptions
from tests.gateway.builders import TOKENS, running_gateway
from tests.gateway.test_integration import EXAMPLE_CONFIG
from tests.integration.builders import eventually

pytestmark = pytest.mark.integration

CORA = "token-cora-team-c-admin"


def _cli(command: object, args: list[str], token: str, url: str) -> tuple[int, str]:
    env = {"MUSTER_URL": url, "MUSTER_TOKEN": token, "MUSTER_CLI_CONFIG": ""}
    result = CliRunner().invoke(command, args, env=env)  # type: ignore[arg-type]
    return result.exit_code, result.output


async def test_a_tenant_admin_stays_within_its_quota_on_kafka(gateway_options: ServeOptions, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens-with-tenant-admin.yaml"
    tokens.write_text(yaml.safe_dump([
        {"token": TOKENS["root"], "tenant": "platform", "user": "root", "role": "admin"},
        {"token": CORA, "tenant": "team-c", "user": "cora", "role": "tenant-admin"},
    ]), encoding="utf-8")
    async with running_gateway(replace(gateway_options, tokens_file=tokens)) as server:
        url = server.url or ""
        code, out = await asyncio.to_thread(_cli, apply, ["-f", str(EXAMPLE_CONFIG)], TOKENS["root"], url)
        assert code == 0, out
        await eventually(lambda: server.context is not None and server.context.config.queue("team-c") is not None,
                         within=20)
        # team-c may give its queues 16 A100s; the queue team-c takes 8. Two quick changes: the second is
        # checked against the first although the gateway may not have read it back yet.
        first = "kind: Queue\nname: c-1\ntenant: team-c\nquotas: {gpu:a100: {nominal: 8}}\n"
        path = tmp_path / "c-1.yaml"
        path.write_text(first, encoding="utf-8")
        code, out = await asyncio.to_thread(_cli, apply, ["-f", str(path)], CORA, url)
        assert (code, out.strip()) == (0, "queue/c-1 created"), out
        path.write_text(first.replace("c-1", "c-2").replace("nominal: 8", "nominal: 1"), encoding="utf-8")
        code, out = await asyncio.to_thread(_cli, apply, ["-f", str(path)], CORA, url)
        assert code == 1 and "422 tenant_quota_exceeded" in out and "already take 16" in out, out
        await eventually(lambda: server.context is not None and server.context.config.queue("c-1") is not None,
                         within=20)  # a deletion is checked against the view (404 for a queue it has not got)
        code, out = await asyncio.to_thread(_cli, delete, ["queue", "c-1"], CORA, url)
        assert code == 0, out
        code, out = await asyncio.to_thread(_cli, apply, ["-f", str(path)], CORA, url)
        assert (code, out.strip()) == (0, "queue/c-2 created"), out
        code, out = await asyncio.to_thread(_cli, delete, ["cohort", "vision"], CORA, url)
        assert code == 1 and "403 admin_required" in out, out
