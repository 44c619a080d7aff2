"""``KafkaCluster``: N Apache Kafka nodes on this machine, each a broker and a KRaft controller (a
combined quorum of N voters), with replication defaults for N brokers.

Why combined: every node is a voter, so a cluster of three keeps its controller quorum (two of three)
and its partitions' in-sync replicas (``min.insync.replicas=2`` of 3) through the loss of any one node,
with three JVMs instead of six. Apache Kafka advises separate controllers for large production
clusters, where broker load must not delay the quorum; here the cluster is for one machine (development,
tests, benchmarks, chaos), and killing a node kills a broker and a controller at once, the harder case.
"""

from __future__ import annotations

import atexit
import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from services.runtime.broker import distribution as dist
from services.runtime.broker.probe import free_port, port_is_free
from services.runtime.broker.process import BrokerError, KafkaBroker
from services.runtime.broker.properties import CLUSTER_JVM_OPTIONS, BrokerLayout, new_cluster_id
from services.runtime.broker.security import BrokerSecurity

log = logging.getLogger(__name__)

MAX_BROKERS = 9
STATE_FILE = "cluster.json"


def _choose_ports(host: str, count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports


class KafkaCluster:
    """``brokers`` combined broker + controller nodes under ``log_dir/node-<id>`` (ids 1..N).

    The cluster id and every node's ports are kept in ``log_dir/cluster.json``, so ``stop()`` then
    ``start()`` resumes on the same data and addresses (new ports only if the old ones were taken
    meanwhile). Single nodes can be killed, stopped and started while the others run. Without
    ``log_dir`` a temporary directory is used and removed by ``close()``. Synchronous, like ``KafkaBroker``.
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        log_dir: str | Path | None = None,
        distribution: dist.KafkaDistribution | None = None,
        host: str = "127.0.0.1",
        jvm_options: Sequence[str] = CLUSTER_JVM_OPTIONS,
        overrides: Mapping[str, str] | None = None,
        startup_timeout: float = 180.0,
        stop_timeout: float = 30.0,
        security: BrokerSecurity | None = None,
    ) -> None:
        if not 1 <= brokers <= MAX_BROKERS:
            raise BrokerError(f"a cluster of {brokers} brokers: choose 1 to {MAX_BROKERS}")
        self._size = brokers
        self._owns_dir = log_dir is None
        self._root = Path(log_dir) if log_dir is not None else None
        self._distribution = distribution
        self._host = host
        self._jvm_options = tuple(jvm_options)
        self._overrides = dict(overrides or {})
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._security = security
        self._nodes: dict[int, KafkaBroker] = {}
        self._lock = threading.RLock()
        self._atexit_registered = False

    @property
    def size(self) -> int:
        """The number of nodes (brokers)."""
        return self._size

    @property
    def security(self) -> BrokerSecurity | None:
        """Authentication and ACLs of every node (None: open PLAINTEXT listeners)."""
        return self._security

    @property
    def log_dir(self) -> Path:
        if self._root is None:
            raise BrokerError("the cluster has no directory before start()")
        return self._root

    @property
    def nodes(self) -> tuple[KafkaBroker, ...]:
        """The nodes by id order (empty before ``start()``)."""
        return tuple(self._nodes[i] for i in sorted(self._nodes))

    def node(self, node_id: int) -> KafkaBroker:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise BrokerError(f"no node {node_id} in this cluster of {self._size}") from None

    @property
    def bootstrap(self) -> str:
        """Every node's ``host:port``, comma-separated (a client reaches the cluster through any of them)."""
        if not self._nodes:
            raise BrokerError("the cluster has no address before start()")
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def running(self) -> bool:
        """Whether every node runs."""
        return bool(self._nodes) and all(node.running for node in self._nodes.values())

    def start(self) -> Self:
        """Launch every node that is not running, then wait until each has registered with the quorum."""
        with self._lock:
            if not self._atexit_registered:
                atexit.register(self.close)
                self._atexit_registered = True
            if not self._nodes:
                self._nodes = self._make_nodes()
            waiting = [node for node in self.nodes if not node.running]
            try:
                self._each(waiting, KafkaBroker.prepare)  # formatting is a JVM run per node: at once
                for node in waiting:
                    node.launch()  # from this thread: a JVM dies with the thread that started it
                self._each(waiting, KafkaBroker.wait_ready)
            except BrokerError:
                self._each(self.nodes, KafkaBroker.stop)
                raise
            return self

    def stop(self) -> None:
        """Stop every node (SIGTERM to all at once, so each controlled shutdown finds a quorum), keeping data."""
        with self._lock:
            self._each(self.nodes, KafkaBroker.stop)

    def restart(self) -> Self:
        """Stop every node and start the cluster again on the same directories and ports."""
        with self._lock:
            self.stop()
            return self.start()

    def kill(self) -> None:
        """SIGKILL every node (a power cut); data and ports are kept."""
        with self._lock:
            for node in self.nodes:
                node.kill()

    def active_controller(self) -> int | None:
        """The node the running nodes last saw lead the controller quorum (the active controller), read
        from their KRaft ``quorum-state`` files (the highest epoch wins); None while no leader is known."""
        best: tuple[int, int] | None = None
        for node in self.nodes:
            if not node.running:
                continue
            path = BrokerLayout(node.log_dir).data_dir / "__cluster_metadata-0" / "quorum-state"
            try:
                state = json.loads(path.read_text())
                leader, epoch = int(state["leaderId"]), int(state["leaderEpoch"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if leader > 0 and (best is None or epoch > best[1]):
                best = (leader, epoch)
        return None if best is None else best[0]

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node (a crash); the others keep running."""
        self.node(node_id).kill()

    def stop_node(self, node_id: int) -> None:
        """Stop one node with a controlled shutdown (its leaderships move first)."""
        self.node(node_id).stop()

    def start_node(self, node_id: int) -> KafkaBroker:
        """Start one node again on its directory and ports and wait until it has registered."""
        node = self.node(node_id)
        with self._lock:
            if not node.running:
                node.launch().wait_ready()
        return node

    def close(self) -> None:
        """Stop every node; remove the directory if it was a temporary one."""
        with self._lock:
            if self._owns_dir:
                self.kill()  # the data goes anyway: no controlled shutdown to wait for
            self._each(self.nodes, KafkaBroker.close)
            if self._owns_dir and self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None
                self._nodes = {}
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
        address = self.bootstrap if self._nodes else "unstarted"
        return f"KafkaCluster({self._size} brokers, {address}, log_dir={self._root}, running={self.running})"

    def _each(self, nodes: Sequence[KafkaBroker], action: Callable[[KafkaBroker], Any]) -> None:
        """``action`` on every node at once (a node's start or stop waits on the others)."""
        if not nodes:
            return
        with ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="kafka-node") as pool:
            failures = [f.exception() for f in [pool.submit(action, node) for node in nodes]]
        errors = [e for e in failures if e is not None]
        if errors:
            raise BrokerError("\n".join(str(e) for e in errors)) from errors[0]

    def _make_nodes(self) -> dict[int, KafkaBroker]:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="muster-kafka-cluster-"))
        self._root.mkdir(parents=True, exist_ok=True)
        state = self._state()
        ids = range(1, self._size + 1)
        ports = [(state["nodes"][str(i)]["port"], state["nodes"][str(i)]["controller_port"]) for i in ids]
        if not all(port_is_free(self._host, p) for pair in ports for p in pair):
            fresh = _choose_ports(self._host, 2 * self._size)
            ports = [(fresh[2 * k], fresh[2 * k + 1]) for k in range(self._size)]
            log.info("the cluster's ports were taken; it starts on new ones")
        state["nodes"] = {str(i): {"port": p, "controller_port": c} for i, (p, c) in zip(ids, ports, strict=True)}
        (self._root / STATE_FILE).write_text(json.dumps(state, indent=1))
        voters = {i: c for i, (_, c) in zip(ids, ports, strict=True)}
        distribution = self._distribution or dist.locate()
        return {
            i: KafkaBroker(
                log_dir=self._root / f"node-{i}", distribution=distribution, host=self._host, port=p,
                controller_port=c, jvm_options=self._jvm_options, overrides=self._overrides,
                startup_timeout=self._startup_timeout, stop_timeout=self._stop_timeout, node_id=i,
                voters=voters, cluster_id=state["cluster_id"], security=self._security,
            )
            for i, (p, c) in zip(ids, ports, strict=True)
        }

    def _state(self) -> dict[str, Any]:
        """The saved cluster id and ports, or new ones for a new cluster."""
        assert self._root is not None
        path = self._root / STATE_FILE
        if path.is_file():
            state: dict[str, Any] = json.loads(path.read_text())
            if state.get("brokers") != self._size:
                raise BrokerError(f"{self._root} holds a cluster of {state.get('brokers')} brokers, not "
                                  f"{self._size}; use another directory or the same size")
            return state
        fresh = _choose_ports(self._host, 2 * self._size)
        nodes = {str(i): {"port": fresh[2 * (i - 1)], "controller_port": fresh[2 * i - 1]}
                 for i in range(1, self._size + 1)}
        return {"cluster_id": new_cluster_id(), "brokers": self._size, "host": self._host, "nodes": nodes}
