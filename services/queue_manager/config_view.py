"""The configuration the queue manager needs, folded from ``muster.config``: queues, cohorts,
priority classes, tenants and pools. Changes to queues and cohorts are pushed into the scheduler state;
a sharded instance pushes only the queues of the pools it owns, so borrowing never crosses shards."""

from __future__ import annotations

import logging

from schemas.config import QueueConfig
from schemas.envelope import Message
from services.core import SchedulerState
from services.queue_manager.pools import Shard, queue_pool
from services.spec.cluster_file import burst_budget
from services.spec.config_items import ConfigItems
from services.spec.core_types import cohort_spec, queue_spec

log = logging.getLogger(__name__)

#: kinds whose changes matter to scheduling (a cohort's deletion does not: the core keeps it)
_SCHEDULING_KINDS = frozenset({"queue", "cohort", "priority-class", "tenant", "pool"})


class ConfigView(ConfigItems):
    """The configuration items (``ConfigItems``), with the queues and cohorts pushed into the scheduler
    state as they change, and the shard that decides which queues this instance schedules."""

    def __init__(self, shard: Shard | None = None) -> None:
        super().__init__()
        self.shard = shard or Shard()

    def fold_into(self, key: str, message: Message | None, state: SchedulerState) -> bool:
        """Fold one config record (``message`` None: tombstone of ``key``); True when scheduling may change."""
        change = self.fold(key, message)
        if change is None or change.kind not in _SCHEDULING_KINDS:
            return False
        if change.kind in ("queue", "cohort") and change.item is None:
            # The core keeps a queue once defined: jobs already queued there stay accounted for.
            log.warning("deleting %s %r takes effect for new submissions only", change.kind, change.name)
            return change.kind == "queue"
        if change.kind == "queue":
            queue = self.queues[change.name]
            if self.shard.owns(queue_pool(queue)):
                state.set_queue(queue_spec(queue))
                state.set_burst_budget(queue.name, burst_budget(queue))
            elif isinstance(change.previous, QueueConfig) and self.shard.owns(queue_pool(change.previous)):
                log.warning("queue %r moved to pool %r, which this instance (%s) does not own: its jobs here "
                            "stay until a restart, new ones go to the pool's shard", change.name,
                            queue_pool(queue), self.shard.describe())
        elif change.kind == "cohort":
            state.set_cohort(cohort_spec(self.cohorts[change.name]))
        return True

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
