"""How many copies of each partition Muster's topics keep, chosen from the cluster's size, and which
settings are refused because a single broker failure would lose acknowledged records or stop writes.

Muster's producers write with ``acks=all`` (``EnvelopeProducer``): a record is acknowledged once every
in-sync replica has it, and ``min.insync.replicas`` is the fewest in-sync replicas a write accepts.
Replication factor 3 with ``min.insync.replicas=2`` is the production setting: one broker may fail or be
restarted while every acknowledged record keeps a second copy and writes go on.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the replication factor of a production cluster (and the most any topic is given by default)
SAFE_REPLICATION_FACTOR = 3
#: the fewest in-sync replicas a production topic accepts a write with
SAFE_MIN_INSYNC_REPLICAS = 2


class ReplicationError(ValueError):
    """A replication setting that cannot work or is unsafe; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Replication:
    """A topic's replication factor and its ``min.insync.replicas``."""

    factor: int
    min_insync: int

    def topic_config(self) -> dict[str, str]:
        """The topic-level configuration entries that carry the setting."""
        return {"min.insync.replicas": str(self.min_insync)}

    def unsafe_reasons(self) -> list[str]:
        """Why the setting is not safe for production (empty when it is)."""
        reasons: list[str] = []
        if self.factor < SAFE_REPLICATION_FACTOR:
            reasons.append(
                f"replication factor {self.factor} < {SAFE_REPLICATION_FACTOR}: "
                + ("a broker's disk is the only copy of every record" if self.factor == 1
                   else "a second failure while one broker is down loses acknowledged records")
            )
        if self.min_insync < SAFE_MIN_INSYNC_REPLICAS:
            reasons.append(
                f"min.insync.replicas {self.min_insync} < {SAFE_MIN_INSYNC_REPLICAS}: a write is acknowledged "
                "with one copy, which the failure of that broker loses"
            )
        if self.factor > 1 and self.min_insync >= self.factor:
            reasons.append(
                f"min.insync.replicas {self.min_insync} >= replication factor {self.factor}: every write "
                "fails while any one replica is down"
            )
        return reasons

    @property
    def safe(self) -> bool:
        return not self.unsafe_reasons()

    def __str__(self) -> str:
        return f"replication factor {self.factor}, min.insync.replicas {self.min_insync}"


def default_min_insync(factor: int) -> int:
    """``min.insync.replicas`` for ``factor`` replicas: one fewer than the replicas, at most 2, at least 1
    (so one broker of a replica set may be down and writes still go on)."""
    return max(1, min(SAFE_MIN_INSYNC_REPLICAS, factor - 1))


def for_cluster(brokers: int) -> Replication:
    """The default of a cluster of ``brokers``: replication factor min(3, brokers) and its
    ``default_min_insync`` (1 broker: 1/1, 2 brokers: 2/1, 3 or more: 3/2)."""
    if brokers < 1:
        raise ReplicationError("the cluster reports no broker")
    factor = min(SAFE_REPLICATION_FACTOR, brokers)
    return Replication(factor, default_min_insync(factor))


def choose(
    brokers: int,
    *,
    factor: int | None = None,
    min_insync: int | None = None,
    allow_unsafe: bool = True,
) -> Replication:
    """The replication for a cluster of ``brokers``: the cluster's default where a value is not given.

    Always refuses what cannot work (fewer than one replica, more replicas than brokers, a minimum above
    the replicas). With ``allow_unsafe=False`` (production) also refuses a setting with ``unsafe_reasons``,
    including the default of a cluster too small to hold a safe one.
    """
    chosen_factor = for_cluster(brokers).factor if factor is None else factor
    if chosen_factor < 1:
        raise ReplicationError(f"replication factor {chosen_factor}: it must be at least 1")
    if chosen_factor > brokers:
        raise ReplicationError(
            f"replication factor {chosen_factor} needs {chosen_factor} brokers; the cluster has {brokers}"
        )
    chosen_min = default_min_insync(chosen_factor) if min_insync is None else min_insync
    if chosen_min < 1:
        raise ReplicationError(f"min.insync.replicas {chosen_min}: it must be at least 1")
    if chosen_min > chosen_factor:
        raise ReplicationError(
            f"min.insync.replicas {chosen_min} > replication factor {chosen_factor}: no write could succeed"
        )
    replication = Replication(chosen_factor, chosen_min)
    reasons = replication.unsafe_reasons()
    if reasons and not allow_unsafe:
        raise ReplicationError(
            f"refusing {replication} on a cluster of {brokers} broker{'s' if brokers != 1 else ''}: "
            + "; ".join(reasons)
            + f". Production needs replication factor {SAFE_REPLICATION_FACTOR} and min.insync.replicas "
            f"{SAFE_MIN_INSYNC_REPLICAS} (at least {SAFE_REPLICATION_FACTOR} brokers); for a development "
            "cluster pass --allow-unsafe"
        )
    return replication
