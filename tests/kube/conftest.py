"""The live target for the client-layer tests: the simulated cluster, or the real one named by KUBECONFIG.

Every test that takes ``target`` runs against kubesim, against the real control plane built from Go
modules (marked ``realkube``) and, marked ``cluster`` and only when ``KUBECONFIG`` is set, against the
cluster it names. Tests that need kubesim's fault controls call
``target.require_sim()`` and are skipped on the real cluster.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.kubesim import KubeSim
from services.runtime.kube import (
    NAMESPACES,
    Backoff,
    KubeRest,
    RetryPolicy,
    build_api_client,
    ensure_namespace,
)
from services.runtime.kube import delete as delete_object

CLUSTER_FILE = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"
TEST_RETRY = RetryPolicy(attempts=8, backoff=Backoff(initial=0.05, maximum=0.5))


@dataclass
class KubeTarget:
    rest: KubeRest
    namespace: str
    sim: Any | None  # a KubeSim when the target is simulated

    @property
    def simulated(self) -> bool:
        return self.sim is not None

    def require_sim(self) -> Any:
        if self.sim is None:
            pytest.skip("needs the simulated cluster's fault controls")
        return self.sim


def _cluster_small() -> Any:
    from services.spec.cluster_file import load_cluster_file

    return load_cluster_file(CLUSTER_FILE).clusters[0]


@pytest.fixture(params=["kubesim", pytest.param("real", marks=pytest.mark.realkube),
                        pytest.param("cluster", marks=pytest.mark.cluster)])
async def target(request: pytest.FixtureRequest) -> AsyncIterator[KubeTarget]:
    namespace = f"muster-test-{uuid.uuid4().hex[:8]}"
    if request.param in ("cluster", "real"):
        if request.param == "real":
            real = await request.getfixturevalue("real_kube").prepare(_cluster_small())
            api = await build_api_client(kubeconfig=str(real.admin_kubeconfig))
        else:
            if not os.environ.get("KUBECONFIG"):
                pytest.skip("real-cluster tests run only when KUBECONFIG is set")
            api = await build_api_client()
        rest = KubeRest(api, retry=TEST_RETRY)
        async with api:
            await ensure_namespace(rest, namespace)
            try:
                yield KubeTarget(rest, namespace, None)
            finally:
                await delete_object(rest, NAMESPACES, namespace)
        return
    sim = KubeSim.from_cluster_file(str(CLUSTER_FILE), profile="zero")
    async with sim.serve(host="127.0.0.1", port=0) as url:
        api = await build_api_client(url)
        async with api:
            rest = KubeRest(api, retry=TEST_RETRY, request_timeout=10.0)
            await ensure_namespace(rest, namespace)
            yield KubeTarget(rest, namespace, sim)
