"""Prometheus metrics of the queue manager, registered on the service's registry."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobRejected
from services.queue_manager.state import Out, QueueState

_WAIT_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)


class QueueMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.depth = Gauge("muster_queue_manager_queue_depth", "Pending jobs per queue", ["queue"],
                           registry=registry)
        self.gpus = Gauge("muster_queue_manager_gpus_allocated", "GPUs held by admitted jobs per queue",
                          ["queue"], registry=registry)
        self.running = Gauge("muster_queue_manager_jobs_holding", "Admitted, running or preempting jobs",
                             registry=registry)
        self.admissions = Counter("muster_queue_manager_admissions", "Jobs admitted", ["queue"],
                                  registry=registry)
        self.preemptions = Counter("muster_queue_manager_preemptions", "Preemptions requested", ["reason"],
                                   registry=registry)
        self.rejections = Counter("muster_queue_manager_rejections", "Jobs rejected", ["reason"],
                                  registry=registry)
        self.cycle_seconds = Histogram("muster_queue_manager_cycle_seconds", "Scheduling cycle duration",
                                       registry=registry)
        self.wait_seconds = Histogram("muster_queue_manager_wait_seconds", "Submit to admission", ["queue"],
                                      buckets=_WAIT_BUCKETS, registry=registry)
        self.inputs = Counter("muster_queue_manager_inputs", "Inputs consumed", ["type"], registry=registry)

    def decisions(self, outs: Iterable[Out]) -> None:
        for out in outs:
            msg = out.message
            if isinstance(msg, JobAdmitted):
                self.admissions.labels(msg.queue).inc()
            elif isinstance(msg, JobPreemptionRequested):
                self.preemptions.labels(msg.reason).inc()
            elif isinstance(msg, JobRejected):
                self.rejections.labels(msg.reason).inc()

    def waits(self, waits: Iterable[tuple[str, float]]) -> None:
        for queue, seconds in waits:
            self.wait_seconds.labels(queue).observe(seconds)

    def gauges(self, qs: QueueState) -> None:
        depth = Tally(job.queue for job in qs.sched.pending.values())
        for queue in set(depth) | set(qs.config.queues):
            self.depth.labels(queue).set(depth.get(queue, 0))
            self.gpus.labels(queue).set(qs.sched.queue_gpus(queue))
        self.running.set(len(qs.sched.running))
