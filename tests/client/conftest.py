"""Fixtures of the client tests: the gateway app (in-memory publisher and views, as in tests/gateway) reached
in process through httpx's ASGI transport, or served by uvicorn in the test's loop for the live stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn

from muster.client import AsyncClient
from services.gateway.dashboard_state import DashboardFeeds
from services.gateway.http import EmbeddedServer, bind, socket_url
from tests.gateway.builders import TOKENS, Harness, harness


@pytest.fixture
def gw() -> Harness:
    return harness()


@pytest.fixture
def feeds(gw: Harness) -> DashboardFeeds:
    """The change callbacks of the gateway's compacted tables: what they fold reaches the live streams too."""
    return gw.ctx.dashboard_feeds()


@pytest.fixture
async def alice(gw: Harness) -> AsyncIterator[AsyncClient]:
    """A team-a member's client of the app, in process."""
    async with AsyncClient("http://gateway", TOKENS["alice"], transport=httpx.ASGITransport(app=gw.app)) as client:
        yield client


@pytest.fixture
async def served(gw: Harness) -> AsyncIterator[str]:
    """The app served by uvicorn in this loop (streams need a real server); its URL."""
    sock = bind("127.0.0.1", 0)
    server = EmbeddedServer(uvicorn.Config(gw.app, lifespan="off", log_config=None, access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield socket_url(sock)
    finally:
        gw.ctx.dashboard.hub.close()
        server.should_exit = True
        await task
        sock.close()
