"""The real control plane of this folder's tests: ``examples/cluster-small.yaml``'s nodes as KWOK nodes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.runtime.kube import KubeRest, build_api_client, ensure_namespace
from services.spec.cluster_file import load_cluster_file
from tests.builders.realkube import RealCluster, RealKube

CLUSTER_FILE = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"
NAMESPACE = "team-a"

pytestmark = pytest.mark.realkube


@pytest.fixture
async def real(real_kube: RealKube) -> RealCluster:
    return await real_kube.prepare(load_cluster_file(CLUSTER_FILE).clusters[0])


@pytest.fixture
async def admin(real: RealCluster) -> AsyncIterator[KubeRest]:
    """The cluster administrator's client, with the tenant namespace in place."""
    api = await build_api_client(kubeconfig=str(real.admin_kubeconfig))
    async with api:
        rest = KubeRest(api, request_timeout=10.0)
        await ensure_namespace(rest, NAMESPACE)
        yield rest
