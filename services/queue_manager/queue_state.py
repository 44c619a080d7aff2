"""``QueueState``: everything the queue manager knows, folded from its inputs (no I/O here).

It wraps the core's ``SchedulerState`` with the per-job entries that become ``muster.jobs`` records,
the configuration view, the inputs already applied (for at-least-once redelivery) and the status
book. Handlers (``intents``, ``runs``, ``cycle_outcome``, ``recovery``) change it and return ``Out`` values:
the messages the shell must produce, records always before the decisions they explain.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from schemas.capacity import NodeRemoved, NodeState, NodeStateObserved
from schemas.config import ConfigItemDeleted, PoolDefined
from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobScaled, PreemptReasonName
from schemas.envelope import Message
from schemas.kube import POOL
from schemas.topics import DECISIONS_TOPIC, JOBS_TOPIC, STATUS_TOPIC
from schemas.usage import BudgetStatusReported, BurstSpendReported, QueueUsageReported
from services.core import Job, Node, SchedulerConfig, SchedulerState, queue_order
from services.queue_manager.config_view import ConfigView
from services.queue_manager.entries import JobEntry
from services.queue_manager.growth_view import GrowthView
from services.queue_manager.pools import Shard, node_pool
from services.queue_manager.status import StatusBook
from services.spec.config_items import CLUSTER
from services.spec.core_types import configured_job, node_from_state

#: How many applied input event ids are remembered to recognise a redelivered input.
APPLIED_MEMORY = 100_000
#: the label under which the core sees each node's pool (a queue's pool becomes its jobs' node selector)


class Out(NamedTuple):
    """One message to produce."""

    topic: str
    message: Message


@dataclass
class QueueState:
    sched: SchedulerState = field(default_factory=SchedulerState)
    config: ConfigView = field(default_factory=ConfigView)
    jobs: dict[str, JobEntry] = field(default_factory=dict)
    statuses: StatusBook = field(default_factory=StatusBook)
    dirty: dict[str, None] = field(default_factory=dict)  # jobs whose status may have changed
    applied: OrderedDict[str, None] = field(default_factory=OrderedDict)
    #: every node reported, owned or not: a pool defined later may move a node into or out of this shard
    nodes: dict[str, NodeState] = field(default_factory=dict)
    jobs_named: dict[str, dict[str, None]] = field(default_factory=dict)  # spec name -> job ids
    #: jobs waiting for dependencies, kept out of the scheduler (``dependencies``)
    held: dict[str, tuple[str, ...]] = field(default_factory=dict)  # job -> the ids and names it waits for
    held_unknown: dict[str, None] = field(default_factory=dict)  # ... of which some wait for an unknown job
    waiters: dict[str, dict[str, None]] = field(default_factory=dict)  # job id or name -> held jobs waiting
    woken: set[str] = field(default_factory=set)  # held jobs to judge again (what they wait for changed)
    growth: GrowthView = field(default_factory=GrowthView)  # node groups that can grow (``growth``)
    policy: SchedulerConfig = field(default_factory=SchedulerConfig)  # the scheduler's knobs

    @classmethod
    def for_shard(cls, shard: Shard, config: SchedulerConfig | None = None) -> QueueState:
        """The state of one shard, its queues ranked as ``config``'s policy orders them."""
        cfg = config or SchedulerConfig()
        qs = cls(sched=SchedulerState(half_life_s=cfg.fair_share_half_life_s, order=queue_order(cfg)), policy=cfg)
        qs.config.shard = shard
        return qs

    @property
    def shard(self) -> Shard:
        return self.config.shard

    def core_job(self, entry: JobEntry) -> Job:
        """The entry as the core sees it: its priority class's preemptibility, confined to its queue's pool."""
        spec = entry.spec
        return configured_job(entry.core_job(), class_preemptible=self.config.class_preemptible(spec.priority_class),
                              pool=self.config.pool_of_queue(spec.queue))

    # ------------------------------------------------------------ inputs already applied

    def seen(self, event_id: str) -> bool:
        return event_id in self.applied

    def remember(self, event_id: str | None) -> None:
        if event_id is None:
            return
        self.applied[event_id] = None
        self.applied.move_to_end(event_id)
        while len(self.applied) > APPLIED_MEMORY:
            self.applied.popitem(last=False)

    # ------------------------------------------------------------ outputs

    def record(self, entry: JobEntry) -> Out:
        """The entry changed: its new record (and, later, its status)."""
        self.dirty[entry.job_id] = None
        if entry.terminal:
            self.unhold(entry.job_id)
            self._wake(entry)
        return Out(JOBS_TOPIC, entry.recorded())

    # ------------------------------------------------------------ jobs and the jobs waiting for them

    def add(self, entry: JobEntry) -> None:
        """A job new to this state; jobs held for it (by id or name) are judged again."""
        self.jobs[entry.job_id] = entry
        self.jobs_named.setdefault(entry.spec.name, {})[entry.job_id] = None
        self._wake(entry)

    def _wake(self, entry: JobEntry) -> None:
        for key in (entry.job_id, entry.spec.name):
            self.woken.update(self.waiters.get(key, ()))

    def hold(self, job_id: str, keys: list[str], *, unknown: bool) -> None:
        """Keep a job out of the scheduler until one of ``keys`` (ids or names it waits for) changes."""
        self.unhold(job_id)
        self.held[job_id] = tuple(keys)
        if unknown:
            self.held_unknown[job_id] = None
        for key in keys:
            self.waiters.setdefault(key, {})[job_id] = None

    def unhold(self, job_id: str) -> None:
        keys = self.held.pop(job_id, None)
        if keys is None:
            return
        self.held_unknown.pop(job_id, None)
        for key in keys:
            waiting = self.waiters.get(key)
            if waiting is not None:
                waiting.pop(job_id, None)
                if not waiting:
                    del self.waiters[key]

    def admitted(self, entry: JobEntry) -> Out:
        assert entry.placement is not None
        return Out(
            DECISIONS_TOPIC,
            JobAdmitted(
                job_id=entry.job_id,
                attempt=entry.attempt,
                tenant=entry.submission.tenant,
                queue=entry.spec.queue,
                namespace=self.config.namespace(entry.submission.tenant),
                priority=entry.priority,
                replicas=entry.replicas,
                placement=entry.placement,
                borrowed=entry.borrowed,
                spec=entry.spec,
                restarts=entry.restarts,
                bought=entry.bought,
            ),
        )

    def scaled(self, entry: JobEntry) -> Out:
        """The job's new size and placement, as the entry holds them."""
        assert entry.placement is not None
        return Out(DECISIONS_TOPIC, JobScaled(job_id=entry.job_id, attempt=entry.attempt, replicas=entry.replicas,
                                              placement=entry.placement))

    def preemption(self, entry: JobEntry, grace_period_s: float, preemptor: str | None = None) -> Out:
        assert entry.placement is not None
        return Out(
            DECISIONS_TOPIC,
            JobPreemptionRequested(
                job_id=entry.job_id,
                attempt=entry.attempt,
                reason=cast(PreemptReasonName, entry.reason),
                grace_period_s=min(max(grace_period_s, 0.0), 3600.0),
                preemptor=preemptor,
                requeue=entry.requeue_on_stop,
                cluster=entry.placement.cluster,
            ),
        )

    def status_updates(self, now: float) -> list[Out]:
        """Statuses of the dirty jobs that differ from what was last published."""
        entries = [self.jobs[j] for j in self.dirty if j in self.jobs]
        self.dirty.clear()
        return [Out(STATUS_TOPIC, s) for s in self.statuses.changed(entries, now)]

    # ------------------------------------------------------------ compacted inputs

    def fold_config(self, key: str, message: Message | None, now: float = 0.0) -> bool:
        """``now``: when the service folds it (a growable group's nodes count as idle from then)."""
        changed = self.config.fold_into(key, message, self.sched)
        if key.startswith(f"{CLUSTER}/") or isinstance(message, PoolDefined) or key.startswith("pool/"):
            self.growth.fold_clusters(self.sched, self.config.clusters.values(), self.config.pools.values(),
                                      self.nodes, now)
            changed = changed or key.startswith(f"{CLUSTER}/")
        pools_changed = isinstance(message, PoolDefined) or (
            isinstance(message, ConfigItemDeleted) and message.kind == "pool") or (
            message is None and key.startswith("pool/"))
        if changed and pools_changed:
            for state in self.nodes.values():
                if not self.growth.held_back(self.sched, state, now):
                    self.place_node(state)
        return changed

    def fold_capacity(self, key: str, message: Message | None, now: float = 0.0) -> bool:
        """``now``: when the service folds it (a node of a growable group counts as idle from then)."""
        if isinstance(message, NodeStateObserved):
            state = message.state
            if not state.healthy and state.unhealthy_since is None:  # a report that does not say since when
                state = state.model_copy(update={"unhealthy_since": message.observed_at})
            self.nodes[state.node] = state
            if not self.growth.held_back(self.sched, state, now):
                self.place_node(state)
        elif isinstance(message, NodeRemoved):
            self.nodes.pop(message.node, None)
            self.growth.node_gone(self.sched, message.node, now)
        elif message is None and "/" in key:
            name = key.split("/", 1)[1]
            self.nodes.pop(name, None)
            self.growth.node_gone(self.sched, name, now)
        else:
            return False
        return True

    def core_node(self, state: NodeState) -> Node:
        """The node as the core sees it: labelled with its pool."""
        return node_from_state(state, {POOL: node_pool(state.labels, self.config.pools.values())})

    def place_node(self, state: NodeState) -> None:
        """Show the node to the core, labelled with its pool, if this shard owns that pool; else hide it."""
        node = self.core_node(state)
        if not self.shard.owns(node.labels[POOL]):
            self.sched.remove_node(state.node)
            return
        self.sched.upsert_node(node)

    def fold_usage(self, message: Message | None) -> bool:
        if isinstance(message, QueueUsageReported):
            self.sched.set_usage(message.queue, message.decayed_gpu_seconds, message.as_of.timestamp())
        elif isinstance(message, BudgetStatusReported):
            self.sched.set_budget_exhausted(message.tenant, message.exhausted)
        elif isinstance(message, BurstSpendReported):
            self.sched.growth.reported[message.queue] = (
                message.window_start.timestamp(), message.window_end.timestamp(), message.gpu_hours, message.money)
        else:
            return False
        return True
