"""Consumer lag: how many records each consumer group of a service has not yet handled, per topic and
partition, as the Prometheus gauge ``muster_kafka_consumer_lag`` (the PrometheusRule's lag alert), and the
loops' record counters (``muster_kafka_dead_letters_total`` for the dead-letter alert).

The lag of a partition is its end offset (the last stable offset under ``read_committed``), asked of the
broker at every update so a consumer that has stopped fetching still shows its lag growing, minus the
offset after the last record the loop handled (or, before it handled one, its group's committed offset).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from services.runtime.kafka.loop import ConsumerLoop

log = logging.getLogger(__name__)

#: how often the lag gauge is refreshed (one ListOffsets request per loop)
LAG_INTERVAL_S = 15.0

class _LoopCounters(Collector):
    """The running loops' ``LoopStats`` as counters, read at scrape time."""

    def __init__(self, service: str, loops: Iterable[ConsumerLoop]) -> None:
        self._service = service
        self._loops = loops

    def collect(self) -> Iterator[CounterMetricFamily]:
        families = {
            "handled": CounterMetricFamily("muster_kafka_records_handled", "Records handled by a consumer loop",
                                           labels=["service", "group"]),
            "dead_lettered": CounterMetricFamily("muster_kafka_dead_letters",
                                                 "Records written to a dead-letter topic (<topic>.dlq)",
                                                 labels=["service", "group"]),
            "retries": CounterMetricFamily("muster_kafka_handler_retries", "Handler attempts that failed and were "
                                           "retried", labels=["service", "group"]),
        }
        totals: dict[tuple[str, str], dict[str, int]] = {}
        for loop in list(self._loops):
            counts = totals.setdefault((self._service, loop.group_id), {name: 0 for name in families})
            for name in families:
                counts[name] += getattr(loop.stats, name)
        for labels, counts in totals.items():
            for name, family in families.items():
                family.add_metric(list(labels), counts[name])
        yield from families.values()


class ConsumerLagMetrics:
    """Registers the lag gauge and the loop counters of ``service`` on ``registry``; ``run`` keeps the gauge
    current for the loops in ``loops`` (a live set: loops started later are picked up)."""

    def __init__(self, registry: CollectorRegistry, service: str, loops: set[ConsumerLoop],
                 *, interval_s: float = LAG_INTERVAL_S) -> None:
        self.service = service
        self.loops = loops
        self.interval_s = interval_s
        self.lag = Gauge("muster_kafka_consumer_lag",
                         "Records of a partition not yet handled by the service's consumer group "
                         "(end offset minus the offset after the last record handled)",
                         ["service", "group", "topic", "partition"], registry=registry)
        registry.register(_LoopCounters(service, loops))
        self._shown: set[tuple[str, str, str, str]] = set()

    async def update(self) -> None:
        shown: set[tuple[str, str, str, str]] = set()
        for loop in list(self.loops):
            try:
                lags = await loop.lag()
            except Exception as exc:  # a broker hiccup: keep the last values, try again next time
                log.debug("consumer lag of %s not read: %r", loop.group_id, exc)
                shown |= {labels for labels in self._shown if labels[1] == loop.group_id}
                continue
            for tp, lag in lags.items():
                labels = (self.service, loop.group_id, tp.topic, str(tp.partition))
                self.lag.labels(*labels).set(lag)
                shown.add(labels)
        for gone in self._shown - shown:  # revoked partitions, stopped loops
            with contextlib.suppress(KeyError):
                self.lag.remove(*gone)
        self._shown = shown

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.update()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval_s)
