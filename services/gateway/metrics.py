"""The gateway's Prometheus metrics, registered on the service's registry."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class GatewayMetrics:
    """Requests by route and code, submissions by outcome, the status view's size, recurring job firings."""

    def __init__(self, registry: CollectorRegistry, status_size: Callable[[], int],
                 recurring_count: Callable[[], int] | None = None) -> None:
        self.requests = Counter("muster_gateway_requests_total", "HTTP requests answered",
                                ["method", "route", "code"], registry=registry)
        self.latency = Histogram("muster_gateway_request_seconds", "HTTP request duration",
                                 ["method", "route"], registry=registry)
        self.submissions = Counter("muster_gateway_submissions_total", "job submissions by outcome and source",
                                   ["source", "outcome"], registry=registry)
        self.intents = Counter("muster_gateway_intents_total", "intents published onto the intents topic",
                               ["type"], registry=registry)
        self.config_changes = Counter("muster_gateway_config_changes_total", "configuration items published",
                                      ["kind", "origin"], registry=registry)
        self.status_jobs = Gauge("muster_gateway_status_view_jobs", "jobs in the gateway's status view",
                                 registry=registry)
        self.status_jobs.set_function(lambda: float(status_size()))
        self.recurring_firings = Counter("muster_gateway_recurring_firings_total",
                                         "firings of recurring jobs by outcome (submitted, already_submitted, "
                                         "missed, rejected, failed)", ["outcome"], registry=registry)
        self.firing_delay = Histogram("muster_gateway_recurring_firing_delay_seconds",
                                      "time from a firing time to the publication of its submission",
                                      buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300), registry=registry)
        self.recurring_jobs = Gauge("muster_gateway_recurring_jobs", "recurring jobs in the configuration",
                                    registry=registry)
        if recurring_count is not None:
            count = recurring_count
            self.recurring_jobs.set_function(lambda: float(count()))
