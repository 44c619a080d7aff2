"""Prometheus metrics of the node-state watcher."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge

from schemas.capacity import NodeState, NodeStateObserved
from schemas.envelope import Message
from schemas.runs import RunEvicted, RunFailed


class WatcherMetrics:
    """Node counts and GPUs per type as last published, messages sent, and the outbox backlog."""

    def __init__(self, registry: CollectorRegistry, cluster: str) -> None:
        self.cluster = cluster
        self.nodes = Gauge("muster_node_watcher_nodes", "Nodes by condition", ["cluster", "condition"],
                           registry=registry)
        self.gpus_allocatable = Gauge("muster_node_watcher_gpus_allocatable", "Allocatable GPUs by type",
                                      ["cluster", "gpu_type"], registry=registry)
        self.gpus_in_use = Gauge("muster_node_watcher_gpus_in_use", "GPUs held by unfinished pods, by type",
                                 ["cluster", "gpu_type"], registry=registry)
        self.messages = Counter("muster_node_watcher_messages_total", "Messages published, by type",
                                ["cluster", "type"], registry=registry)
        self.backlog = Gauge("muster_node_watcher_outbox_backlog", "Messages waiting to be published",
                             ["cluster"], registry=registry)
        self._gpu_types: set[str] = set()
        # a flap shorter than a scrape shows here, not in the node gauges
        self.not_ready = Counter("muster_node_watcher_not_ready_transitions", "Nodes that stopped being Ready",
                                 ["cluster"], registry=registry)
        self._healthy: dict[str, bool] = {}
        self.run_failures = Counter("muster_node_watcher_run_failures_total",
                                    "Failed runs reported, by classification (job, infrastructure)",
                                    ["cluster", "classification"], registry=registry)
        self.node_failures = Counter("muster_node_watcher_node_failures_total",
                                     "Infrastructure failures (evictions included) blamed on each node",
                                     ["cluster", "node"], registry=registry)

    @classmethod
    def unexported(cls) -> WatcherMetrics:
        """Metrics on a registry nobody serves: for a watcher embedded without a metrics endpoint."""
        return cls(CollectorRegistry(), "")

    def watch_backlog(self, size: Callable[[], int]) -> None:
        self.backlog.labels(self.cluster).set_function(lambda: float(size()))

    def sent(self, message: Message) -> None:
        self.messages.labels(self.cluster, message.TYPE).inc()
        if isinstance(message, NodeStateObserved):
            was = self._healthy.get(message.state.node, True)
            self._healthy[message.state.node] = message.state.healthy
            if was and not message.state.healthy:
                self.not_ready.labels(self.cluster).inc()
        elif isinstance(message, RunFailed):
            self.run_failures.labels(self.cluster, message.classification).inc()
            for node in message.nodes:
                self.node_failures.labels(self.cluster, node).inc()
        elif isinstance(message, RunEvicted):
            self.run_failures.labels(self.cluster, "infrastructure").inc()
            if message.node:
                self.node_failures.labels(self.cluster, message.node).inc()

    def capacity(self, states: Iterable[NodeState]) -> None:
        """Recompute the node and GPU gauges from the current node states."""
        counts: Tally[str] = Tally()
        allocatable: Tally[str] = Tally()
        in_use: Tally[str] = Tally()
        for s in states:
            counts["ready" if s.healthy else "not_ready"] += 1
            if not s.schedulable:
                counts["unschedulable"] += 1
            allocatable[s.gpu_type] += s.gpus_allocatable
            in_use[s.gpu_type] += s.gpus_in_use
        for cond in ("ready", "not_ready", "unschedulable"):
            self.nodes.labels(self.cluster, cond).set(counts[cond])
        self._gpu_types |= set(allocatable)
        for gpu_type in self._gpu_types:
            self.gpus_allocatable.labels(self.cluster, gpu_type).set(allocatable[gpu_type])
            self.gpus_in_use.labels(self.cluster, gpu_type).set(in_use[gpu_type])
