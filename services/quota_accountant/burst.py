"""What bought nodes cost each queue: a pure fold of the growth facts into burst spend per window. No I/O, no clock.

A queue's burst budget pays for the nodes the queue manager buys for its jobs. The accountant charges them like
usage, from the facts on the wire rather than from the queue manager's estimate:

- ``NodesRequested`` opens a request (its queue, cluster, group, GPUs per node and the price per GPU-hour the
  queue manager charged it at);
- ``NodesProvisioned`` starts each node's accrual at the answer's time: the named nodes, or (an autoscaler that
  labels no node with its request) one anonymous slot per node requested;
- ``NodeReleaseRequested`` ends a node's accrual: the node by name, else one anonymous slot of a request of the
  same queue, cluster and group (they cost the same);
- a node observed removed without being given back ends its accrual at its removal;
- ``ProvisioningFailed`` closes a request that never made nodes; nothing is charged.

Spend is kept per queue and (window kind, window start) for every kind (day, ISO week, month, UTC), so a change of
a queue's budget window needs no history rewritten. A finished request is remembered until ``horizon_s`` after
its last fact, so a fact delivered again (at-least-once) is not charged twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from services.quota_accountant.windows import (
    BUCKET_KEEP_S,
    WINDOW_KINDS,
    WindowKind,
    split_by_window,
    window_end,
    window_start,
)

#: anonymous slots are named with this prefix (node names cannot start with it)
SLOT = "#"


@dataclass
class BoughtRequest:
    """One request for nodes and its nodes' accruals: ``held`` node (or slot) -> accruing since, ``closed`` node ->
    when its accrual ended."""

    queue: str
    cluster: str
    group: str
    gpus_per_node: int
    price_per_gpu_hour: float
    nodes: int
    provisioned_at: float | None = None
    failed: bool = False
    held: dict[str, float] = field(default_factory=dict)
    closed: dict[str, float] = field(default_factory=dict)
    last: float = 0.0  # time of the last fact, for forgetting finished requests

    @property
    def finished(self) -> bool:
        return self.failed or (self.provisioned_at is not None and not self.held)


@dataclass(frozen=True)
class BurstSpend:
    """A queue's spend in one window: GPU-hours and money (nodes still held counted up to ``as_of``)."""

    window: WindowKind
    window_start: float
    window_end: float
    as_of: float
    gpu_hours: float
    money: float
    nodes_held: int


Spend = Mapping[tuple[WindowKind, float], tuple[float, float]]
"""A queue's closed spend per (window kind, window start): (GPU-seconds, money)."""


@dataclass
class BurstLedger:
    horizon_s: float
    requests: dict[str, BoughtRequest] = field(default_factory=dict)
    spend: dict[str, dict[tuple[WindowKind, float], tuple[float, float]]] = field(default_factory=dict)

    # ------------------------------------------------------------------ facts (each returns the queues changed)

    def requested(self, name: str, queue: str, cluster: str, group: str, gpus_per_node: int,
                  price_per_gpu_hour: float, nodes: int, at: float) -> set[str]:
        if name in self.requests:
            return set()
        self.requests[name] = BoughtRequest(queue, cluster, group, gpus_per_node, price_per_gpu_hour, nodes,
                                            last=at)
        return {queue}

    def provisioned(self, name: str, nodes: Iterable[str], at: float) -> set[str]:
        request = self.requests.get(name)
        if request is None or request.failed or request.provisioned_at is not None:
            return set()
        request.provisioned_at = at
        request.last = at
        named = list(nodes)
        slots = named or [f"{SLOT}{i}" for i in range(request.nodes)]
        request.held = dict.fromkeys(slots, at)
        return {request.queue}

    def failed(self, name: str, at: float) -> set[str]:
        request = self.requests.get(name)
        if request is None or request.provisioned_at is not None or request.failed:
            return set()
        request.failed = True
        request.last = at
        return set()

    def released(self, cluster: str, group: str, node: str, queue: str | None, at: float) -> set[str]:
        """A node given back: its accrual ends now (a node already given back, or not bought, changes nothing)."""
        found = self._holding(cluster, node)
        if found is not None:
            # a release older than the accrual is one delivered again after the name was bought anew
            return set() if at < self.requests[found[0]].held[found[1]] else self._close(found[0], found[1], node, at)
        if any(r.cluster == cluster and node in r.closed for r in self.requests.values()):
            return set()  # given back already (delivered again)
        if queue is not None:
            found = next(((name, slot) for name, r in sorted(self.requests.items(), key=lambda i: i[1].last)
                          if r.cluster == cluster and r.group == group and r.queue == queue
                          for slot in sorted(r.held) if slot.startswith(SLOT)), None)
        if found is None:
            return set()
        return self._close(found[0], found[1], node, at)

    def removed(self, cluster: str, node: str, at: float) -> set[str]:
        """A bought node gone without being given back (a failure, an operator): its accrual ends at its removal."""
        found = self._holding(cluster, node)
        if found is None or at < self.requests[found[0]].held[found[1]]:
            return set()
        return self._close(found[0], found[1], node, at)

    # ------------------------------------------------------------------ reading

    def report(self, queue: str, kind: WindowKind, now: float) -> BurstSpend:
        """The queue's spend in the ``kind`` window holding ``now``."""
        start = window_start(kind, now)
        seconds, money = self.spend.get(queue, {}).get((kind, start), (0.0, 0.0))
        held = 0
        for r in self.requests.values():
            if r.queue != queue:
                continue
            for since in r.held.values():
                held += 1
                run = max(now - max(since, start), 0.0) * r.gpus_per_node
                seconds += run
                money += run / 3600.0 * r.price_per_gpu_hour
        return BurstSpend(kind, start, window_end(kind, start), now, seconds / 3600.0, money, held)

    def queues(self) -> set[str]:
        return set(self.spend) | {r.queue for r in self.requests.values()}

    def prune(self, now: float) -> None:
        """Forget requests finished ``horizon_s`` ago and spend of windows long over (the table mirror's
        ``after_prune`` writes what changed)."""
        for name in [n for n, r in self.requests.items() if r.finished and r.last < now - self.horizon_s]:
            del self.requests[name]
        for queue, buckets in list(self.spend.items()):
            kept = {key: v for key, v in buckets.items() if window_end(key[0], key[1]) >= now - BUCKET_KEEP_S}
            if kept:
                self.spend[queue] = kept
            else:
                del self.spend[queue]

    # ------------------------------------------------------------------ inside

    def _holding(self, cluster: str, node: str) -> tuple[str, str] | None:
        for name, r in self.requests.items():
            if r.cluster == cluster and node in r.held:
                return name, node
        return None

    def _close(self, name: str, slot: str, node: str, at: float) -> set[str]:
        request = self.requests[name]
        since = request.held.pop(slot)
        request.closed[node] = at
        request.last = max(request.last, at)
        buckets = self.spend.setdefault(request.queue, {})
        for kind in WINDOW_KINDS:
            for start, seconds in split_by_window(kind, since, at):
                gpu_seconds = seconds * request.gpus_per_node
                old_seconds, old_money = buckets.get((kind, start), (0.0, 0.0))
                buckets[(kind, start)] = (old_seconds + gpu_seconds,
                                          old_money + gpu_seconds / 3600.0 * request.price_per_gpu_hour)
        return {request.queue}
