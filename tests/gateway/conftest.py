"""Fixtures of the gateway tests: the app on an in-memory publisher, and an HTTP client of it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.gateway.builders import Harness, harness


@pytest.fixture
def gw() -> Harness:
    return harness()


@pytest.fixture
async def client(gw: Harness) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gw.app), base_url="http://gateway") as c:
        yield c
