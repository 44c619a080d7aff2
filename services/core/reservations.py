"""The cycle's backfill reservations, and the nodes each waiting job may not use because of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .model import Job, Reservation
from .node_facts import ScopeOf


class Excluded:
    """Nodes a job may not use: the reservations' nodes when the job would delay the reserved jobs
    (``held`` names those reservations' jobs)."""

    __slots__ = ("held", "reserved")

    def __init__(self, reserved: frozenset[str], held: tuple[str, ...] = ()) -> None:
        self.reserved = reserved
        self.held = held

    def __contains__(self, name: object) -> bool:
        return name in self.reserved


NOTHING_EXCLUDED = Excluded(frozenset())


class Reservations:
    """Reservations taken this cycle, each with the nodes its job may use (None: unconfined, every node).
    One unconfined reservation excludes every other; jobs confined to disjoint pools each get their own."""

    __slots__ = ("_booked", "_estimate_of", "_exclusions", "_now", "_scope", "_types_for", "held")

    def __init__(
        self,
        now: float,
        estimate_of: Callable[[Job], float],
        scope: ScopeOf,
        types_for: Callable[[Job], list[str]],
        booked: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self._now = now
        #: bought nodes -> (the job, the queue) that may use them (``GrowthBook.exclusive``): no other job may
        self._booked = booked or {}
        self._estimate_of = estimate_of
        self._scope = scope
        self._types_for = types_for
        self.held: list[tuple[Reservation, frozenset[str] | None]] = []
        self._exclusions: dict[tuple[str, ...], Excluded] = {}

    def may_reserve(self, job: Job) -> bool:
        """Whether ``job`` may take a reservation: none is held yet, or the job is confined to a pool that
        shares no node with the pools of those held (so it can neither delay them nor be delayed)."""
        if not self.held:
            return True
        if not job.node_selector or any(scope is None for _, scope in self.held):
            return False
        for gpu_type in self._types_for(job):
            mine = self._scope(job, gpu_type)
            assert mine is not None
            if any(not mine.isdisjoint(scope) for _, scope in self.held if scope is not None):
                return False
        return True

    def add(self, res: Reservation, job: Job) -> None:
        scope: frozenset[str] | None = None
        if job.node_selector:
            scope = frozenset().union(*(self._scope(job, t) or () for t in self._types_for(job)))
        self.held.append((res, scope))
        self._exclusions.clear()

    def exclusion_for(self, job: Job) -> Excluded:
        """The reserved nodes ``job`` may not use: those of every reservation it would delay, and the bought
        nodes kept for another job."""
        found = self._reserved_for(job)
        if not self._booked:
            return found
        others = tuple(sorted(n for n, (j, q) in self._booked.items() if j != job.job_id and q != job.queue))
        if not others:
            return found
        # ``held`` keys the cycle's memo of placement misses: it names the bought nodes excluded too
        return Excluded(found.reserved | frozenset(others), (*found.held, *(f"bought:{n}" for n in others)))

    def _reserved_for(self, job: Job) -> Excluded:
        held = self.held
        if not held:
            return NOTHING_EXCLUDED
        end = self._now + self._estimate_of(job)
        if len(held) == 1:  # the common case: one reservation, no tuple to build
            res = held[0][0]
            if res.job_id == job.job_id or end <= res.time:
                return NOTHING_EXCLUDED
            return self._excluding((res.job_id,))
        return self._excluding(tuple(r.job_id for r, _ in held if r.job_id != job.job_id and end > r.time))

    def exclusion_for_growth(self) -> Excluded:
        """The reserved nodes a running job may not grow onto: every reservation's, and every kept bought node."""
        found = self._excluding(tuple(r.job_id for r, _ in self.held))
        if not self._booked:
            return found
        return Excluded(found.reserved | frozenset(self._booked),
                        (*found.held, *(f"bought:{n}" for n in sorted(self._booked))))

    def _excluding(self, held: tuple[str, ...]) -> Excluded:
        if not held:
            return NOTHING_EXCLUDED
        found = self._exclusions.get(held)
        if found is None:
            nodes = [r.nodes for r, _ in self.held if r.job_id in held]
            found = self._exclusions[held] = Excluded(nodes[0] if len(nodes) == 1 else frozenset().union(*nodes), held)
        return found
