"""Fixtures: a served KubeSim (zero profile) and a JSON client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from services.kubesim import KubeSim
from tests.kubesim.builders import CLUSTER_FILE, Api


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    kube = KubeSim.from_cluster_file(CLUSTER_FILE, profile="zero", bookmark_interval=0.2)
    async with kube.serve() as url:
        kube.url = url
        yield kube


@pytest.fixture
async def api(sim: KubeSim) -> AsyncIterator[Api]:
    assert sim.url is not None
    async with aiohttp.ClientSession() as session:
        yield Api(session, sim.url)
