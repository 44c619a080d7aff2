"""Fixtures of the gateway tests: the app on an in-memory publisher, an HTTP client of it, the app served;
the options of a gateway on the real broker."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from services.gateway.http import EmbeddedServer, bind, socket_url
from services.runtime.kafka import KafkaSettings
from services.runtime.options import ServeOptions
from tests.gateway.builders import TOKENS, Harness, harness, muster_config


@pytest.fixture
def gw() -> Harness:
    return harness()


@pytest.fixture
async def client(gw: Harness) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as c:
        yield c


@pytest.fixture
def gateway_options(registry_settings: KafkaSettings, tmp_path: Path) -> ServeOptions:
    """A gateway on the test module's broker: the test configuration (``muster_config``) in a file, and a
    tokens file for alice (a member of team-a) and root (the platform's administrator)."""
    config_file = tmp_path / "cluster.yaml"
    config_file.write_text(yaml.safe_dump(muster_config().model_dump(mode="json")), encoding="utf-8")
    tokens_file = tmp_path / "tokens.yaml"
    tokens_file.write_text(yaml.safe_dump([
        {"token": TOKENS["alice"], "tenant": "team-a", "user": "alice"},
        {"token": TOKENS["root"], "tenant": "platform", "user": "root", "role": "admin"},
    ]), encoding="utf-8")
    return ServeOptions(kafka=registry_settings, config_file=config_file, tokens_file=tokens_file)


@pytest.fixture
def served() -> Iterator[tuple[Harness, dict[str, str]]]:
    """The app on 127.0.0.1:<free port> in a thread of its own; the CLI's environment to reach it as alice."""
    import uvicorn

    gw = harness()
    sock = bind("127.0.0.1", 0)
    server = EmbeddedServer(uvicorn.Config(gw.app, lifespan="off", log_config=None, access_log=False))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        yield gw, {"MUSTER_URL": socket_url(sock), "MUSTER_TOKEN": TOKENS["alice"], "MUSTER_CLI_CONFIG": ""}
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
