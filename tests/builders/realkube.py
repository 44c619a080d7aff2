"""The real control planes of a test run: built once, started on first use, shared by every test.

Each test that uses one calls ``prepare`` first, which deletes the previous test's Jobs and pods and
registers exactly the nodes of the test's cluster, so tests do not see each other's objects.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from schemas.config import ClusterConfig
from services.kubereal.bootstrap import bootstrap, clear_workloads, register_nodes, wait_nodes_ready
from services.kubereal.build import Binaries, BuildError, build
from services.kubereal.controller_build import build_controllers
from services.kubereal.controller_catalog import ALL, resolve
from services.kubereal.controllers import Controllers
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
    """Up to a few control planes (``cluster(0)``, ``cluster(1)``...) under ``root``; on request, with the
    workload controllers (JobSet, LWS, KubeRay, Trainer) running beside one for the rest of the run."""

    root: Path
    binaries: Binaries
    started: dict[int, RealCluster] = field(default_factory=dict)
    controllers: dict[int, Controllers] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path) -> RealKube:
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

    async def with_controllers(self, index: int = 0) -> Controllers:
        """Every workload controller running on control plane ``index`` (started once, kept for the run).
        Skipped when they cannot be built, except under CI (``scripts/test`` builds them first)."""
        if index not in self.controllers:
            real = await self.cluster(index)
            try:
                builds = build_controllers(resolve([ALL]), lambda m: print(f"[controllers] {m}"))
            except BuildError as exc:
                if os.environ.get("CI"):
                    pytest.fail(f"the workload controllers could not be built under CI: {exc}")
                pytest.skip(f"the workload controllers could not be built: {exc}")
            # started on this (the main) thread, as the plane is: the managers end with the thread that started them
            self.controllers[index] = Controllers(real.plane, builds).start()
        controllers = self.controllers[index]
        controllers.check_alive()
        return controllers

    def close(self) -> None:
        for controllers in self.controllers.values():
            controllers.close()
        self.controllers.clear()
        for real in self.started.values():
            real.plane.close()
        self.started.clear()
