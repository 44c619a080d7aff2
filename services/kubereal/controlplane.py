"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and KWOK, from the binaries of ``services.kubereal.build``.

The API server serves TLS on 127.0.0.1 with RBAC on. One static admin token (group
``system:masters``) is what the control plane's own components, the bootstrap and the admin
kubeconfig use; Muster's services get ServiceAccount tokens instead (``services.kubereal.bootstrap``).
Everything lives in the state directory: certificates, etcd's data, logs, ports and kubeconfigs, so
starting again on the same directory keeps the cluster's objects.

Synchronous. The children get SIGTERM when the thread that started them ends (so nothing outlives an
interrupted run): call ``start`` from a thread that lives as long as the cluster should, e.g. the main
thread, or ``asyncio.to_thread`` inside an ``asyncio.run`` that lasts as long.
"""

from __future__ import annotations

import json
import secrets
import ssl
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import yaml

from services.kubereal.build import Binaries
from services.kubereal.pki import Pki, ensure_pki
from services.kubereal.processes import Process, tail
from services.runtime.broker.probe import free_port, port_is_free
from services.runtime.credentials import write_private

HOST = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
PORT_RACE_TRIES = 3
MUSTER_STAGES = Path(__file__).resolve().parent / "stages"
PROFILES = ("fast", "realistic")


class ControlPlaneError(RuntimeError):
    """A component did not start or did not become ready."""


def kubeconfig(server: str, ca_file: Path, user: str, token: str, cluster: str = "muster") -> dict[str, Any]:
    """A kubeconfig for ``server`` that authenticates ``user`` with a bearer ``token``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    }


