"""Prometheus metrics of the quota accountant, registered on the service's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from schemas.usage import BudgetStatusReported, BurstSpendReported, QueueUsageReported


class AccountantMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.gpu_seconds = Gauge(
            "muster_quota_accountant_gpu_seconds", "GPU-seconds accrued per queue (undecayed, settled and running)",
            ["queue"], registry=registry,
        )
        self.decayed = Gauge(
            "muster_quota_accountant_decayed_gpu_seconds", "Decayed GPU-seconds per queue (fair-share input)",
            ["queue"], registry=registry,
        )
        self.allocated = Gauge(
            "muster_quota_accountant_allocated_gpus", "GPUs held by admitted, unfinished attempts",
            ["queue", "resource"], registry=registry,
        )
        self.borrowed = Gauge(
            "muster_quota_accountant_borrowed_gpus", "GPUs held above the queue's nominal quota",
            ["queue", "resource"], registry=registry,
        )
        self.active_accruals = Gauge(
            "muster_quota_accountant_active_accruals", "Attempts currently accruing GPU time", registry=registry,
        )
        self.budget_used = Gauge(
            "muster_quota_accountant_budget_used_gpu_hours", "GPU-hours used in the tenant's current budget window",
            ["tenant", "window"], registry=registry,
        )
        self.budget_exhausted = Gauge(
            "muster_quota_accountant_budget_exhausted", "1 when the tenant's GPU-hour budget is used up",
            ["tenant"], registry=registry,
        )
        self.burst_gpu_hours = Gauge(
            "muster_quota_accountant_burst_gpu_hours",
            "GPU-hours of bought nodes charged to the queue in the current window of its burst budget",
            ["queue", "window"], registry=registry,
        )
        self.burst_money = Gauge(
            "muster_quota_accountant_burst_money", "Money of bought nodes charged to the queue in the current window",
            ["queue", "window"], registry=registry,
        )
        self.burst_nodes = Gauge(
            "muster_quota_accountant_burst_nodes_held", "Bought nodes of the queue not given back yet",
            ["queue"], registry=registry,
        )
        self.chargebacks = Counter(
            "muster_quota_accountant_chargebacks", "Chargeback records published, by outcome",
            ["outcome"], registry=registry,
        )
        self.role_gpu_seconds = Counter(
            "muster_quota_accountant_charged_gpu_seconds",
            "GPU-seconds of the attempts charged, by queue and role (a job of one role: role main)",
            ["queue", "role"], registry=registry,
        )
        self.reports = Counter(
            "muster_quota_accountant_reports", "Usage reports published, by message type",
            ["type"], registry=registry,
        )
        self.inputs = Counter(
            "muster_quota_accountant_inputs", "Input messages folded into the ledger, by message type",
            ["type"], registry=registry,
        )
        self.restored_charges = Counter(
            "muster_quota_accountant_restored_charges", "Settled attempts restored from the changelog tables on start",
            registry=registry,
        )
        self._resources: dict[str, set[str]] = {}

    def observe_queue(self, report: QueueUsageReported, gpu_seconds: float) -> None:
        queue = report.queue
        self.gpu_seconds.labels(queue).set(gpu_seconds)
        self.decayed.labels(queue).set(report.decayed_gpu_seconds)
        seen = self._resources.setdefault(queue, set())
        seen.update(report.allocated)
        for resource in seen:
            self.allocated.labels(queue, resource).set(report.allocated.get(resource, 0))
            self.borrowed.labels(queue, resource).set(report.borrowed.get(resource, 0))
        self.reports.labels(report.TYPE).inc()

    def observe_budget(self, report: BudgetStatusReported) -> None:
        self.budget_used.labels(report.tenant, report.window).set(report.gpu_hours_used)
        self.budget_exhausted.labels(report.tenant).set(1 if report.exhausted else 0)
        self.reports.labels(report.TYPE).inc()

    def observe_burst(self, report: BurstSpendReported) -> None:
        self.burst_gpu_hours.labels(report.queue, report.window).set(report.gpu_hours)
        self.burst_money.labels(report.queue, report.window).set(report.money)
        self.burst_nodes.labels(report.queue).set(report.nodes_held)
        self.reports.labels(report.TYPE).inc()
