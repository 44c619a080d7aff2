"""Child processes of ``muster up`` (and of the chaos harness, which starts the same system): one per
service, logs to files, restarted if they die."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from schemas.config import MusterConfig
from services.runtime.options import ClusterAccess


def stop_on_signals() -> asyncio.Event:
    """An event that SIGINT (Ctrl-C) or SIGTERM sets, in place of the default handlers."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class Child:
    """One ``muster serve <service>`` process."""

    name: str
    args: list[str]
    port: int
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Start the process; one still running under this handle is killed first, so two starts that
        race (a restart after an exit meeting a fault injector's restart) never leave one behind."""
        old = self.process
        if old is not None and old.returncode is None:
            old.kill()
            await old.wait()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "services.cli.main", "serve", *self.args, "--http-port", str(self.port),
                stdout=log, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL,
                env={**os.environ, **self.env},
            )
        finally:
            log.close()

    async def wait_healthy(self, timeout_s: float = 60.0) -> None:
        async with httpx.AsyncClient(timeout=2.0) as http:
            deadline = asyncio.get_running_loop().time() + timeout_s
            while True:
                if self.process is not None and self.process.returncode is not None:
                    raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log_path}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{self.url}/healthz")).status_code == 200:
                        return
                if asyncio.get_running_loop().time() > deadline:
                    raise RuntimeError(f"{self.name} did not become healthy in {timeout_s:.0f}s; see {self.log_path}")
                await asyncio.sleep(0.2)

    async def stop(self, grace_s: float = 10.0) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), grace_s)
        except TimeoutError:
            process.kill()
            await process.wait()


def keep_previous_logs(children: Sequence[Child]) -> None:
    """Start each child's log afresh, keeping the previous run's as ``<name>.log.1`` (one generation): a
    child's restarts within a run append to its log, runs do not pile up in one file."""
    for child in children:
        if child.log_path.exists():
            child.log_path.replace(child.log_path.with_name(child.log_path.name + ".1"))


async def supervise(children: list[Child], stop: asyncio.Event, notify: Callable[[str], None],
                    max_restarts: int = 5, checks: Sequence[Callable[[], None]] = ()) -> None:
    """Restart a child that exits on its own (with backoff), until ``stop`` is set.

    ``checks`` raise when something the children depend on is gone (a local Kubernetes control
    plane, say): that is reported and ends the supervision, as ``stop`` would."""
    while not stop.is_set():
        for check in checks:
            try:
                check()
            except Exception as exc:
                notify(f"stopping: {exc}")
                return
        for child in children:
            process = child.process
            if process is None or process.returncode is None:
                continue
            if child.restarts >= max_restarts:
                continue
            child.restarts += 1
            notify(f"{child.name} exited with {process.returncode}; restarting ({child.restarts}/{max_restarts}), "
                   f"log: {child.log_path}")
            await asyncio.sleep(min(30.0, 0.5 * 2**child.restarts))
            await child.start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


def service_children(cfg: MusterConfig, state_dir: Path, bootstrap: str, clusters: dict[str, ClusterAccess],
                     config_file: Path, gateway_port: int,
                     kafka_env: Mapping[str, Mapping[str, str]] | None = None) -> list[Child]:
    """The five services: one gateway, queue manager and accountant; a dispatcher + watcher per cluster.
    ``kafka_env``: per service (``gateway``, ``queue-manager``...) the ``MUSTER_KAFKA_*`` variables of its
    own Kafka principal, on an authenticated cluster."""
    kafka_env = kafka_env or {}

    def env_of(service: str) -> dict[str, str]:
        return {"MUSTER_KAFKA_BOOTSTRAP": bootstrap, **kafka_env.get(service, {})}

    logs = state_dir / "logs"
    children = [
        # the gateway also turns labelled, suspended batch/v1 Jobs of the first cluster into submissions
        Child("gateway", ["gateway", "--config", str(config_file), "--tokens", str(state_dir / "tokens.yaml"),
                          *next(iter(clusters.values())).args("gateway")],
              gateway_port, logs / "gateway.log", env_of("gateway")),
        Child("queue-manager", ["queue-manager"], free_port(), logs / "queue-manager.log", env_of("queue-manager")),
        Child("quota-accountant", ["quota-accountant"], free_port(), logs / "quota-accountant.log",
              env_of("quota-accountant")),
    ]
    for name, access in clusters.items():
        for service in ("dispatcher", "node-watcher"):
            env = env_of(service)
            if service == "node-watcher" and access.gpu_metrics:
                env["MUSTER_GPU_METRICS_URLS"] = access.gpu_metrics
            children.append(Child(f"{service}/{name}", [service, "--cluster", name, *access.args(service),
                                                        "--instance", name],
                                  free_port(), logs / f"{service}-{name}.log", env))
    return children
