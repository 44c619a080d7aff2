"""The gateway's Prometheus metrics, registered on the service's registry."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class GatewayMetrics:
    """Requests by route and code, submissions by outcome, the status view's size."""

    def __init__(self, registry: CollectorRegistry, status_size: Callable[[], int]) -> None:
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
