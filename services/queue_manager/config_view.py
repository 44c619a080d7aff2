"""The configuration the queue manager needs, folded from ``muster.config``: queues, cohorts,
priority classes, tenants and pools. Changes to queues and cohorts are pushed into the scheduler state;
a sharded instance pushes only the queues of the pools it owns, so borrowing never crosses shards."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from schemas.config import (
    CohortDefined,
    ConfigItemDeleted,
    PoolConfig,
    PoolDefined,
    PriorityClassConfig,
    PriorityClassDefined,
    QueueConfig,
    QueueDefined,
    TenantConfig,
    TenantDefined,
)
from schemas.envelope import Message
from services.core import SchedulerState
from services.queue_manager.pools import Shard, queue_pool
from services.spec.core_types import cohort_spec, queue_spec

log = logging.getLogger(__name__)


@dataclass
class ConfigView:
    """Latest definition per configuration item, keyed by name."""

    queues: dict[str, QueueConfig] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClassConfig] = field(default_factory=dict)
    tenants: dict[str, TenantConfig] = field(default_factory=dict)
    pools: dict[str, PoolConfig] = field(default_factory=dict)
    shard: Shard = field(default_factory=Shard)

    def fold(self, key: str, message: Message | None, state: SchedulerState) -> bool:
        """Fold one config record (``message`` None: tombstone of ``key``); True when anything changed."""
        if message is None:
            kind, _, name = key.partition("/")
            return self._delete(kind, name)
        if isinstance(message, QueueDefined):
            before = self.queues.get(message.item.name)
            self.queues[message.item.name] = message.item
            if self.shard.owns(queue_pool(message.item)):
                state.set_queue(queue_spec(message.item))
            elif before is not None and self.shard.owns(queue_pool(before)):
                log.warning("queue %r moved to pool %r, which this instance (%s) does not own: its jobs here "
                            "stay until a restart, new ones go to the pool's shard", message.item.name,
                            queue_pool(message.item), self.shard.describe())
        elif isinstance(message, PoolDefined):
            self.pools[message.item.name] = message.item
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
        if kind == "pool":
            return self.pools.pop(name, None) is not None
        if kind in ("queue", "cohort"):
            # The core keeps a queue once defined: jobs already queued there stay accounted for.
            log.warning("deleting %s %r takes effect for new submissions only", kind, name)
            if kind == "queue":
                return self.queues.pop(name, None) is not None
        return False

    def owns_queue(self, name: str) -> bool:
        """Whether this instance schedules the jobs of queue ``name`` (an unknown queue is the default pool's)."""
        return self.shard.owns(queue_pool(self.queues.get(name)))

    def pool_of_queue(self, name: str) -> str | None:
        """The pool a queue's jobs are confined to, None when it names none."""
        queue = self.queues.get(name)
        return None if queue is None else queue.pool

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
