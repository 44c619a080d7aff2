"""Replay of the queue manager's own books: GPUs held per node and per queue, admission by admission.

An admission holds ``pods x gpus`` from its ``JobAdmitted`` (resized by ``JobScaled``) until the earliest
sign it ended: a status of the job outside admitted/running/preempting for that attempt or a later one,
a newer attempt's admission, a rejection, or the attempt's ``JobStopped`` / ``RunSucceeded``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.config import MusterConfig, gpu_type_of
from schemas.decisions import JobAdmitted, JobRejected, JobScaled, PlacementPlan
from schemas.runs import JobStopped, RunSucceeded
from schemas.status import JobStatusChanged
from services.chaos.eventlog import LoggedEvent
from services.chaos.report import Violation

HOLDING_STATES = frozenset({"admitted", "running", "preempting"})


@dataclass
class Holding:
    attempt: int
    queue: str
    gpu_type: str
    gpus_per_pod: int
    placement: PlacementPlan


@dataclass
class Ledger:
    """Node capacities and queue limits of the cluster file; ``check`` replays a log against them."""

    node_gpus: dict[str, int]
    queue_limits: dict[tuple[str, str], int]  # (queue, gpu type) -> nominal + borrowing limit
    held: dict[str, Holding] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    peak_gpus: int = 0
    _reported: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def of(cls, config: MusterConfig, node_gpus: dict[str, int]) -> Ledger:
        limits: dict[tuple[str, str], int] = {}
        for queue in config.queues:
            for resource, quota in queue.quotas.items():
                gpu_type = gpu_type_of(resource)
                if gpu_type is not None and quota.borrowing_limit is not None:
                    limits[(queue.name, gpu_type)] = quota.nominal + quota.borrowing_limit
        return cls(node_gpus, limits)

    def replay(self, events: list[LoggedEvent]) -> list[Violation]:
        for event in events:
            self._apply(event)
        return self.violations

    def _apply(self, event: LoggedEvent) -> None:
        msg = event.envelope.payload
        if isinstance(msg, JobAdmitted):
            resources = msg.spec.resources
            self.held[msg.job_id] = Holding(msg.attempt, msg.queue, resources.gpu_type or "", resources.gpus,
                                            msg.placement)
            self._check(event)
        elif isinstance(msg, JobScaled):
            holding = self.held.get(msg.job_id)
            if holding is not None and holding.attempt == msg.attempt:
                holding.placement = msg.placement
                self._check(event)
        elif isinstance(msg, JobStatusChanged):
            holding = self.held.get(msg.job_id)
            if holding is not None and msg.state not in HOLDING_STATES and msg.attempt >= holding.attempt:
                del self.held[msg.job_id]
        elif isinstance(msg, JobRejected | JobStopped | RunSucceeded):
            holding = self.held.get(msg.job_id)
            if holding is not None and holding.attempt == msg.attempt:
                del self.held[msg.job_id]

    def _check(self, event: LoggedEvent) -> None:
        per_node: dict[str, int] = {}
        per_queue: dict[tuple[str, str], int] = {}
        for holding in self.held.values():
            for share in holding.placement.nodes:
                per_node[share.node] = per_node.get(share.node, 0) + share.pods * holding.gpus_per_pod
            key = (holding.queue, holding.gpu_type)
            per_queue[key] = per_queue.get(key, 0) + holding.placement.pods * holding.gpus_per_pod
        self.peak_gpus = max(self.peak_gpus, sum(per_node.values()))
        at = event.envelope.occurred_at.isoformat()
        for node, used in per_node.items():
            capacity = self.node_gpus.get(node, 0)
            if used > capacity and ("node", node) not in self._reported:
                self._reported.add(("node", node))
                jobs = sorted(j for j, h in self.held.items() if any(n.node == node for n in h.placement.nodes))
                self.violations.append(Violation("capacity", None, f"node {node}: {used} GPUs admitted of "
                                                 f"{capacity} at {at}; jobs {jobs}"))
        for (queue, gpu_type), used in per_queue.items():
            limit = self.queue_limits.get((queue, gpu_type))
            if limit is not None and used > limit and ("queue", queue) not in self._reported:
                self._reported.add(("queue", queue))
                self.violations.append(Violation("quota", None, f"queue {queue}: {used} {gpu_type} GPUs admitted, "
                                                 f"nominal + borrowing limit is {limit}, at {at}"))
