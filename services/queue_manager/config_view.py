"""The configuration the queue manager needs, folded from ``muster.config``: queues, cohorts,
priority classes and tenants. Changes to queues and cohorts are pushed into the scheduler state."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from schemas.config import (
    CohortDefined,
    ConfigItemDeleted,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    TenantConfig,
    TenantDefined,
)
from schemas.envelope import Message
from services.core import SchedulerState
from services.spec.core_types import cohort_spec, queue_spec

log = logging.getLogger(__name__)


@dataclass
class ConfigView:
    """Latest definition per configuration item, keyed by name."""

    queues: dict[str, QueueConfig] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClassConfig] = field(default_factory=dict)
    tenants: dict[str, TenantConfig] = field(default_factory=dict)

    def fold(self, key: str, message: Message | None, state: SchedulerState) -> bool:
        """Fold one config record (``message`` None: tombstone of ``key``); True when anything changed."""
        if message is None:
            kind, _, name = key.partition("/")
            return self._delete(kind, name)
        if isinstance(message, QueueDefined):
            self.queues[message.item.name] = message.item
            state.set_queue(queue_spec(message.item))
        elif isinstance(message, CohortDefined):
            state.set_cohort(cohort_spec(message.item))
        elif isinstance(message, PriorityClassDefined):
            self.priority_classes[message.item.name] = message.item
        elif isinstance(message, TenantDefined):
            self.tenants[message.item.name] = message.item
        elif isinstance(message, ConfigItemDeleted):
            return self._delete(message.kind, message.name)
        else:
            return False
        return True

    def _delete(self, kind: str, name: str) -> bool:
        if kind == "priority-class":
            return self.priority_classes.pop(name, None) is not None
        if kind == "tenant":
            return self.tenants.pop(name, None) is not None
        if kind in ("queue", "cohort"):
            # The core keeps a queue once defined: jobs already queued there stay accounted for.
            log.warning("deleting %s %r takes effect for new submissions only", kind, name)
            if kind == "queue":
                return self.queues.pop(name, None) is not None
        return False

    def priority_value(self, name: str) -> int | None:
        pc = self.priority_classes.get(name)
        return None if pc is None else pc.value

    def class_preemptible(self, name: str) -> bool:
        pc = self.priority_classes.get(name)
        return True if pc is None else pc.preemptible

    def namespace(self, tenant: str) -> str:
        """The Kubernetes namespace of a tenant's jobs (the tenant's name when it is not configured)."""
        t = self.tenants.get(tenant)
        return tenant if t is None else t.namespace
