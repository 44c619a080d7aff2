"""Gang placement: best fit over the capacity index, with GPU type, selectors, taints and topology.

A job's ``avoid_nodes`` (where earlier attempts failed for infrastructure reasons) are a soft
exclusion: every placement is tried without them first and only falls back to them when nothing
else fits.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import TypeVar

from .capacity import CapacityIndex, GroupKey, fits_in_group
from .model import TOPOLOGY_LEVELS, Job, Node, NodeAssignment, Placement, TopologyMode

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
            topo = job.topology
            found: list[NodeAssignment] | None
            if topo is None or topo.level == "cluster":
                found = self._fill_group(key, pods_min, pods_max)
            elif topo.mode is TopologyMode.REQUIRED:
                found = self.in_one_domain(key, topo.level, pods_min, pods_max)
            else:
                found = None
                start = TOPOLOGY_LEVELS.index(topo.level)
                for level in reversed(TOPOLOGY_LEVELS[1 : start + 1]):
                    found = self.in_one_domain(key, level, pods_min, pods_max)
                    if found is not None:
                        break
                if found is None:
                    found = self._fill_group(key, pods_min, pods_max)
            if found is not None:
                return Placement(cluster, tuple(found))
        return None

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

    def in_one_domain(self, key: GroupKey, level: str, pods_min: int, pods_max: int) -> list[NodeAssignment] | None:
        if level == "node":
            return self._fill(self._group_order(key), pods_min, pods_max, single=True)
        cluster, gpu_type = key
        depth = TOPOLOGY_LEVELS.index(level) + 1
        need = pods_min * self.job.gpus_per_pod
        sign = -1 if self.spread else 1
        by_domain = self.index.domain_free.get((gpu_type, cluster, depth), {})
        domains = sorted((sign * free, d) for d, free in by_domain.items() if free >= need)
        for _, domain in domains[:MAX_DOMAIN_TRIES]:
            found = self._place_in(self.index.domain_nodes.get(domain, ()), pods_min, pods_max)
            if found is not None:
                return found
        return None

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
