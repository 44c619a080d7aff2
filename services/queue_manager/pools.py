"""Pools: the unit a queue-manager shard owns. Pure.

A pool is a named set of nodes selected by labels (``PoolConfig.node_labels``). Every node belongs to
exactly one pool: the first pool, by name, whose labels it carries, else ``default``. Every queue
belongs to exactly one pool: its ``pool``, else ``default``. A shard started with ``--pool a --pool b``
schedules the queues of pools a and b onto the nodes of pools a and b and ignores everything else, so
shards with disjoint pools never admit onto the same GPUs. Without ``--pool`` one instance owns every
pool. A queue's jobs run only on its own pool's nodes (the queue manager labels each node with its
pool for the core and adds the queue's pool to its jobs' node selector); a queue without a pool runs
on any node its shard owns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from schemas.config import QueueConfig
from services.spec.cluster_file import DEFAULT_POOL, node_pool

__all__ = ["DEFAULT_POOL", "Shard", "node_pool", "queue_pool"]


def queue_pool(queue: QueueConfig | None) -> str:
    """The pool of a queue; an unknown queue is the default pool's (whose shard rejects its jobs)."""
    return (queue.pool if queue is not None else None) or DEFAULT_POOL


@dataclass(frozen=True)
class Shard:
    """The pools one queue-manager instance owns; ``pools`` None means every pool (no sharding)."""

    pools: frozenset[str] | None = None

    @classmethod
    def of(cls, pools: Iterable[str]) -> Shard:
        names = frozenset(pools)
        return cls(names or None)

    @property
    def sharded(self) -> bool:
        return self.pools is not None

    def owns(self, pool: str) -> bool:
        return self.pools is None or pool in self.pools

    def describe(self) -> str:
        return "every pool" if self.pools is None else "pools " + ", ".join(sorted(self.pools))
