"""The real control planes of a test run: built once, started on first use, shared by every test.

Each test that uses one calls ``prepare`` first, which deletes the previous test's Jobs and pods and
registers exactly the nodes of the test's cluster, so tests do not see each other's objects.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from schemas.config import ClusterConfig
from services.kubereal.bootstrap import bootstrap, clear_workloads, register_nodes, wait_nodes_ready
from services.kubereal.build import Binaries, BuildError, build
from services.kubereal.controlplane import ControlPlane
from services.runtime.kube import KubeRest, build_api_client

SKIP_ENV = "MUSTER_SKIP_REAL_KUBE"
RESTART_WITHIN_S = 60.0


async def start_api_server(plane: ControlPlane, rest: KubeRest) -> None:
    """Start a killed kube-apiserver again and wait until it answers ``rest`` (from the thread that
    started the plane: the test's event loop)."""
    plane.restart("kube-apiserver")
    async with asyncio.timeout(RESTART_WITHIN_S):
        while True:
            try:
                await rest.request("GET", "/version", retry=False)
                return
            except Exception:
                await asyncio.sleep(0.2)


async def restart_api_server(plane: ControlPlane, rest: KubeRest) -> None:
    """A crash of kube-apiserver (SIGKILL) and its restart: every watch ends, and the new server's watch
    cache answers older resourceVersions with 410."""
    plane.kill("kube-apiserver")
    await start_api_server(plane, rest)


@dataclass
class RealCluster:
    """One started control plane and the kubeconfig of each Muster service (its ServiceAccount)."""

    plane: ControlPlane
    kubeconfigs: dict[str, Path]

    @property
    def admin_kubeconfig(self) -> Path:
        return self.plane.admin_kubeconfig

    def kubeconfig(self, service: str) -> Path:
        return self.kubeconfigs[service]


@dataclass
class RealKube:
    """Up to a few control planes (``cluster(0)``, ``cluster(1)``...) under ``root``."""

    root: Path
    binaries: Binaries
    started: dict[int, RealCluster] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path) -> RealKube:
        import os

        if os.environ.get(SKIP_ENV):
            pytest.skip(f"{SKIP_ENV} is set: the real control-plane tier is skipped")
        try:
            binaries = build(lambda m: print(f"[real control plane] {m}"))
        except BuildError as exc:
            if "toolchain" in str(exc):
                pytest.skip(str(exc))
            raise
        return cls(root, binaries)

    async def cluster(self, index: int = 0) -> RealCluster:
        if index not in self.started:
            plane = ControlPlane(self.root / f"cluster-{index}", self.binaries, name=f"real-{index}", profile="fast")
            # started on this (the main) thread, which outlives every test: the children end with the
            # thread that started them, and a worker thread of one test's event loop ends with that test
            plane.start()
            done = await bootstrap(plane, None)
            self.started[index] = RealCluster(plane, done.kubeconfigs)
        return self.started[index]

    async def prepare(self, cluster: ClusterConfig | None, index: int = 0) -> RealCluster:
        """The control plane ``index`` with no workloads left and exactly ``cluster``'s nodes, all Ready."""
        real = await self.cluster(index)
        api = await build_api_client(kubeconfig=str(real.admin_kubeconfig))
        async with api:
            rest = KubeRest(api)
            await clear_workloads(rest)
            names = await register_nodes(rest, cluster, exclusive=True)
            await wait_nodes_ready(rest, names)
        return real

    def close(self) -> None:
        for real in self.started.values():
            real.plane.close()
        self.started.clear()
