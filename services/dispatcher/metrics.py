"""Prometheus metrics of the dispatcher."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_HANDSHAKE_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class DispatcherMetrics:
    """Decisions handled, Jobs created, dispatch latency, preemption handshakes, restarts, failures."""

    def __init__(self, registry: CollectorRegistry, cluster: str) -> None:
        self.cluster = cluster
        self.decisions = Counter("muster_dispatcher_decisions_total", "Decisions handled, by type and outcome",
                                 ["cluster", "type", "outcome"], registry=registry)
        self.jobs_created = Counter("muster_dispatcher_jobs_created_total", "Job objects created or released",
                                    ["cluster"], registry=registry)
        self.dispatch_latency = Histogram("muster_dispatcher_dispatch_latency_seconds",
                                          "From the admission decision to its Job on the cluster", ["cluster"],
                                          buckets=_LATENCY_BUCKETS, registry=registry)
        self.preemptions = Counter("muster_dispatcher_preemptions_total", "Preemption handshakes finished",
                                   ["cluster", "checkpointed"], registry=registry)
        self.handshake_seconds = Histogram("muster_dispatcher_preemption_handshake_seconds",
                                           "From the preemption request to the Job's deletion", ["cluster"],
                                           buckets=_HANDSHAKE_BUCKETS, registry=registry)
        self.handshakes = Gauge("muster_dispatcher_handshakes_in_progress", "Preemption handshakes under way",
                                ["cluster"], registry=registry)
        self.restarts = Counter("muster_dispatcher_gang_restarts_total", "Whole-gang restarts after a pod failure",
                                ["cluster"], registry=registry)
        self.failures = Counter("muster_dispatcher_dispatch_failures_total", "DispatchFailed reports, by reason",
                                ["cluster", "reason"], registry=registry)
        self.pods_bound = Counter("muster_dispatcher_pods_bound_total", "Pods bound to their planned node",
                                  ["cluster"], registry=registry)
        self.pods_waiting = Gauge("muster_dispatcher_pods_waiting_for_room",
                                  "Pods planned onto a node whose GPUs are still held by finishing pods", ["cluster"],
                                  registry=registry)
        self.runs = Gauge("muster_dispatcher_runs", "Runs the dispatcher currently manages", ["cluster"],
                          registry=registry)

    @classmethod
    def unexported(cls) -> DispatcherMetrics:
        """Metrics on a registry nobody serves: for a dispatcher embedded without a metrics endpoint."""
        return cls(CollectorRegistry(), "")

    def decision(self, kind: str, outcome: str) -> None:
        self.decisions.labels(self.cluster, kind, outcome).inc()