class ControlPlane:
    """The five processes of one local cluster, in ``state_dir``."""

    def __init__(self, state_dir: Path, binaries: Binaries, *, name: str = "muster", profile: str = "fast",
                 startup_timeout: float = 90.0) -> None:
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, not {profile!r}")
        self.state_dir = state_dir.resolve()
        self.binaries = binaries
        self.name = name
        self.profile = profile
        self.startup_timeout = startup_timeout
        self.processes: dict[str, Process] = {}
        self.ports: dict[str, int] = {}
        self.pki: Pki | None = None
        self.admin_token = ""

    # -- where things are --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.ports['apiserver']}"

    @property
    def ca_file(self) -> Path:
        return self.state_dir / "pki" / "ca.crt"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def admin_config(self) -> dict[str, Any]:
        """The admin kubeconfig (as written to ``admin_kubeconfig``); after ``start``."""
        return self.kubeconfig_for("muster-admin", self.admin_token)

    def kubeconfig_for(self, user: str, token: str) -> dict[str, Any]:
        return kubeconfig(self.url, self.ca_file, user, token, cluster=self.name)

    # -- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> Self:
        """Start every component and wait until the API server is ready; idempotent. A port taken by
        another process between choosing and binding it (a race with anything else starting on the
        machine) is chosen again, up to ``PORT_RACE_TRIES`` times."""
        for attempt in range(1, PORT_RACE_TRIES + 1):
            try:
                return self._start_all()
            except ControlPlaneError as exc:
                if "address already in use" not in str(exc) or attempt == PORT_RACE_TRIES:
                    raise
                (self.state_dir / "ports.json").unlink(missing_ok=True)
        raise AssertionError("unreachable")

    def _start_all(self) -> Self:
        if self.processes and all(p.alive for p in self.processes.values()):
            return self
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.pki = ensure_pki(self.state_dir / "pki")
        self._choose_ports()
        self._write_auth()
        try:
            self._start("etcd", self._etcd_argv())
            self._wait_etcd()
            self._start("kube-apiserver", self._apiserver_argv())
            self._wait_apiserver()
            self._start("kube-controller-manager", self._controller_manager_argv())
            self._start("kube-scheduler", self._scheduler_argv())
            self._start("kwok", self._kwok_argv())
            time.sleep(0.5)
            self.check_alive()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every component (KWOK and the controllers first, etcd last); data is kept."""
        for name in ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            process = self.processes.get(name)
            if process is not None:
                process.stop()
        self.processes.clear()

    def kill(self, component: str) -> None:
        """SIGKILL one component at once (a crash, for fault tests); ``restart`` brings it back."""
        self.processes[component].kill()

    def restart(self, component: str) -> None:
        """Start a stopped or killed component again, with the same arguments and ports; returns at once
        (``wait_ready`` for the API server). Must be called from the thread that started the plane."""
        argv = {"etcd": self._etcd_argv, "kube-apiserver": self._apiserver_argv,
                "kube-controller-manager": self._controller_manager_argv, "kube-scheduler": self._scheduler_argv,
                "kwok": self._kwok_argv}[component]()
        if self.processes[component].alive:
            raise ControlPlaneError(f"{component} is running")
        self._start(component, argv)

    @property
    def etcd_url(self) -> str:
        return f"http://{HOST}:{self.ports['etcd']}"

    def check_alive(self) -> None:
        """Raise if a component has exited."""
        for process in self.processes.values():
            if not process.alive:
                raise ControlPlaneError(f"{process.name} exited with {process.exit_code}; its log "
                                        f"({process.log_path}) ends:\n{tail(process.log_path)}")

    # -- internals ---------------------------------------------------------------------------------

    def _start(self, name: str, argv: list[str]) -> None:
        process = Process(name, argv, self.log_dir / f"{name}.log")
        process.start()
        self.processes[name] = process

    def _choose_ports(self) -> None:
        """The ports of the last start when they are still free (etcd keeps its peer URL), else new ones."""
        path = self.state_dir / "ports.json"
        previous: dict[str, int] = json.loads(path.read_text()) if path.exists() else {}
        self.ports = {}
        for name in ("etcd", "etcd-peer", "apiserver", "kwok"):
            port = previous.get(name)
            self.ports[name] = port if port and port_is_free(HOST, port) else free_port(HOST)
        path.write_text(json.dumps(self.ports))

    def _write_auth(self) -> None:
        token_file = self.state_dir / "auth" / "admin-token"
        if not token_file.exists():
            write_private(token_file, secrets.token_urlsafe(32))
        self.admin_token = token_file.read_text().strip()
        write_private(self.state_dir / "auth" / "tokens.csv",
                      f'{self.admin_token},muster-admin,muster-admin,"system:masters"\n')
        write_private(self.admin_kubeconfig,
                      yaml.safe_dump(self.admin_config, sort_keys=False))

    def _etcd_argv(self) -> list[str]:
        client = f"http://{HOST}:{self.ports['etcd']}"
        peer = f"http://{HOST}:{self.ports['etcd-peer']}"
        return [
            str(self.binaries.path("etcd")), f"--name={self.name}", f"--data-dir={self.state_dir / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={self.name}={peer}", "--log-level=warn",
            # a local, disposable cluster: no fsync per write (etcd's own test setting), far less disk wait
            "--unsafe-no-fsync=true",
        ]

    def _apiserver_argv(self) -> list[str]:
        assert self.pki is not None
        return [
            str(self.binaries.path("kube-apiserver")),
            f"--etcd-servers=http://{HOST}:{self.ports['etcd']}",
            f"--bind-address={HOST}", f"--advertise-address={HOST}", f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={self.pki.server_cert}", f"--tls-private-key-file={self.pki.server_key}",
            f"--client-ca-file={self.pki.ca_cert}",
            f"--token-auth-file={self.state_dir / 'auth' / 'tokens.csv'}",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            f"--service-account-issuer={ISSUER}", f"--service-account-key-file={self.pki.sa_pub}",
            f"--service-account-signing-key-file={self.pki.sa_key}",
            "--service-account-max-token-expiration=8760h",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # the API server's own address is loopback, which an Endpoints object may not hold
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true", "--profiling=false", "--v=1",
        ]

    def _component_kubeconfig(self) -> str:
        return str(self.admin_kubeconfig)

    def _controller_manager_argv(self) -> list[str]:
        assert self.pki is not None
        return [
            str(self.binaries.path("kube-controller-manager")),
            f"--kubeconfig={self._component_kubeconfig()}", "--leader-elect=false", "--secure-port=0",
            f"--service-account-private-key-file={self.pki.sa_key}", f"--root-ca-file={self.pki.ca_cert}",
            "--use-service-account-credentials=false", f"--cluster-name={self.name}",
            # client rate limits as large clusters set them (the defaults, 20 QPS, pace the Job
            # controller's pod creation at 20 pods/s, far below what the API server takes)
            "--kube-api-qps=300", "--kube-api-burst=600",
            # Jobs synced at once (default 5): each sync creates its Job's pods one request at a time, so
            # five workers pace a burst of small gangs below what the API server takes
            "--concurrent-job-syncs=50",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--v=1",
        ]

    def _scheduler_argv(self) -> list[str]:
        return [
            str(self.binaries.path("kube-scheduler")),
            f"--kubeconfig={self._component_kubeconfig()}", "--leader-elect=false", "--secure-port=0", "--v=1",
            "--kube-api-qps=300", "--kube-api-burst=600",
        ]

    def _kwok_argv(self) -> list[str]:
        # KWOK's stages and Muster's, and its options (``kwok-options.yaml``: its workers)
        stages = [*self.binaries.kwok_stages(self.profile), *sorted(MUSTER_STAGES.glob("*.yaml"))]
        return [
            str(self.binaries.path("kwok")), f"--kubeconfig={self._component_kubeconfig()}",
            "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--server-address={HOST}:{self.ports['kwok']}", "--node-lease-duration-seconds=40",
            *(f"--config={s}" for s in stages),
        ]

    def _wait_etcd(self) -> None:
        self._poll(f"http://{HOST}:{self.ports['etcd']}/health", "etcd", ssl_context=None, headers={})

    def _wait_apiserver(self) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        self._poll(f"{self.url}/readyz", "kube-apiserver", ssl_context=context,
                   headers={"Authorization": f"Bearer {self.admin_token}"})

    def _poll(self, url: str, name: str, *, ssl_context: ssl.SSLContext | None, headers: dict[str, str]) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last = ""
        with httpx.Client(verify=ssl_context if ssl_context is not None else True, timeout=2.0) as http:
            while time.monotonic() < deadline:
                self.check_alive()
                try:
                    answer = http.get(url, headers=headers)
                    if answer.status_code == 200:
                        return
                    last = f"{answer.status_code}: {answer.text[:500]}"
                except httpx.HTTPError as exc:
                    last = str(exc)
                time.sleep(0.2)
        raise ControlPlaneError(f"{name} not ready after {self.startup_timeout:.0f}s ({last}); its log ends:\n"
                                f"{tail(self.processes[name].log_path)}")
