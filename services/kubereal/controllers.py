"""Workload controllers (JobSet, LeaderWorkerSet, KubeRay, Kubeflow Trainer) running beside a started
local control plane, from their builds (``controller_build``).

``start`` installs every controller's CRDs (server-side apply) and waits until they are Established,
registers each controller's webhook configurations pointed at its own port on 127.0.0.1, starts the
managers (``controller_launch`` says how each runs off-cluster) and waits until each is ready: its
health probe answers, Trainer's ClusterTrainingRuntimes from its module are applied (through its
validating webhook), and a server-side dry-run create of a small object of its kind passes every
webhook on the way. ``close`` removes the webhook configurations (so nothing calls a stopped
webhook) and stops the managers; the CRDs and the objects stay with the cluster's state.

Synchronous, like ``ControlPlane``: the managers get SIGTERM when the thread that started them ends.

    with ControlPlane(state, binaries) as plane:
        with Controllers(plane, build_controllers(resolve(["trainer"]))) as controllers:
            ...
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from services.kubereal.admin import AdminApi, ApiError, KubeObject
from services.kubereal.controller_build import ControllerBuild
from services.kubereal.controller_catalog import resolve
from services.kubereal.controller_launch import LAUNCHERS, PROBES, Launch, Site, webhook_identity
from services.kubereal.controlplane import HOST, ControlPlane, ControlPlaneError
from services.kubereal.manifests import load, render, webhook_configurations
from services.kubereal.pki import ensure_webhook_pki
from services.kubereal.processes import Process, tail
from services.runtime.broker.probe import free_port
from services.runtime.credentials import write_private

PORT_RACE_TRIES = 3


class ControllerError(ControlPlaneError):
    """A controller did not start or did not become ready."""


class Controllers:
    """The controllers of ``builds`` (name -> build; what a controller needs must be among them) on ``plane``."""

    def __init__(self, plane: ControlPlane, builds: Mapping[str, ControllerBuild], *,
                 ready_timeout: float = 180.0) -> None:
        self.names = resolve(builds)
        missing = [n for n in self.names if n not in builds]
        if missing:
            raise ValueError(f"controllers {sorted(builds)} also need {missing}: build them too")
        self.plane = plane
        self.builds = dict(builds)
        self.ready_timeout = ready_timeout
        self.processes: dict[str, Process] = {}
        self.sites: dict[str, Site] = {}
        #: the webhook configurations registered, to remove at ``close``: (kind, name)
        self.webhooks: list[tuple[str, str]] = []

    # -- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> Self:
        """Install, start and wait for every controller; on a failure stop what was started and raise."""
        if self.processes and all(p.alive for p in self.processes.values()):
            return self
        try:
            with self._api() as api:
                self._install_crds(api)
                for name in self.names:
                    self._launch(api, name)
                deadline = time.monotonic() + self.ready_timeout
                for name in self.names:
                    self._wait_ready(api, name, deadline)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Remove the webhook configurations (while the API server answers) and stop the managers."""
        if self.webhooks:
            try:
                with self._api(timeout=5.0) as api:
                    for kind, name in self.webhooks:
                        api.delete("admissionregistration.k8s.io/v1", kind, name)
            except (httpx.HTTPError, ApiError, OSError):
                pass  # the API server is gone: nothing will call the webhooks
            self.webhooks.clear()
        for name in reversed(list(self.processes)):
            self.processes[name].stop()
        self.processes.clear()

    def check_alive(self) -> None:
        """Raise if a controller has exited."""
        for process in self.processes.values():
            if not process.alive:
                raise ControllerError(f"{process.name} exited with {process.exit_code}; its log "
                                      f"({process.log_path}) ends:\n{tail(process.log_path)}")

    def log(self, name: str) -> Path:
        return self.plane.log_dir / f"{name}.log"

    # -- internals ---------------------------------------------------------------------------------

    def _api(self, timeout: float = 30.0) -> AdminApi:
        return AdminApi(self.plane.url, self.plane.admin_token, self.plane.ca_file, timeout=timeout)

    def _install_crds(self, api: AdminApi) -> None:
        names: list[str] = []
        for name in self.names:
            build = self.builds[name]
            for path in build.spec.crds:
                for crd in load(build.manifest(path)):
                    api.apply(crd)
                    names.append(crd["metadata"]["name"])
        late = api.wait_established(names, self.ready_timeout)
        if late is not None:
            raise ControllerError(f"CRD {late} not Established after {self.ready_timeout:.0f}s")

    def _site(self, name: str) -> Site:
        spec = self.builds[name].spec
        work = self.plane.state_dir / "controllers" / name
        pki = None
        if spec.webhooks:
            ca_name, dns_names = webhook_identity(name)
            pki = ensure_webhook_pki(work / "pki", ca_name, dns_names)
        return Site(binary=self.builds[name].binary, work_dir=work, kubeconfig=self.plane.admin_kubeconfig,
                    probe_port=self._free_port(), webhook_port=self._free_port(), pki=pki)

    def _free_port(self) -> int:
        """A free port that none of the plane's components or of these controllers was given."""
        taken = {*self.plane.ports.values(), *(p for s in self.sites.values() for p in (s.probe_port, s.webhook_port))}
        while (port := free_port(HOST)) in taken:
            pass
        return port

    def _launch(self, api: AdminApi, name: str) -> None:
        """Write the controller's files, apply what it needs, register its webhooks and start it."""
        site = self._site(name)
        launch: Launch = LAUNCHERS[name](site)
        site.tmp_dir.mkdir(parents=True, exist_ok=True)
        for path, data in launch.files.items():
            write_private(path, data.decode())
        for path, data in launch.if_missing.items():
            _write_if_missing(path, data)
        for obj in launch.objects:
            api.apply(obj)
        spec = self.builds[name].spec
        if spec.webhooks:
            assert site.pki is not None
            for config in webhook_configurations(self.builds[name].manifest(spec.webhooks), spec.name_prefix,
                                                 site.webhook_port, site.pki.ca_cert.read_bytes()):
                api.apply(config)
                entry = (config["kind"], config["metadata"]["name"])
                if entry not in self.webhooks:
                    self.webhooks.append(entry)
        self.sites[name] = site
        process = Process(name, launch.argv, self.log(name), env=launch.env, cwd=site.work_dir)
        process.start()
        self.processes[name] = process

    def _wait_ready(self, api: AdminApi, name: str, deadline: float) -> None:
        """Until the controller's probe answers, its extras are applied and a dry-run create passes."""
        for attempt in range(1, PORT_RACE_TRIES + 1):
            try:
                self._until(name, deadline, lambda: self._probe_ready(name))
                break
            except ControllerError as exc:
                if "address already in use" not in str(exc) or attempt == PORT_RACE_TRIES:
                    raise
                self._launch(api, name)  # a port was taken between choosing and binding it
        build = self.builds[name]
        extras = render(build.manifest(build.spec.extras)) if build.spec.extras else []
        for obj in extras:
            self._until(name, deadline, _passes(api.apply, obj))
        self._until(name, deadline, _passes(lambda probe: api.create(probe, dry_run=True), PROBES[name]))

    def _probe_ready(self, name: str) -> str | None:
        try:
            answer = httpx.get(f"http://{self.sites[name].probe_address}/readyz", timeout=2.0)
        except httpx.HTTPError as exc:
            return str(exc)
        return None if answer.status_code == 200 else f"readyz {answer.status_code}: {answer.text[:300]}"

    def _until(self, name: str, deadline: float, check: Callable[[], str | None]) -> None:
        """Poll ``check`` (None: done, else why not) until it passes; raise when the controller exits or
        the deadline passes."""
        while True:
            process = self.processes[name]
            if not process.alive:
                raise ControllerError(f"{name} exited with {process.exit_code} while starting; its log "
                                      f"({process.log_path}) ends:\n{tail(process.log_path)}")
            last = check()
            if last is None:
                return
            if time.monotonic() > deadline:
                raise ControllerError(f"{name} not ready after {self.ready_timeout:.0f}s ({last}); its log "
                                      f"({process.log_path}) ends:\n{tail(process.log_path)}")
            time.sleep(0.2)


def _passes(request: Callable[[KubeObject], object], obj: KubeObject) -> Callable[[], str | None]:
    """A check that sends ``obj`` with ``request``: None when the API server takes it, else its reason."""
    def check() -> str | None:
        try:
            request(obj)
        except (ApiError, httpx.HTTPError) as exc:
            return str(exc)
        return None
    return check


def _write_if_missing(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` unless something is there already (never changed or replaced)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    except OSError as exc:
        raise ControllerError(f"cannot create {path}, which the controller waits for: {exc}") from exc
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
