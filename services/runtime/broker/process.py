"""``KafkaBroker``: one Apache Kafka JVM (KRaft, combined broker + controller) on loopback ports, alone or
as one node of a ``KafkaCluster``."""

from __future__ import annotations

import atexit
import json
import logging
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from services.runtime.broker import distribution as dist
from services.runtime.broker.probe import free_port, port_is_free, wait_until_ready
from services.runtime.broker.properties import (
    DEFAULT_JVM_OPTIONS,
    BrokerLayout,
    log4j_properties,
    new_cluster_id,
    render_properties,
    server_properties,
)
from services.runtime.broker.security import BrokerSecurity
from services.runtime.credentials import write_private

log = logging.getLogger(__name__)
PORT_ATTEMPTS = 3  # starts on freshly chosen ports when the chosen ones were taken meanwhile


class BrokerError(RuntimeError):
    """The broker could not be prepared, started or stopped."""


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def _quoted(argument: str) -> str:
    """One argument of a Java ``@argfile``: double-quoted, backslashes and quotes escaped."""
    return '"' + argument.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _set_parent_death_signal() -> None:
    """Ask Linux to SIGTERM the child when the spawning thread dies (best effort)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


class KafkaBroker:
    """An Apache Kafka node (broker and KRaft controller in one JVM) run from a directory of jars.

    ``log_dir`` is the broker's root directory (Kafka's data lives in ``log_dir/data``, its own logs
    in ``log_dir/logs``). Without one a temporary directory is made and removed by ``close()``.
    ``stop()`` keeps the data, so ``start()`` or ``restart()`` resumes on the same directory and port.
    Synchronous: from async code call it through ``asyncio.to_thread``.

    Alone it is a cluster of one. As node ``node_id`` of a cluster it is given its ports, the
    controller port of every node (``voters``) and the shared ``cluster_id``; ``KafkaCluster`` does that.
    """

    def __init__(
        self,
        *,
        log_dir: str | Path | None = None,
        distribution: dist.KafkaDistribution | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        controller_port: int | None = None,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
        overrides: Mapping[str, str] | None = None,
        startup_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        node_id: int = 1,
        voters: Mapping[int, int] | None = None,
        cluster_id: str | None = None,
        security: BrokerSecurity | None = None,
    ) -> None:
        if voters and (port is None or controller_port is None):
            raise BrokerError("a node of a cluster needs its port and controller port")
        self._node_id = node_id
        self._voters = dict(voters) if voters else None
        self._cluster_id = cluster_id
        self._security = security
        self._owns_dir = log_dir is None
        self._root = Path(log_dir) if log_dir is not None else None
        self._distribution = distribution
        self._host = host
        self._port = port
        self._controller_port = controller_port
        self._jvm_options = tuple(jvm_options)
        self._overrides = dict(overrides or {})
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._console: IO[bytes] | None = None
        self._lock = threading.RLock()
        self._atexit_registered = False

    @property
    def log_dir(self) -> Path:
        """The broker's root directory (exists once ``start()`` has run)."""
        if self._root is None:
            raise BrokerError("the broker has no directory before start()")
        return self._root

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the PLAINTEXT listener."""
        if self._port is None:
            raise BrokerError("the broker has no port before start()")
        return f"{self._host}:{self._port}"

    @property
    def security(self) -> BrokerSecurity | None:
        """Authentication and ACLs (None: an open PLAINTEXT listener)."""
        return self._security

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self.running and self._process is not None else None

    def start(self) -> Self:
        """Format the storage on first use, launch the JVM and wait for a metadata answer."""
        with self._lock:
            if self.running:
                return self
            chosen_here = self._port is None and self._controller_port is None
            for attempt in range(1, PORT_ATTEMPTS + 1):
                self.launch()
                try:
                    self._await_ready()
                    return self
                except (RuntimeError, TimeoutError) as exc:
                    exited = not self.running
                    self._terminate()
                    # a port picked as free can be taken before the JVM binds it (another process's
                    # outgoing connection, say): pick new ones and start again
                    if exited and chosen_here and attempt < PORT_ATTEMPTS and not self._ports_free():
                        log.warning("the broker exited while starting and a port it was given is taken now; "
                                    "starting it again on other ports (%d/%d)", attempt + 1, PORT_ATTEMPTS)
                        self._port = self._controller_port = None
                        continue
                    raise BrokerError(f"{exc}\n--- console ---\n{self.console_tail()}") from exc
            raise AssertionError("unreachable")

    def launch(self) -> Self:
        """``prepare()`` and launch the JVM, without waiting for it to answer (a cluster launches every
        node, then waits: a node needs a quorum to be ready)."""
        with self._lock:
            if self.running:
                return self
            layout, distribution = self.prepare()
            self._launch(layout, distribution)
            return self

    def prepare(self) -> tuple[BrokerLayout, dist.KafkaDistribution]:
        """Choose the ports, write the configuration and format the storage on first use (a JVM run of
        its own: a cluster prepares its nodes at once, on threads, and launches them from its own)."""
        with self._lock:
            if not self._atexit_registered:
                atexit.register(self.close)
                self._atexit_registered = True
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="muster-kafka-"))
            layout = BrokerLayout(self._root)
            distribution = self._distribution or dist.locate()
            self._distribution = distribution
            self._choose_ports(layout)
            self._write_config(layout)
            if not layout.is_formatted():
                self._format(layout, distribution)
            return layout, distribution

    def wait_ready(self) -> Self:
        """Wait until the launched node answers a metadata request that lists it; stop it if it does not."""
        try:
            self._await_ready()
        except (RuntimeError, TimeoutError) as exc:
            self._terminate()
            raise BrokerError(f"node {self._node_id}: {exc}\n--- console ---\n{self.console_tail()}") from exc
        return self

    def console_tail(self, limit: int = 3000) -> str:
        """The end of the JVM's captured output."""
        return "" if self._root is None else _tail(BrokerLayout(self._root).console_log, limit)

    def _await_ready(self) -> None:
        wait_until_ready(self.bootstrap, timeout=self._startup_timeout, alive=lambda: self.running,
                         node_id=self._node_id if self._voters else None,
                         security=self._security.probe_options() if self._security else None)

    def stop(self) -> None:
        """SIGTERM (controlled shutdown), wait, then SIGKILL; data and ports are kept."""
        with self._lock:
            self._terminate()

    def restart(self) -> Self:
        """Stop and start again on the same directory and port."""
        with self._lock:
            self._terminate()
            return self.start()

    def kill(self) -> None:
        """SIGKILL without a controlled shutdown (a crash); data and ports are kept."""
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                self._process.kill()
                self._process.wait()
            self._close_console()
            self._process = None

    def close(self) -> None:
        """Stop the broker and remove its directory if it was a temporary one."""
        with self._lock:
            self._terminate()
            if self._owns_dir and self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None
            if self._atexit_registered:
                atexit.unregister(self.close)
                self._atexit_registered = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        address = f"{self._host}:{self._port}" if self._port else "unstarted"
        return f"KafkaBroker({address}, log_dir={self._root}, running={self.running})"

    def _ports_free(self) -> bool:
        return all(port is not None and port_is_free(self._host, port) for port in (self._port, self._controller_port))

    def _choose_ports(self, layout: BrokerLayout) -> None:
        if self._port is None and layout.state_file.is_file():
            saved = json.loads(layout.state_file.read_text())
            if port_is_free(self._host, saved["port"]) and port_is_free(self._host, saved["controller_port"]):
                self._port, self._controller_port = int(saved["port"]), int(saved["controller_port"])
        if self._port is None:
            self._port = free_port(self._host)
        if self._controller_port is None:
            self._controller_port = free_port(self._host)
            while self._controller_port == self._port:
                self._controller_port = free_port(self._host)

    def _write_config(self, layout: BrokerLayout) -> None:
        assert self._port is not None and self._controller_port is not None
        layout.root.mkdir(parents=True, exist_ok=True)
        layout.app_log_dir.mkdir(exist_ok=True)
        security = self._security
        settings = server_properties(
            host=self._host,
            port=self._port,
            controller_port=self._controller_port,
            data_dir=layout.data_dir,
            node_id=self._node_id,
            voters=self._voters,
            overrides=self._overrides,
            listeners=security.listeners(self._host, self._port, self._controller_port) if security else None,
        )
        # the broker's password is in it when authenticated: readable by the owner alone
        write_private(layout.server_properties, render_properties(settings))
        layout.log4j_properties.write_text(log4j_properties(layout.app_log_dir))
        state = {"port": self._port, "controller_port": self._controller_port, "host": self._host}
        layout.state_file.write_text(json.dumps(state))

    def _java_command(self, distribution: dist.KafkaDistribution, layout: BrokerLayout) -> list[str]:
        return [
            distribution.java,
            *self._jvm_options,
            f"-Dlog4j.configuration=file:{layout.log4j_properties}",
            f"-Dkafka.logs.dir={layout.app_log_dir}",
            "-cp",
            distribution.classpath,
        ]

    def _format(self, layout: BrokerLayout, distribution: dist.KafkaDistribution) -> None:
        command: list[str] = [
            *self._java_command(distribution, layout),
            "kafka.tools.StorageTool", "format", "--ignore-formatted",
            "-t", self._cluster_id or new_cluster_id(), "-c", str(layout.server_properties),
            *(self._security.format_arguments() if self._security else []),
        ]  # fmt: skip
        java, arguments = command[0], command[1:]
        # the arguments (SCRAM passwords among them when authenticated) go through a Java argument file only
        # the owner may read, never onto the command line, which every local user can see in ps
        argfile = layout.root / "format.args"
        write_private(argfile, "\n".join(_quoted(a) for a in arguments) + "\n")
        try:
            result = subprocess.run([java, f"@{argfile}"], capture_output=True, text=True, check=False, timeout=120)
        finally:
            argfile.unlink(missing_ok=True)
        if result.returncode != 0:
            raise BrokerError(f"formatting {layout.data_dir} failed:\n{result.stdout}{result.stderr}")

    def _launch(self, layout: BrokerLayout, distribution: dist.KafkaDistribution) -> None:
        command = [*self._java_command(distribution, layout), "kafka.Kafka", str(layout.server_properties)]
        self._console = layout.console_log.open("ab")
        in_main_thread = threading.current_thread() is threading.main_thread()
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_set_parent_death_signal if in_main_thread else None,
        )

    def _terminate(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None
        self._close_console()

    def _close_console(self) -> None:
        if self._console is not None:
            self._console.close()
            self._console = None
