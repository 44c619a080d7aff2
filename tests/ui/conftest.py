"""Fixtures of the browser tests: the whole system (as tests/e2e starts it: a private broker, kubesim, the
five services) and Debian's headless Chromium. Skipped, saying why, only when Chromium is absent."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from schemas.config import MusterConfig
from services.runtime.kafka import KafkaSettings
from tests.builders.broker import client_settings, registry_broker_at
from tests.e2e.builders import gpu_cluster, muster_config
from tests.e2e.system import System, running_system
from tests.ui.browser import chromium_missing


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = chromium_missing()
    for item in items:
        if "tests/ui/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def ui_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaSettings]:
    """A broker of this test alone with every registry topic (``MUSTER_KAFKA_BOOTSTRAP`` to share one)."""
    with registry_broker_at(tmp_path_factory.mktemp("kafka")) as broker:
        yield client_settings(broker, "muster-ui")


@pytest.fixture
def ui_config() -> MusterConfig:
    """One cluster of two 8-GPU nodes in one rack; team-a and team-b each with 16 GPUs of nominal quota."""
    return muster_config([gpu_cluster("east", nodes=2, gpus_per_node=8)], nominal=16)


@pytest.fixture
async def system(ui_settings: KafkaSettings, ui_config: MusterConfig, tmp_path: Path) -> AsyncIterator[System]:
    async with running_system(ui_settings, ui_config, tmp_path) as running:
        yield running
