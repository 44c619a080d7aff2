"""``muster.config`` folded: the latest definition of every configuration item, by kind and name. Pure.

One fold for every service that follows the topic (gateway, queue manager, quota accountant). A
definition replaces the item of its kind and name; a tombstone or a ``ConfigItemDeleted`` removes the
item its key names (``<kind>/<name>``), an entry of the cluster file the fold started from included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from schemas.config import (
    ClusterConfig,
    CohortConfig,
    ConfigItemDeleted,
    GpuTypeConfig,
    MusterConfig,
    PoolConfig,
    PriorityClassConfig,
    QueueConfig,
    RecurringJobConfig,
    TenantConfig,
)
from schemas.envelope import Message

ConfigKind = Literal["queue", "cohort", "priority-class", "gpu-type", "pool", "tenant"]
ConfigItem = QueueConfig | CohortConfig | PriorityClassConfig | GpuTypeConfig | PoolConfig | TenantConfig
RECURRING_JOB = "recurring-job"
#: clusters with node groups that can grow (``ClusterDefined``): seeded from the gateway's file, not an API kind
CLUSTER = "cluster"


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """What one record changed: the item's kind and name, its new definition (None: deleted) and the
    definition it replaced (None: new)."""

    kind: str
    name: str
    item: ConfigItem | RecurringJobConfig | ClusterConfig | None
    previous: ConfigItem | RecurringJobConfig | ClusterConfig | None = None


class ConfigItems:
    """The current configuration items, one mapping per kind, optionally over a cluster file's."""

    def __init__(self, base: MusterConfig | None = None) -> None:
        self.queues: dict[str, QueueConfig] = {}
        self.cohorts: dict[str, CohortConfig] = {}
        self.priority_classes: dict[str, PriorityClassConfig] = {}
        self.gpu_types: dict[str, GpuTypeConfig] = {}
        self.pools: dict[str, PoolConfig] = {}
        self.tenants: dict[str, TenantConfig] = {}
        self.recurring_jobs: dict[str, RecurringJobConfig] = {}
        self.clusters: dict[str, ClusterConfig] = {}
        self._by_kind: dict[str, dict[str, Any]] = {
            "queue": self.queues, "cohort": self.cohorts, "priority-class": self.priority_classes,
            "gpu-type": self.gpu_types, "pool": self.pools, "tenant": self.tenants,
            RECURRING_JOB: self.recurring_jobs, CLUSTER: self.clusters,
        }
        if base is not None:
            for kind, items in (("queue", base.queues), ("cohort", base.cohorts),
                                ("priority-class", base.priority_classes), ("gpu-type", base.gpu_types),
                                ("pool", base.pools), ("tenant", base.tenants)):
                self._by_kind[kind].update((item.name, item) for item in items)

    def fold(self, key: str, message: Message | None) -> ConfigChange | None:
        """Fold one record of the topic (``message`` None: a tombstone of ``key``). Returns what changed:
        every definition counts, a deletion only when the item was there; None for anything else."""
        if message is None or isinstance(message, ConfigItemDeleted):
            kind, _, name = key.partition("/")
            items = self._by_kind.get(kind)
            previous = None if items is None else items.pop(name, None)
            return None if previous is None else ConfigChange(kind, name, None, previous)
        item = getattr(message, "item", None)
        kind = getattr(message, "KIND", "")
        items = self._by_kind.get(kind)
        if items is None or item is None:
            return None
        previous = items.get(item.name)
        items[item.name] = item
        return ConfigChange(kind, item.name, item, previous)

    def get(self, kind: str, name: str) -> Any:
        """The item of ``kind`` named ``name``, or None."""
        return self._by_kind.get(kind, {}).get(name)

    def of_kind(self, kind: str) -> list[Any]:
        """Every item of ``kind``, by name."""
        items = self._by_kind.get(kind, {})
        return [items[name] for name in sorted(items)]
