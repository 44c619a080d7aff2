"""Queues, cohorts and tenants as the accountant needs them: the cluster file overlaid by ``muster.config``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from schemas.config import MusterConfig, QueueConfig, TenantConfig, is_gpu_resource
from schemas.envelope import Envelope
from services.quota_accountant.windows import WindowKind
from services.spec.config_items import ConfigItems


@dataclass(frozen=True)
class ConfigView:
    queues: dict[str, QueueConfig] = field(default_factory=dict)
    tenants: dict[str, TenantConfig] = field(default_factory=dict)

    def nominal(self, queue: str) -> dict[str, int]:
        """Nominal GPU quota per ``gpu:<type>`` resource (empty for an unknown queue)."""
        config = self.queues.get(queue)
        if config is None:
            return {}
        return {res: q.nominal for res, q in config.quotas.items() if is_gpu_resource(res)}

    def cohort(self, queue: str) -> str | None:
        config = self.queues.get(queue)
        return None if config is None else config.cohort

    def burst_window(self, queue: str) -> WindowKind | None:
        """The window of the queue's burst budget (None: the queue has none)."""
        config = self.queues.get(queue)
        if config is None or config.burst_budget is None:
            return None
        return config.burst_budget.window

    def budget(self, tenant: str) -> tuple[WindowKind, float | None]:
        """The tenant's budget window and GPU-hour budget (month and no budget when not configured)."""
        config = self.tenants.get(tenant)
        if config is None:
            return "month", None
        return config.budget_window, config.gpu_hour_budget


def build_view(base: MusterConfig | None, rows: Iterable[Envelope]) -> ConfigView:
    """The cluster file's queues and tenants, replaced or removed by the config topic's latest rows.

    ``rows`` are the config table's current envelopes (latest per key, so a ``ConfigItemDeleted``
    has already replaced the definition it deletes in the topic; a file entry it names is dropped).
    """
    config = ConfigItems(base)
    for envelope in rows:
        config.fold(envelope.payload.key(), envelope.payload)
    return ConfigView(config.queues, config.tenants)
