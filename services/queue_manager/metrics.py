"""Prometheus metrics of the queue manager, registered on the service's registry.

Counters are incremented as inputs and decisions happen (their labelled children are looked up once
and kept). The gauges that describe the whole state (queue depth, GPUs per queue, jobs holding
capacity) are computed when ``/metrics`` is scraped, from the state the service folds: nothing is
spent on them per cycle, however many queues there are. The scrape runs on the service's event loop,
so it never sees the state half-changed.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobRejected
from services.queue_manager.queue_state import Out, QueueState

_WAIT_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)


M = TypeVar("M", bound=MetricWrapperBase)


class _Children(Generic[M]):
    """A labelled metric's children by label value, looked up in prometheus_client once each."""

    def __init__(self, metric: M) -> None:
        self._metric = metric
        self._children: dict[str, M] = {}

    def __getitem__(self, label: str) -> M:
        child = self._children.get(label)
        if child is None:
            child = self._children[label] = self._metric.labels(label)
        return child


class StateGauges(Collector):
    """Queue depth, GPUs allocated per queue and jobs holding capacity, read from the state at scrape."""

    def __init__(self, state: Callable[[], QueueState]) -> None:
        self._state = state

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return [*self._families()]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        qs = self._state()
        depth_family, gpus_family, holding_family = self._families()
        depth = Tally(job.queue for job in qs.sched.pending.values())
        for queue in sorted(set(depth) | set(qs.config.queues)):
            depth_family.add_metric([queue], depth.get(queue, 0))
            gpus_family.add_metric([queue], qs.sched.queue_gpus(queue))
        holding_family.add_metric([], len(qs.sched.running))
        yield from (depth_family, gpus_family, holding_family)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily("muster_queue_manager_queue_depth", "Pending jobs per queue", labels=["queue"]),
            GaugeMetricFamily("muster_queue_manager_gpus_allocated", "GPUs held by admitted jobs per queue",
                              labels=["queue"]),
            GaugeMetricFamily("muster_queue_manager_jobs_holding", "Admitted, running or preempting jobs"),
        )


class QueueMetrics:
    def __init__(self, registry: CollectorRegistry, state: Callable[[], QueueState]) -> None:
        registry.register(StateGauges(state))
        self.admissions = _Children(Counter("muster_queue_manager_admissions", "Jobs admitted", ["queue"],
                                            registry=registry))
        self.preemptions = _Children(Counter("muster_queue_manager_preemptions", "Preemptions requested",
                                             ["reason"], registry=registry))
        self.rejections = _Children(Counter("muster_queue_manager_rejections", "Jobs rejected", ["reason"],
                                            registry=registry))
        self.cycle_seconds = Histogram("muster_queue_manager_cycle_seconds", "Scheduling cycle duration",
                                       registry=registry)
        self.wait_seconds = _Children(Histogram("muster_queue_manager_wait_seconds", "Submit to admission",
                                                ["queue"], buckets=_WAIT_BUCKETS, registry=registry))
        self.inputs = _Children(Counter("muster_queue_manager_inputs", "Inputs consumed", ["type"],
                                        registry=registry))

    def decisions(self, outs: Iterable[Out]) -> None:
        for out in outs:
            msg = out.message
            if isinstance(msg, JobAdmitted):
                self.admissions[msg.queue].inc()
            elif isinstance(msg, JobPreemptionRequested):
                self.preemptions[msg.reason].inc()
            elif isinstance(msg, JobRejected):
                self.rejections[msg.reason].inc()

    def waits(self, waits: Iterable[tuple[str, float]]) -> None:
        for queue, seconds in waits:
            self.wait_seconds[queue].observe(seconds)
