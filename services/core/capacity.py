"""Free capacity per node, indexed for best-fit placement.

Healthy, schedulable nodes sit in buckets keyed by (cluster, gpu type) and then by their number of
free GPUs, so a placement can walk nodes from the busiest feasible one upwards without a full scan.
Free GPUs are also summed per topology domain (zone, block, rack) to pick domains quickly.

GPU sharing. A node's first ``shared_gpus`` GPUs may hold fractional pods: each such GPU keeps the sum
of the fractions on it (at most one GPU). A shared GPU holding any fraction counts as taken for
whole-GPU pods (it leaves ``free`` when its first fraction arrives and comes back with its last), so a
whole-GPU pod never lands on a GPU that holds fractions. Fractions go best fit onto the partly used
shared GPU with the least room that still fits, and only then open an empty one. MIG slices are
counted per profile per node, apart from the whole GPUs (MIG-enabled GPUs are not whole GPUs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from .model import Amount, Job, Node, NodeAssignment

GroupKey = tuple[str, str]  # (cluster, gpu_type)
DOMAIN_LEVELS: tuple[str, ...] = ("zone", "block", "rack")


def fits_in_group(node: Node, gpus: int) -> bool:
    """True when a pod of ``gpus`` GPUs must stay inside one NVLink group of ``node``."""
    return bool(node.nvlink_groups) and 0 < gpus <= max(node.nvlink_groups)


class CapacityIndex:
    """Mutable free-capacity index; ``clone`` gives an independent scratch copy for one cycle."""

    __slots__ = (
        "buckets",
        "domain_free",
        "domain_nodes",
        "domains_of",
        "free",
        "free_cpu",
        "free_groups",
        "free_mem",
        "mig_free",
        "nodes",
        "shared",
        "span_used",
    )

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.free: dict[str, int] = {}
        self.free_cpu: dict[str, int] = {}
        self.free_mem: dict[str, int] = {}
        self.free_groups: dict[str, tuple[int, ...]] = {}
        self.span_used: dict[str, tuple[int, ...]] = {}  # GPUs per group held by pods spanning groups
        self.buckets: dict[GroupKey, dict[int, dict[str, None]]] = {}
        # (gpu type, cluster, depth of the domain path) -> domain -> free GPUs on usable nodes
        self.domain_free: dict[tuple[str, str, int], dict[tuple[str, ...], int]] = {}
        self.domain_nodes: dict[tuple[str, ...], list[str]] = {}
        self.domains_of: dict[str, tuple[tuple[str, ...], ...]] = {}  # node -> its zone, block, rack
        #: node -> the fraction taken on each of its shared GPUs (only nodes with shared GPUs)
        self.shared: dict[str, tuple[Fraction, ...]] = {}
        #: node -> free MIG slices per profile (only nodes with MIG slices); replaced, never changed in place
        self.mig_free: dict[str, Mapping[str, int]] = {}

    def clone(self) -> CapacityIndex:
        c = CapacityIndex.__new__(CapacityIndex)
        c.nodes = self.nodes
        c.free = dict(self.free)
        c.free_cpu = dict(self.free_cpu)
        c.free_mem = dict(self.free_mem)
        c.free_groups = dict(self.free_groups)
        c.span_used = dict(self.span_used)
        c.shared = dict(self.shared)
        c.mig_free = dict(self.mig_free)
        c.buckets = {g: {k: dict(v) for k, v in b.items()} for g, b in self.buckets.items()}
        c.domain_free = {k: dict(v) for k, v in self.domain_free.items()}
        c.domain_nodes = self.domain_nodes  # changes only with the node set, never inside a cycle
        c.domains_of = self.domains_of
        return c

    # ------------------------------------------------------------------ node set

    def add_node(
        self, node: Node, used: Iterable[tuple[int, int, int, int]], shared_used: Iterable[NodeAssignment] = ()
    ) -> None:
        """Add ``node``; ``used`` lists (gpus, cpu, memory, group) per pod already running on it,
        ``shared_used`` the assignments of GPU-sharing jobs on it (their CPU and memory are in ``used``)."""
        if node.name in self.nodes:
            self.remove_node(node.name)
        self.nodes[node.name] = node
        free, cpu, mem = node.gpus, node.cpu_m, node.memory_mb
        groups = list(node.nvlink_groups)
        span = [0] * len(groups)
        for gpus, pod_cpu, pod_mem, group in used:
            free -= gpus
            cpu -= pod_cpu
            mem -= pod_mem
            _take_groups(groups, span, gpus, group)
        self.free[node.name] = free
        self.free_cpu[node.name] = cpu
        self.free_mem[node.name] = mem
        if groups:
            self.free_groups[node.name] = tuple(groups)
            self.span_used[node.name] = tuple(span)
        if node.shared_gpus > 0:
            self.shared[node.name] = (Fraction(0),) * min(node.shared_gpus, node.gpus)
        if node.mig:
            self.mig_free[node.name] = dict(node.mig)
        for a in shared_used:
            free -= self._share_change(node.name, a, -1)
        self.free[node.name] = free
        self.domains_of[node.name] = tuple(node.domain(level) for level in DOMAIN_LEVELS)
        for domain in self.domains_of[node.name]:
            self.domain_nodes.setdefault(domain, []).append(node.name)
        if self.usable(node):
            self._bucket_add(node, free)

    def remove_node(self, name: str) -> None:
        node = self.nodes.pop(name, None)
        if node is None:
            return
        if self.usable(node):
            self._bucket_remove(node, self.free[name])
        for domain in self.domains_of.pop(name, ()):
            members = self.domain_nodes.get(domain)
            if members is not None and name in members:
                members.remove(name)
        del self.free[name], self.free_cpu[name], self.free_mem[name]
        self.free_groups.pop(name, None)
        self.span_used.pop(name, None)
        self.shared.pop(name, None)
        self.mig_free.pop(name, None)

    @staticmethod
    def usable(node: Node) -> bool:
        return node.healthy and node.schedulable

    def _bucket_add(self, node: Node, free: int) -> None:
        key = (node.cluster, node.gpu_type)
        self.buckets.setdefault(key, {}).setdefault(max(free, 0), {})[node.name] = None
        for domain in self.domains_of[node.name]:
            by_domain = self.domain_free.setdefault((node.gpu_type, node.cluster, len(domain)), {})
            by_domain[domain] = by_domain.get(domain, 0) + max(free, 0)

    def _bucket_remove(self, node: Node, free: int) -> None:
        key = (node.cluster, node.gpu_type)
        k = max(free, 0)
        bucket = self.buckets[key][k]
        del bucket[node.name]
        if not bucket:
            del self.buckets[key][k]
        for domain in self.domains_of[node.name]:
            self.domain_free[(node.gpu_type, node.cluster, len(domain))][domain] -= k

    # ------------------------------------------------------------------ taking and giving back

    def _set_free(self, name: str, new_free: int) -> None:
        node = self.nodes[name]
        if self.usable(node):
            self._bucket_remove(node, self.free[name])
            self.free[name] = new_free
            self._bucket_add(node, new_free)
        else:
            self.free[name] = new_free

    def take(self, job_gpus: int, cpu_m: int, memory_mb: int, assignment: NodeAssignment) -> None:
        """Consume the capacity of ``assignment`` (pods of ``job_gpus`` GPUs each)."""
        self._change(job_gpus, cpu_m, memory_mb, assignment, -1)

    def give(self, job_gpus: int, cpu_m: int, memory_mb: int, assignment: NodeAssignment) -> None:
        """Return the capacity of ``assignment``."""
        self._change(job_gpus, cpu_m, memory_mb, assignment, +1)

    def take_for(self, job: Job, assignment: NodeAssignment) -> None:
        """Consume what ``assignment``'s pods of ``job`` need (the pod shape of the assignment's role)."""
        if assignment.role:
            gpus, cpu_m, memory_mb = job.shape(assignment.role)
            self._change(gpus, cpu_m, memory_mb, assignment, -1)
        else:
            self._change(job.gpus_per_pod, job.cpu_m, job.memory_mb, assignment, -1)

    def give_for(self, job: Job, assignment: NodeAssignment) -> None:
        """Return what ``assignment``'s pods of ``job`` held."""
        if assignment.role:
            gpus, cpu_m, memory_mb = job.shape(assignment.role)
            self._change(gpus, cpu_m, memory_mb, assignment, +1)
        else:
            self._change(job.gpus_per_pod, job.cpu_m, job.memory_mb, assignment, +1)

    def _change(self, gpus: int, cpu_m: int, memory_mb: int, a: NodeAssignment, sign: int) -> None:
        name = a.node
        if name not in self.nodes:
            return
        self.free_cpu[name] += sign * cpu_m * a.pods
        self.free_mem[name] += sign * memory_mb * a.pods
        groups = self.free_groups.get(name)
        if groups is not None:
            g = list(groups)
            span = list(self.span_used[name])
            for i in range(a.pods):
                group = a.groups[i] if i < len(a.groups) else -1
                if sign < 0:
                    _take_groups(g, span, gpus, group)
                else:
                    _give_groups(g, span, gpus, group)
            self.free_groups[name] = tuple(g)
            self.span_used[name] = tuple(span)
        if gpus:
            self._set_free(name, self.free[name] + sign * gpus * a.pods)
        if a.fraction or a.mig_profile:
            opened = self._share_change(name, a, sign)
            if opened:
                self._set_free(name, self.free[name] - opened)

    def _share_change(self, name: str, a: NodeAssignment, sign: int) -> int:
        """Take (-1) or give back (+1) the GPU shares of ``a``; returns how many shared GPUs it opened
        (negative: closed), i.e. how many whole GPUs ``free`` loses."""
        opened = 0
        if a.fraction and name in self.shared:
            used = list(self.shared[name])
            for i in range(a.pods):
                slot = a.slots[i] if i < len(a.slots) else -1
                if not 0 <= slot < len(used):
                    continue  # a plan made for another layout of this node: nothing of it is tracked
                before = used[slot]
                used[slot] = max(before - sign * a.fraction, Fraction(0))
                opened += (used[slot] > 0) - (before > 0)
            self.shared[name] = tuple(used)
        if a.mig_profile and name in self.mig_free:
            mig = dict(self.mig_free[name])
            mig[a.mig_profile] = mig.get(a.mig_profile, 0) + sign * a.mig_per_pod * a.pods
            self.mig_free[name] = mig
        return opened

    # ------------------------------------------------------------------ reads

    def share_slots(self, name: str, fraction: Amount, limit: int) -> list[int]:
        """The shared GPUs of ``name`` that up to ``limit`` pods of ``fraction`` would take, best fit: each
        pod onto the partly used shared GPU with the least room that fits, else onto an empty one."""
        used = list(self.shared.get(name, ()))
        free = self.free.get(name, 0)
        out: list[int] = []
        while len(out) < limit:
            best = min(((1 - u, i) for i, u in enumerate(used) if u > 0 and u + fraction <= 1), default=None)
            if best is not None:
                slot = best[1]
            else:
                slot = next((i for i, u in enumerate(used) if u == 0), -1)
                if slot < 0 or free < 1:
                    break
                free -= 1
            used[slot] += fraction
            out.append(slot)
        return out

    def share_room(self, name: str, fraction: Amount) -> Amount | None:
        """The least room on a partly used shared GPU of ``name`` that a ``fraction`` fits (None: none)."""
        return min((1 - u for u in self.shared.get(name, ()) if u > 0 and u + fraction <= 1), default=None)

    def pods_fit(
        self, name: str, gpus: int, cpu_m: int, memory_mb: int, limit: int,
        fraction: Amount = 0, mig_profile: str = "", mig_per_pod: int = 0,
    ) -> int:
        """How many pods of the given size fit on ``name`` now (at most ``limit``)."""
        node = self.nodes[name]
        n = limit
        if fraction:
            n = min(n, len(self.share_slots(name, fraction, n)))
        if mig_profile:
            n = min(n, max(self.mig_free.get(name, {}).get(mig_profile, 0), 0) // max(mig_per_pod, 1))
        if gpus > 0:
            if fits_in_group(node, gpus):
                n = min(n, sum(f // gpus for f in self.free_groups[name] if f > 0))
            else:
                n = min(n, max(self.free[name], 0) // gpus)
        if cpu_m > 0 and node.cpu_m > 0:
            n = min(n, max(self.free_cpu[name], 0) // cpu_m)
        if memory_mb > 0 and node.memory_mb > 0:
            n = min(n, max(self.free_mem[name], 0) // memory_mb)
        return max(n, 0)

    def pod_bound(self, key: GroupKey, gpus: int) -> int:
        """Upper bound on pods of ``gpus`` GPUs that fit in a (cluster, gpu type) group."""
        b = self.buckets.get(key)
        if not b:
            return 0
        if gpus <= 0:
            return sum(len(v) for v in b.values()) * 1_000_000
        return sum(len(v) * (k // gpus) for k, v in b.items() if k >= gpus)

    def group_free(self, key: GroupKey) -> int:
        b = self.buckets.get(key)
        return sum(k * len(v) for k, v in b.items()) if b else 0

    def gpus_left(self) -> bool:
        """Whether any usable node has a free GPU."""
        return any(len(b) > 1 or (b and 0 not in b) for b in self.buckets.values())

    def group_keys(self) -> list[GroupKey]:
        return sorted(self.buckets)


def _take_groups(groups: list[int], span: list[int], gpus: int, group: int) -> None:
    if not groups or gpus <= 0:
        return
    if 0 <= group < len(groups):
        groups[group] -= gpus
        return
    remaining = gpus  # a pod spanning groups takes from the groups with most free GPUs first
    for i in sorted(range(len(groups)), key=lambda j: (-groups[j], j)):
        step = min(remaining, max(groups[i], 0))
        groups[i] -= step
        span[i] += step
        remaining -= step
        if remaining == 0:
            return
    groups[-1] -= remaining  # overcommitted node (shrunk under running pods)
    span[-1] += remaining


def _give_groups(groups: list[int], span: list[int], gpus: int, group: int) -> None:
    if not groups or gpus <= 0:
        return
    if 0 <= group < len(groups):
        groups[group] += gpus
        return
    remaining = gpus  # give back only what spanning pods hold, largest holdings first
    for i in sorted(range(len(groups)), key=lambda j: (-span[j], j)):
        step = min(remaining, span[i])
        groups[i] += step
        span[i] -= step
        remaining -= step
        if remaining == 0:
            return
    groups[-1] += remaining
