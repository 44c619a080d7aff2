"""Fixtures of the gateway tests: the app on an in-memory publisher, an HTTP client of it, the app served."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from services.gateway.http import EmbeddedServer, bind, socket_url
from tests.gateway.builders import TOKENS, Harness, harness


@pytest.fixture
def gw() -> Harness:
    return harness()


@pytest.fixture
async def client(gw: Harness) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as c:
        yield c


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
