"""Fixtures of the end-to-end tests: the whole system on a broker of its own, started per test.

A module picks its cluster file by overriding the ``e2e_config`` fixture.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from schemas.config import MusterConfig
from services.runtime.kafka import KafkaSettings
from tests.builders.broker import client_settings, registry_broker_at
from tests.e2e.builders import gpu_cluster, muster_config
from tests.e2e.system import System, running_system


@pytest.fixture
def e2e_config() -> MusterConfig:
    """One cluster of two 8-GPU nodes; each tenant's queue holds all 16 GPUs."""
    return muster_config([gpu_cluster("east", nodes=2, gpus_per_node=8)], nominal=16)


@pytest.fixture
def e2e_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaSettings]:
    """A broker of this test alone, with every registry topic: no job of another test is in sight.

    With ``MUSTER_KAFKA_BOOTSTRAP`` set, that broker is used instead (its topics are then shared).
    """
    with registry_broker_at(tmp_path_factory.mktemp("kafka")) as broker:
        yield client_settings(broker, "muster-e2e")


@pytest.fixture(params=["kubesim", pytest.param("real", marks=pytest.mark.realkube)])
async def system(request: pytest.FixtureRequest, e2e_settings: KafkaSettings, e2e_config: MusterConfig,
                 tmp_path: Path) -> AsyncIterator[System]:
    """The whole system on kubesim, and again on a real control plane (etcd, kube-apiserver, KWOK nodes)."""
    real = request.getfixturevalue("real_kube") if request.param == "real" else None
    async with running_system(e2e_settings, e2e_config, tmp_path, real=real) as running:
        yield running
    assert running.log.dead_letters == [], "messages went to a dead-letter topic"
