"""Facts derived from the node set alone, kept on the state between cycles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .capacity import CapacityIndex
from .model import Job

#: (GPU type, the job's node selector as a sorted tuple)
ScopeKey = tuple[str, tuple[tuple[str, str], ...]]
#: (job, GPU type) -> the nodes of the type its node selector allows (None: every node of the type)
ScopeOf = Callable[[Job, str], "frozenset[str] | None"]


@dataclass(slots=True, eq=False)
class NodeFacts:
    """What the cycles work out from the nodes' static shape only (never from usage or health): a job's pool
    under its node selector, whether a request could ever be placed, the cluster as if empty.

    This is the one place a cycle writes to the ``SchedulerState`` it is given, and the reason it may: each
    fact is a function of the node set alone, so which cycle works it out first cannot change a decision.
    The state drops them all (a new ``NodeFacts``) whenever a node is added, removed or changes shape
    (``SchedulerState.node_version``)."""

    scopes: dict[ScopeKey, frozenset[str]] = field(default_factory=dict)  # -> nodes a selector allows
    #: (request shape, pods) -> whether the job could run on the node set once everything else ended
    feasible: dict[tuple[tuple[object, ...], int], bool] = field(default_factory=dict)
    empty: CapacityIndex | None = None  # every node healthy and empty
