"""Quota book: admitted resources per queue, cohort pools, borrowing and lending limits, user caps.

A queue's nominal quota minus what it may lend is guaranteed to it; the rest of its nominal quota
goes into the pool of its root cohort (cohorts carry no quota of their own, so a sub-cohort lends
everything upwards). Usage above the guaranteed part is drawn from that pool. A queue without a
cohort can only use its nominal quota.

Borrowed quota must always be reclaimable, so only preemptible work runs on it: a job that cannot be
preempted is admitted only while its queue stays within nominal quota (``non_preemptible_over_nominal``
otherwise). Every running job that took its queue above nominal is therefore preemptible, and a queue
under its nominal quota can always get it back by quota reclaim.

GPU sharing: a pod of a fractional job is charged its fraction of one GPU, a pod of a MIG job its
slices' share (``mig_share``: the slice's compute slices out of the GPU's seven, so a ``1g.10gb`` slice
of an A100 80GB charges 1/7), both against ``gpu:<type>``. Such charges are exact fractions
(``fractions.Fraction``); whole-GPU jobs keep integer amounts, and quotas stay whole GPUs.

GPUs are always governed: a GPU type missing from a queue's quotas has nominal 0 (it may still
borrow it inside its cohort). CPU and memory are governed only where an operator declared them:
for a queue whose cohort tree (or, without a cohort, the queue itself) declares no ``cpu`` quota
anywhere, CPU is not limited by quota at all (node capacity still is); the same for ``memory``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import CPU, GPU_PREFIX, MEMORY, Amount, CohortSpec, Job, PendingReason, QueueSpec, gpu_resource

Amounts = dict[str, Amount]


def job_request(job: Job, gpu_type: str, pods: int, *, companions: bool = True) -> Amounts:
    """The quota resources ``job`` takes on GPUs of ``gpu_type`` with ``pods`` pods in its main role and
    every pod of its companion roles (``companions`` False: the main role's pods alone, what a resize of
    a running job adds or gives back)."""
    req: Amounts = {}
    gpus: Amount = (job.gpus_per_pod or job.gpu_share) * pods
    cpu, mem = job.cpu_m * pods, job.memory_mb * pods
    for c in job.companions if companions else ():
        gpus += c.gpus_per_pod * c.replicas
        cpu += c.cpu_m * c.replicas
        mem += c.memory_mb * c.replicas
    if gpus:
        req[gpu_resource(gpu_type)] = gpus
    if cpu:
        req[CPU] = cpu
    if mem:
        req[MEMORY] = mem
    return req


def _guaranteed(spec: QueueSpec, resource: str) -> int:
    q = spec.quotas.get(resource)
    if q is None:
        return 0
    lendable = q.nominal if q.lending_limit is None else min(q.lending_limit, q.nominal)
    return q.nominal - lendable


class QuotaBook:
    """Mutable quota accounting; ``clone`` gives a scratch copy for one cycle."""

    __slots__ = ("_origin", "alloc", "cohorts", "governed", "pool_cap", "pool_used", "queues", "root_of", "user_gpus")

    def __init__(self) -> None:
        self.queues: dict[str, QueueSpec] = {}
        self.cohorts: dict[str, CohortSpec] = {}
        self.root_of: dict[str, str | None] = {}
        self.alloc: dict[str, Amounts] = {}
        self.pool_cap: dict[str, Amounts] = {}
        self.pool_used: dict[str, Amounts] = {}
        self.user_gpus: dict[tuple[str, str], Amount] = {}
        self.governed: dict[str, frozenset[str]] = {}  # queue -> non-GPU resources under quota
        #: the ``alloc`` and ``pool_used`` of the book this one was cloned from: an entry that is the very
        #: same dict as there is still shared, and ``add`` copies it before its first change
        self._origin: tuple[dict[str, Amounts], dict[str, Amounts]] | None = None

    def clone(self) -> QuotaBook:
        """A scratch copy whose changes never reach this book. Copy-on-write: each queue's allocation and
        each pool's usage is copied only when the clone first changes it (a cycle touches few of them), so
        the copy is meant to be used, as a cycle's is, while this book itself does not change."""
        c = QuotaBook.__new__(QuotaBook)
        c.queues, c.cohorts, c.root_of, c.pool_cap = self.queues, self.cohorts, self.root_of, self.pool_cap
        c.governed = self.governed
        c.alloc = dict(self.alloc)
        c.pool_used = dict(self.pool_used)
        c._origin = (self.alloc, self.pool_used)
        c.user_gpus = dict(self.user_gpus)
        return c

    def scratch_for(self, queue: str) -> QuotaBook:
        """A scratch copy for what-if changes around ``queue``: its allocation and its root's pool.

        Cheaper than ``clone`` on a large book. Before changing another queue of the same root in the
        copy, ``adopt`` it. User caps start empty (a what-if walk never checks them).
        """
        c = QuotaBook.__new__(QuotaBook)
        c.queues, c.cohorts, c.root_of, c.pool_cap = self.queues, self.cohorts, self.root_of, self.pool_cap
        c.governed = self.governed
        c.alloc = {queue: dict(self.alloc.get(queue, {}))}
        root = self.root_of.get(queue)
        c.pool_used = {} if root is None else {root: dict(self.pool_used.get(root, {}))}
        c.user_gpus = {}
        c._origin = None
        return c

    def adopt(self, source: QuotaBook, queue: str) -> None:
        """Copy ``queue``'s allocation from ``source`` into this scratch copy, unless it is here already."""
        if queue not in self.alloc:
            self.alloc[queue] = dict(source.alloc.get(queue, {}))

    # ------------------------------------------------------------------ configuration

    def set_queue(self, spec: QueueSpec) -> None:
        self.queues[spec.name] = spec
        self.alloc.setdefault(spec.name, {})
        self.rebuild()

    def set_cohort(self, spec: CohortSpec) -> None:
        self.cohorts[spec.name] = spec
        self.rebuild()

    def root(self, cohort: str | None) -> str | None:
        seen: set[str] = set()
        while cohort is not None and cohort not in seen:
            seen.add(cohort)
            parent = self.cohorts[cohort].parent if cohort in self.cohorts else None
            if parent is None:
                return cohort
            cohort = parent
        return cohort

    def ancestors(self, queue: str) -> list[str]:
        """The cohorts above ``queue``, nearest first."""
        out: list[str] = []
        spec = self.queues.get(queue)
        cohort = spec.cohort if spec else None
        while cohort is not None and cohort not in out:
            out.append(cohort)
            cohort = self.cohorts[cohort].parent if cohort in self.cohorts else None
        return out

    def is_governed(self, queue: str, resource: str) -> bool:
        return resource.startswith(GPU_PREFIX) or resource in self.governed.get(queue, frozenset())

    def rebuild(self) -> None:
        self.root_of = {name: self.root(spec.cohort) for name, spec in self.queues.items()}
        declared: dict[str, set[str]] = {}
        for name, spec in self.queues.items():
            group = self.root_of[name] or f"queue:{name}"
            declared.setdefault(group, set()).update(r for r in spec.quotas if not r.startswith(GPU_PREFIX))
        self.governed = {
            name: frozenset(declared.get(self.root_of[name] or f"queue:{name}", ())) for name in self.queues
        }
        self.pool_cap, self.pool_used = {}, {}
        for name, spec in self.queues.items():
            root = self.root_of[name]
            if root is None:
                continue
            cap = self.pool_cap.setdefault(root, {})
            for res, q in spec.quotas.items():
                cap[res] = cap.get(res, 0) + q.nominal - _guaranteed(spec, res)
            used = self.pool_used.setdefault(root, {})
            for res, amount in self.alloc.get(name, {}).items():
                used[res] = used.get(res, 0) + max(0, amount - _guaranteed(spec, res))

    # ------------------------------------------------------------------ usage

    def _own(self, table: dict[str, Amounts], origin: dict[str, Amounts] | None, name: str) -> Amounts:
        """``table[name]`` (created empty if missing), copied first if it is still ``origin``'s."""
        amounts = table.get(name)
        if amounts is None:
            amounts = table[name] = {}
        elif origin is not None and origin.get(name) is amounts:
            amounts = table[name] = dict(amounts)
        return amounts

    def add(self, queue: str, req: Mapping[str, Amount], user: str, sign: int) -> None:
        spec = self.queues.get(queue)
        origin_alloc, origin_pools = self._origin or (None, None)
        alloc = self._own(self.alloc, origin_alloc, queue)
        root = self.root_of.get(queue)
        for res, amount in req.items():
            before = alloc.get(res, 0)
            after = before + sign * amount
            alloc[res] = after
            if spec is not None and root is not None:
                g = _guaranteed(spec, res)
                used = self._own(self.pool_used, origin_pools, root)
                used[res] = used.get(res, 0) + max(0, after - g) - max(0, before - g)
        gpus = sum(v for r, v in req.items() if r.startswith(GPU_PREFIX))
        if gpus:
            key = (queue, user)
            self.user_gpus[key] = self.user_gpus.get(key, 0) + sign * gpus

    def check(
        self,
        queue: str,
        req: Mapping[str, Amount],
        *,
        alloc: Mapping[str, Amount] | None = None,
        pool_used: Mapping[str, Amount] | None = None,
        may_borrow: bool = True,
        failed_on: list[str] | None = None,
    ) -> tuple[PendingReason | None, bool]:
        """(blocking reason or None, whether admitting ``req`` borrows from the cohort).

        ``alloc`` and ``pool_used`` replace the queue's allocation and its root pool's usage (what-if).
        ``may_borrow`` False (work that cannot be preempted) refuses anything above nominal: borrowed
        quota must stay reclaimable, so only preemptible work may run on it. ``failed_on``, if given, gets
        the resource that blocks. Each resource is judged on its own, and more of it never passes where
        less failed: a failure holds for any request with at least as much of that resource.
        """
        spec = self.queues[queue]
        root = self.root_of.get(queue)
        if alloc is None:
            alloc = self.alloc.get(queue, {})
        borrowed = False
        for res, amount in req.items():
            if amount <= 0 or not self.is_governed(queue, res):
                continue
            q = spec.quotas.get(res)
            nominal = q.nominal if q is not None else 0
            used = alloc.get(res, 0)
            new = used + amount
            if new <= nominal and root is None:
                continue
            if root is None:
                return _blocked(PendingReason.QUEUE_QUOTA, res, failed_on), False
            if new > nominal:
                borrowed = True
                if q is not None and q.borrowing_limit is not None and new > nominal + q.borrowing_limit:
                    return _blocked(PendingReason.QUEUE_QUOTA, res, failed_on), False
                if not may_borrow:
                    return _blocked(PendingReason.NON_PREEMPTIBLE_QUOTA, res, failed_on), False
            g = _guaranteed(spec, res)
            delta = max(0, new - g) - max(0, used - g)
            used_pool = self.pool_used.get(root, {}) if pool_used is None else pool_used
            if delta > 0 and used_pool.get(res, 0) + delta > self.pool_cap.get(root, {}).get(res, 0):
                return _blocked(PendingReason.COHORT_QUOTA, res, failed_on), borrowed
        return None, borrowed

    def within_nominal(
        self, queue: str, req: Mapping[str, Amount], *, alloc: Mapping[str, Amount] | None = None
    ) -> bool:
        """Whether ``req`` on top of the queue's allocation (or ``alloc``) stays within its nominal quota."""
        spec = self.queues[queue]
        if alloc is None:
            alloc = self.alloc.get(queue, {})
        for res, amount in req.items():
            q = spec.quotas.get(res)
            if self.is_governed(queue, res) and alloc.get(res, 0) + amount > (q.nominal if q is not None else 0):
                return False
        return True

    def over_nominal(self, queue: str) -> bool:
        spec = self.queues.get(queue)
        if spec is None:
            return False
        for res, amount in self.alloc.get(queue, {}).items():
            q = spec.quotas.get(res)
            if self.is_governed(queue, res) and amount > (q.nominal if q is not None else 0):
                return True
        return False

    def most_pods(self, job: Job, gpu_type: str, high: int, *, companions: bool = True) -> int:
        """The most main-role pods of ``job`` (0 to ``high``) that its queue may take on ``gpu_type`` on top
        of what it uses now, by quota (borrowing only if the job is preemptible) and by its user's GPU
        limit, with its companion roles counted too (``companions`` False: they are held already, as
        for a running job that grows). Both only tighten with more pods, so a bisection finds it."""
        extra = job.companion_gpus if companions else 0

        def allowed(k: int) -> bool:
            req = job_request(job, gpu_type, k, companions=companions)
            if self.check(job.queue, req, may_borrow=job.preemptible)[0] is not None:
                return False
            return not (job.gpu_amount or extra) or self.user_ok(job.queue, job.user, k * job.gpu_amount + extra)

        low, top = 0, high
        while low < top:
            mid = (low + top + 1) // 2
            if allowed(mid):
                low = mid
            else:
                top = mid - 1
        return low

    def user_ok(self, queue: str, user: str, gpus: Amount) -> bool:
        limit = self.queues[queue].user_limit_gpus
        return limit is None or self.user_gpus.get((queue, user), 0) + gpus <= limit


def _blocked(reason: PendingReason, res: str, failed_on: list[str] | None) -> PendingReason:
    if failed_on is not None:
        failed_on.append(res)
    return reason
