"""Fixtures of the hostile-input tests: the whole system on a broker of its own, with tenants whose
namespaces differ from their names and a queue that allows privileged pods."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from schemas.config import MusterConfig
from services.runtime.kafka import KafkaSettings
from tests.e2e.conftest import e2e_settings
from tests.e2e.system import System, running_system
from tests.gateway.conftest import client, gw
from tests.hostile.builders import hostile_config

__all__ = ["client", "e2e_settings", "gw"]


@pytest.fixture
def config() -> MusterConfig:
    return hostile_config()


@pytest.fixture
async def system(e2e_settings: KafkaSettings, config: MusterConfig, tmp_path: Path) -> AsyncIterator[System]:
    """Everything running; unlike the e2e fixture, dead letters and undecodable records are expected here."""
    async with running_system(e2e_settings, config, tmp_path) as running:
        yield running
