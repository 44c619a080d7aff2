"""Gang placement: best fit over the capacity index, with GPU type, selectors, taints and topology.

A job of several roles is placed whole: its main role first (topology as asked), then each companion
role in the same cluster, beside the main role's pods (on their nodes first; inside their domain when
the companion asks for a topology level), or not at all.

A job's ``avoid_nodes`` (where earlier attempts failed for infrastructure reasons) are a soft
exclusion: every placement is tried without them first and only falls back to them when nothing
else fits.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import replace
from typing import TypeVar

from .capacity import CapacityIndex, GroupKey, fits_in_group
from .model import TOPOLOGY_LEVELS, Job, Node, NodeAssignment, Placement, Role, TopologyMode

_T = TypeVar("_T")

MAX_DOMAIN_TRIES = 16
_NO_EXCLUSION: frozenset[str] = frozenset()


def node_eligible(node: Node, job: Job) -> bool:
    """Static fit of a job on a node: health, taints, selector (capacity not considered)."""
    if not (node.healthy and node.schedulable):
        return False
    if node.taints and not node.taints <= job.tolerations:
        return False
    return job.selects(node.labels)


def candidate_gpu_types(index: CapacityIndex, job: Job) -> list[str]:
    if job.gpu_type:
        return [job.gpu_type]
    return sorted({t for _, t in index.buckets})


def candidate_clusters(index: CapacityIndex, job: Job, gpu_type: str) -> list[str]:
    """Clusters that hold the GPU type, busiest first (bin packing across clusters)."""
    if job.cluster is not None:
        return [job.cluster] if (job.cluster, gpu_type) in index.buckets else []
    keys = [k for k in index.buckets if k[1] == gpu_type]
    keys.sort(key=lambda k: (index.group_free(k), k[0]))
    return [k[0] for k in keys]


class Avoiding:
    """The hard exclusion plus the nodes a job would rather not use."""

    __slots__ = ("avoid", "excluded")

    def __init__(self, excluded: Container[str], avoid: frozenset[str]) -> None:
        self.excluded = excluded
        self.avoid = avoid

    def __contains__(self, name: object) -> bool:
        return name in self.avoid or name in self.excluded


class Placer:
    """Finds placements for one job on one scratch index; ``excluded`` nodes are never used, the job's
    ``avoid_nodes`` only when no placement without them exists."""

    __slots__ = ("excluded", "index", "job", "spread")

    def __init__(
        self, index: CapacityIndex, job: Job, excluded: Container[str] = _NO_EXCLUSION, spread: bool = False
    ) -> None:
        self.index = index
        self.job = job
        self.excluded = excluded
        self.spread = spread  # emptiest nodes first instead of best fit (bin packing off)

    def place(self, gpu_type: str, pods_min: int, pods_max: int) -> Placement | None:
        """Place between ``pods_min`` and ``pods_max`` pods inside one cluster, or None."""
        return self._avoiding(lambda: self._place(gpu_type, pods_min, pods_max))

    def place_in(self, names: Iterable[str], pods_min: int, pods_max: int) -> list[NodeAssignment] | None:
        """Place on the given nodes only (best fit among them)."""
        candidates = list(names)
        return self._avoiding(lambda: self._place_in(candidates, pods_min, pods_max))

    def fill_group(self, key: GroupKey, pods_min: int, pods_max: int) -> list[NodeAssignment] | None:
        """Place on any nodes of one (cluster, GPU type) group, best fit first."""
        return self._avoiding(lambda: self._fill_group(key, pods_min, pods_max))

    def _avoiding(self, attempt: Callable[[], _T | None]) -> _T | None:
        """``attempt()`` with the job's avoided nodes excluded too; without that exclusion if it finds nothing."""
        avoid = self.job.avoid_nodes
        hard = self.excluded
        if not avoid or isinstance(hard, Avoiding):  # nothing to avoid, or already inside the first try
            return attempt()
        self.excluded = Avoiding(hard, avoid)
        try:
            found = attempt()
        finally:
            self.excluded = hard
        return found if found is not None else attempt()

    def _place(self, gpu_type: str, pods_min: int, pods_max: int) -> Placement | None:
        job = self.job
        for cluster in candidate_clusters(self.index, job, gpu_type):
            key = (cluster, gpu_type)
            if self.index.pod_bound(key, job.gpus_per_pod) < pods_min:
                continue
            for tries, main in enumerate(self._main_options(key, pods_min, pods_max)):
                if not job.companions:
                    return Placement(cluster, tuple(main))
                extra = self._companions(cluster, gpu_type, main)
                if extra is not None:
                    return Placement(cluster, (*main, *extra))
                if tries + 1 >= MAX_DOMAIN_TRIES:
                    break
        return None

    def _main_options(self, key: GroupKey, pods_min: int, pods_max: int) -> Iterator[list[NodeAssignment]]:
        """Places for the main role inside one (cluster, GPU type) group, best first: the first is the
        placement; the later ones are for a job whose companions do not fit beside an earlier one (another
        domain of its topology level, or beyond a preferred level)."""
        topo = self.job.topology
        tied = [c.topology.level for c in self.job.companions if c.topology is not None]
        if tied:  # companions kept in the main role's domain: try the main role inside one such domain first
            level = max(tied, key=TOPOLOGY_LEVELS.index)
            if topo is None or TOPOLOGY_LEVELS.index(level) > TOPOLOGY_LEVELS.index(topo.level):
                yield from self._in_domains(key, level, pods_min, pods_max)
        if topo is None or topo.level == "cluster":
            found = self._fill_group(key, pods_min, pods_max)
            if found is not None:
                yield found
            return
        if topo.mode is TopologyMode.REQUIRED:
            yield from self._in_domains(key, topo.level, pods_min, pods_max)
            return
        start = TOPOLOGY_LEVELS.index(topo.level)
        for level in reversed(TOPOLOGY_LEVELS[1 : start + 1]):
            yield from self._in_domains(key, level, pods_min, pods_max)
        found = self._fill_group(key, pods_min, pods_max)
        if found is not None:
            yield found

    def _companions(self, cluster: str, gpu_type: str, main: list[NodeAssignment]) -> list[NodeAssignment] | None:
        """Places for every companion role of the job beside its main role's ``main`` assignments, in the same
        cluster; None when one of them does not fit. The index is left as it was."""
        index, job = self.index, self.job
        taken: list[tuple[Job, NodeAssignment]] = [(job, a) for a in main]
        for _, a in taken:
            index.take_for(job, a)
        out: list[NodeAssignment] = []
        try:
            for c in _most_constrained_first(job.companions):
                view = job.companion_view(c)
                found = Placer(index, view, self.excluded, self.spread)._beside(cluster, gpu_type, main)
                if found is None:
                    return None
                for a in found:
                    placed = replace(a, role=c.name)
                    index.take_for(view, placed)
                    taken.append((view, placed))
                    out.append(placed)
            order = {c.name: i for i, c in enumerate(job.companions)}
            return sorted(out, key=lambda a: order[a.role])  # the job's own order of roles
        finally:
            for owner, a in reversed(taken):
                index.give_for(owner, a)

    def _beside(self, cluster: str, gpu_type: str, main: list[NodeAssignment]) -> list[NodeAssignment] | None:
        """This (companion) job's pods in ``cluster``: on the main role's nodes first, then best fit on the
        nodes of ``gpu_type`` (any node of the cluster for pods without GPUs); with a topology, inside the
        domain of that level where most of the main role's pods are (preferred: there if possible)."""
        job, index = self.job, self.index
        keys = [(cluster, gpu_type)] if job.gpus_per_pod else sorted(k for k in index.buckets if k[0] == cluster)

        def names(within: Container[str] | None = None) -> Iterator[str]:
            """The candidate nodes in order, each once, lazily (a companion of a pod or two stops early)."""
            seen: set[str] = set()
            for name in itertools.chain((a.node for a in main), *(self._group_order(k) for k in keys)):
                if name not in seen and (within is None or name in within):
                    seen.add(name)
                    yield name

        def fill(within: Container[str] | None = None) -> list[NodeAssignment] | None:
            return self._fill(names(within), job.replicas, job.replicas, single=False)

        topo = job.topology
        if topo is not None and main:
            for domain in self._main_domains(main, topo.level):
                found = self._avoiding(functools.partial(fill, domain))
                if found is not None:
                    return found
            if topo.mode is TopologyMode.REQUIRED:
                return None
        return self._avoiding(fill)

    def _main_domains(self, main: list[NodeAssignment], level: str) -> list[Container[str]]:
        """The domains of ``level`` the main role's pods are in (their nodes), most of its pods first (then in
        the main role's order)."""
        index = self.index
        pods: dict[tuple[str, ...], int] = {}
        first: dict[tuple[str, ...], str] = {}
        for a in main:
            key = index.nodes[a.node].domain(level)
            pods[key] = pods.get(key, 0) + a.pods
            first.setdefault(key, a.node)
        order = sorted(pods, key=lambda k: -pods[k])  # stable: the main role's order among equals
        if level == "node":
            return [{first[k]} for k in order]
        return [set(index.domain_nodes.get(k, ())) for k in order]

    def _place_in(self, names: Iterable[str], pods_min: int, pods_max: int) -> list[NodeAssignment] | None:
        free = self.index.free
        sign = -1 if self.spread else 1
        ordered = sorted((n for n in names if n in free), key=lambda n: (sign * free[n], n))
        return self._fill(ordered, pods_min, pods_max, single=False)

    # ------------------------------------------------------------------ internals

    def _fill_group(self, key: GroupKey, pods_min: int, pods_max: int) -> list[NodeAssignment] | None:
        return self._fill(self._group_order(key), pods_min, pods_max, single=False)

    def _group_order(self, key: GroupKey) -> Iterable[str]:
        buckets = self.index.buckets.get(key, {})
        low = self.job.gpus_per_pod
        for k in sorted(buckets, reverse=self.spread):
            if k >= low:
                yield from list(buckets[k])

    def _in_domains(self, key: GroupKey, level: str, pods_min: int, pods_max: int) -> Iterator[list[NodeAssignment]]:
        """Placements inside one domain of ``level`` each, the best fitting domain first."""
        if level == "node":
            found = self._fill(self._group_order(key), pods_min, pods_max, single=True)
            if found is not None:
                yield found
            return
        cluster, gpu_type = key
        depth = TOPOLOGY_LEVELS.index(level) + 1
        need = pods_min * self.job.gpus_per_pod
        sign = -1 if self.spread else 1
        by_domain = self.index.domain_free.get((gpu_type, cluster, depth), {})
        domains = sorted((sign * free, d) for d, free in by_domain.items() if free >= need)
        for _, domain in domains[:MAX_DOMAIN_TRIES]:
            found = self._place_in(self.index.domain_nodes.get(domain, ()), pods_min, pods_max)
            if found is not None:
                yield found

    def _fill(self, names: Iterable[str], pods_min: int, pods_max: int, single: bool) -> list[NodeAssignment] | None:
        index, job = self.index, self.job
        gpus, cpu, mem = job.gpus_per_pod, job.cpu_m, job.memory_mb
        excluded = self.excluded
        avoid = job.avoid_nodes
        if avoid and not isinstance(excluded, Avoiding):  # the fallback: as few avoided nodes as will do
            listed = list(names)
            names = [*(n for n in listed if n not in avoid), *(n for n in listed if n in avoid)]
        fraction, mig, mig_n = job.fraction, job.mig_profile, job.mig_per_pod
        if fraction or mig:
            names = self._sharing_order(names)
        out: list[NodeAssignment] = []
        remaining = pods_max
        for name in names:
            if name in excluded:
                continue
            node = index.nodes[name]
            if not node_eligible(node, job):
                continue
            fit = index.pods_fit(name, gpus, cpu, mem, remaining, fraction, mig, mig_n)
            if fit <= 0 or (single and fit < pods_min):
                continue
            if fraction or mig:
                slots = tuple(index.share_slots(name, fraction, fit)) if fraction else ()
                out.append(NodeAssignment(name, fit, self._groups(node, fit), fraction, slots, mig, mig_n))
            else:
                out.append(NodeAssignment(name, fit, self._groups(node, fit)))
            remaining -= fit
            if remaining == 0 or single:
                break
        placed = pods_max - remaining
        return out if placed >= pods_min and placed > 0 else None

    def _sharing_order(self, names: Iterable[str]) -> list[str]:
        """Nodes for a fractional or MIG job, best fit first: a fractional job first onto the nodes with a
        partly used shared GPU it fits (least room left first), then onto the others in their given order;
        a MIG job onto the nodes with the fewest free slices of its profile. Nodes without any are dropped."""
        index, job = self.index, self.job
        listed = list(names)  # keeps the given order (busiest first, avoided nodes last) among equals
        if job.mig_profile:
            mig = index.mig_free
            with_slices = [n for n in listed if mig.get(n, {}).get(job.mig_profile, 0) >= job.mig_per_pod]
            return sorted(with_slices, key=lambda n: mig[n][job.mig_profile])
        fraction = job.fraction
        shared = [n for n in listed if n in index.shared]
        room = {n: index.share_room(n, fraction) for n in shared}
        partly = sorted((n for n in shared if room[n] is not None), key=lambda n: room[n] or 0)
        return partly + [n for n in shared if room[n] is None]

    def _groups(self, node: Node, pods: int) -> tuple[int, ...]:
        if not node.nvlink_groups:
            return ()
        gpus = self.job.gpus_per_pod
        if not fits_in_group(node, gpus):
            return (-1,) * pods
        free = list(self.index.free_groups[node.name])
        chosen: list[int] = []
        for _ in range(pods):
            best = min((f, i) for i, f in enumerate(free) if f >= gpus)  # tightest group first
            free[best[1]] -= gpus
            chosen.append(best[1])
        return tuple(chosen)


def _most_constrained_first(roles: tuple[Role, ...]) -> list[Role]:
    """Companion roles in the order they are placed: those that must stay in a domain of the main role's
    (the narrowest first), then those that prefer to, then the rest, so a role free to go anywhere in the
    cluster does not take the last room of the domain a tied role has to share with the main role."""

    def rank(role: Role) -> tuple[int, int]:
        topo = role.topology
        if topo is None:
            return (2, 0)
        return (0 if topo.mode is TopologyMode.REQUIRED else 1, -TOPOLOGY_LEVELS.index(topo.level))

    return sorted(roles, key=rank)
