"""One scheduling cycle: scratch copies of capacity and quota, and the admission of single jobs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from .capacity import CapacityIndex, fits_in_group
from .estimate import Pool, gpus_in, running_ends
from .fairshare import history_share, weighted_share
from .model import (
    CPU,
    GPU_PREFIX,
    MEMORY,
    Admit,
    Amount,
    Decision,
    Job,
    Node,
    PendingInfo,
    PendingReason,
    Placement,
    Reservation,
    RunningJob,
    SchedulerConfig,
    TopologyMode,
    gpu_resource,
)
from .ordering import QueueOrder
from .placement import Placer
from .quota import job_request
from .quota_estimate import QuotaReleases
from .state import SchedulerState

# most informative first: the closer a reason is to "would run", the better it explains the wait
_PRECEDENCE = (
    PendingReason.BEHIND_RESERVATION,
    PendingReason.CAPACITY,
    PendingReason.TOPOLOGY,
    PendingReason.COHORT_QUOTA,
    PendingReason.NON_PREEMPTIBLE_QUOTA,
    PendingReason.QUEUE_QUOTA,
)

MESSAGES: dict[PendingReason, str] = {
    PendingReason.QUEUED: "waiting behind jobs ahead of it in order",
    PendingReason.QUEUE_QUOTA: "queue {queue} has no quota left for {need}",
    PendingReason.COHORT_QUOTA: "cohort of queue {queue} has no idle quota to lend for {need}",
    PendingReason.NON_PREEMPTIBLE_QUOTA: "non-preemptible work may only use queue {queue}'s nominal quota "
    "({need} would borrow)",
    PendingReason.QUOTA_LENT: "queue {queue}'s nominal quota for {need} is lent to other queues of its cohort "
    "and cannot be reclaimed now (their work is not preemptible or already stopping, or preemption is off)",
    PendingReason.USER_LIMIT: "user {user} reached the per-user GPU limit of queue {queue}",
    PendingReason.BUDGET: "tenant {tenant} has used up its GPU-hour budget",
    PendingReason.CAPACITY: "not enough free capacity for {need} right now",
    PendingReason.TOPOLOGY: "no single {level} has room for all pods of {need}",
    PendingReason.RESERVATION: "capacity is reserved for it; starts when running jobs end",
    PendingReason.BEHIND_RESERVATION: "would delay a job holding a reservation",
    PendingReason.NO_MATCHING_NODES: "no node can ever host {need} (GPU type, selector, taints or size)",
    PendingReason.PREEMPTING: "lower-priority or borrowed work is being stopped for it",
    PendingReason.PROTECTED: "lower-priority or borrowed work will be preempted for it once it has run its minimum "
    "runtime",
    PendingReason.SUSPENDED: "suspended",
}


def describe(reason: PendingReason, job: Job) -> str:
    if job.mig_profile:
        need = f"{job.min_size}x{job.mig_per_pod} MIG {job.mig_profile} slice{'' if job.mig_per_pod == 1 else 's'}"
    elif job.gpu_share:
        need = f"{job.min_size}x{job.gpu_share} of a shared GPU"
    else:
        need = f"{job.min_size}x{job.gpus_per_pod} GPU{'' if job.gpus_per_pod == 1 else 's'}"
    if job.gpu_type:
        need += f" ({job.gpu_type})"
    if job.companions:
        need += " with " + ", ".join(
            f"{c.name} {c.replicas}x{c.gpus_per_pod} GPU{'' if c.gpus_per_pod == 1 else 's'}" if c.gpus_per_pod
            else f"{c.name} x{c.replicas}" for c in job.companions)
    level = job.topology.level if job.topology is not None else "domain"
    return MESSAGES.get(reason, reason.value).format(
        queue=job.queue, need=need, user=job.user or "-", tenant=job.tenant or "-", level=level
    )


class Excluded:
    """Nodes a job may not use: the reservations' nodes when the job would delay the reserved jobs
    (``held`` names those reservations' jobs)."""

    __slots__ = ("held", "reserved")

    def __init__(self, reserved: frozenset[str], held: tuple[str, ...] = ()) -> None:
        self.reserved = reserved
        self.held = held

    def __contains__(self, name: object) -> bool:
        return name in self.reserved


_NOTHING_EXCLUDED = Excluded(frozenset())


class Cycle:
    """Scratch state of one ``schedule`` call; the ``SchedulerState`` itself is never changed."""

    def __init__(self, state: SchedulerState, now: float, config: SchedulerConfig) -> None:
        self.st = state
        self.now = now
        self.cfg = config
        self.order = QueueOrder.of(config)
        self.cap: CapacityIndex = state.cap.clone()
        self.book = state.book.clone()
        self.decisions: list[Decision] = []
        self.info: dict[str, PendingInfo] = {}
        #: the cycle's reservations with the nodes their jobs may use (None: unconfined, every node). One
        #: unconfined reservation excludes every other; jobs confined to disjoint pools each get their own
        self.reservations: list[tuple[Reservation, frozenset[str] | None]] = []
        self._exclusions: dict[tuple[str, ...], Excluded] = {}
        self.taken: set[str] = set()  # running jobs already preempted, shrunk or grown this cycle
        # per queue, the running elastic jobs below full size, by their place in the queue's order (lazily)
        self.growers: dict[str, list[tuple[tuple[int, float], str]]] | None = None
        self.stopped: dict[str, dict[str, Amount]] = {}  # queue -> what its jobs preempted this cycle hold
        self.rejected: set[str] = set()
        #: preemptors that took their turn at the start of the cycle and hold their placement while their
        #: victims stop -> when the victims should be gone
        self.front: dict[str, float] = {}
        self.admitted: dict[str, tuple[int, Job, str]] = {}  # job -> (decision index, job, gpu type)
        self.admitted_runs: dict[str, list[tuple[float, RunningJob]]] = {}  # gpu type -> (est end, run)
        self.fails: dict[tuple[object, ...], PendingReason] = {}
        #: (queue, preemptible, resource) -> the least of it found out of quota this cycle, and why; usage only
        #: grows within a cycle, so more of it stays out of quota
        self.quota_floors: dict[tuple[str, bool, str], tuple[Amount, PendingReason]] = {}
        self.pools: dict[str, Pool] = {}
        self.scoped_pools: dict[tuple[str, tuple[tuple[str, str], ...]], Pool] = {}  # (type, selector) -> model
        self.ahead: dict[str, Pool] = {}  # the fluid model of ``start_in_order`` (decisions only)
        self.quota_releases = QuotaReleases(state, self.book, now, config.default_runtime_estimate_s)
        self.shares: dict[str, float] = {}
        self.wanted: set[str] = set()  # GPU types blocked jobs could use ("" = any)
        # GPU types that jobs tried earlier in the walk could not get ("" = any): those jobs are ahead
        self.blocked: set[str] = set()
        self.quota_wanted: set[str] = set()  # queues and "cohort:<root>" that jobs wait on for quota
        self.preempt_attempts = 0
        self.moves = 0  # running jobs moved this cycle to consolidate (``consolidation``)
        self.victim_lists: dict[str, list[tuple[int, bool, float, str]]] = {}
        self.admissions = 0
        total = sum(v for r, v in state.totals.items() if r.startswith(GPU_PREFIX))
        self._total_gpus = total
        self._all_types = sorted({t for _, t in state.cap.buckets})
        self._headroom: dict[str, dict[str, Amount]] = {}  # queue -> nominal minus admitted
        self._borrows: dict[str, dict[tuple[object, ...], bool]] = {}  # queue -> request shape -> borrows
        self._spent: set[str] = set()  # queues that cannot take one more GPU of any type this cycle
        self._preemptor_queues: frozenset[str] | None = None

    def types_for(self, job: Job) -> list[str]:
        """GPU types the job may run on (its own, or every type present when it accepts any)."""
        return [job.gpu_type] if job.gpu_type else self._all_types

    # ------------------------------------------------------------------ ordering inputs

    def estimate_of(self, job: Job) -> float:
        est = self.st.estimate(job, self.cfg.learn_runtimes)
        return self.cfg.default_runtime_estimate_s if est is None else est

    def share(self, queue: str) -> float:
        """The queue's weighted dominant share (current allocation plus decayed history) this cycle."""
        s = self.shares.get(queue)
        if s is None:
            s = self.shares[queue] = self.share_after(queue, {}, 0)
        return s

    def leaving(self, queue: str) -> dict[str, Amount]:
        """What the queue's work that is being stopped (earlier, or by this cycle) still holds."""
        out = dict(self.stopped.get(queue, {}))
        for jid in self.st.stopping_by_queue.get(queue, ()):
            self.add_held(out, self.st.running[jid])
        return out

    def stop(self, rj: RunningJob) -> None:
        """Note that this cycle preempts the whole of ``rj``."""
        self.taken.add(rj.job.job_id)
        self.add_held(self.stopped.setdefault(rj.job.queue, {}), rj)

    def add_held(self, amounts: dict[str, Amount], rj: RunningJob) -> None:
        """Add what the running job holds (its quota resources) to ``amounts``."""
        for res, amount in job_request(rj.job, self.st.run_type.get(rj.job.job_id, ""), rj.replicas).items():
            amounts[res] = amounts.get(res, 0) + amount

    def share_after(self, queue: str, req: Mapping[str, Amount], sign: int) -> float:
        """The queue's weighted share if ``req`` were added to (+1) or taken from (-1) its allocation."""
        spec = self.book.queues[queue]
        weight = spec.weight
        for cohort in self.book.ancestors(queue):
            c = self.book.cohorts.get(cohort)
            if c is not None:
                weight *= c.weight
        h = self.cfg.fair_share_half_life_s
        hist = history_share(self.st.decayed_usage(queue, self.now, h), self._total_gpus, h)
        alloc = self.book.alloc.get(queue, {})
        if sign:
            alloc = dict(alloc)
            for res, amount in req.items():
                alloc[res] = alloc.get(res, 0) + sign * amount
        return weighted_share(alloc, self.st.totals, hist, weight)

    def order_key(self, job: Job) -> tuple[bool, int, int, float, float, str]:
        """Jobs within their queue's nominal quota first (so reclaimed quota is not lent straight
        back), then priority, starvation, weighted fair share and submit time."""
        starving = self.now - job.submit_time > self.cfg.starvation_age_s
        share = self.share(job.queue) if self.cfg.fair_share and not starving else 0.0
        return (self.borrows(job), -job.priority, 0 if starving else 1, share, job.submit_time, job.job_id)

    def borrows(self, job: Job) -> bool:
        """Whether admitting the job would take its queue above nominal quota on every GPU type."""
        memo = self._borrows.setdefault(job.queue, {})
        key = (job.gpus_per_pod, job.gpu_share, job.cpu_m, job.memory_mb, job.min_size, job.gpu_type, job.companions)
        answer = memo.get(key)
        if answer is None:
            answer = memo[key] = self._borrows_now(job)
        return answer

    def _borrows_now(self, job: Job) -> bool:
        room = self._headroom.get(job.queue)
        if room is None:
            spec = self.book.queues[job.queue]
            alloc = self.book.alloc.get(job.queue, {})
            room = {r: q.nominal - alloc.get(r, 0) for r, q in spec.quotas.items()}
            self._headroom[job.queue] = room
        pods = max(job.min_size, 1)
        cpu, mem = job.cpu_m * pods, job.memory_mb * pods
        for c in job.companions:
            cpu += c.cpu_m * c.replicas
            mem += c.memory_mb * c.replicas
        if self.book.is_governed(job.queue, CPU) and cpu > room.get(CPU, 0):
            return True
        if self.book.is_governed(job.queue, MEMORY) and mem > room.get(MEMORY, 0):
            return True
        gpus = job.amount_at(pods)
        return all(gpus > room.get(gpu_resource(t), 0) for t in self.types_for(job))

    # ------------------------------------------------------------------ admission of one job

    # ------------------------------------------------------------------ pools and reservations

    def scope(self, job: Job, gpu_type: str) -> frozenset[str] | None:
        """The nodes of ``gpu_type`` that ``job``'s node selector allows (its pool), whatever their health
        or free capacity; None for a job without a selector (every node of the type). Cached until the
        node set changes."""
        if not job.node_selector:
            return None
        key = ("scope", gpu_type, job.selector_key)
        hit = self.st.cache.get(key)
        if isinstance(hit, frozenset):
            return hit
        names = frozenset(
            name
            for name, node in self.cap.nodes.items()
            if node.gpu_type == gpu_type and job.selects(node.labels)
        )
        self.st.cache[key] = names
        return names

    def may_reserve(self, job: Job) -> bool:
        """Whether ``job`` may take a reservation: none is held yet, or the job is confined to a pool that
        shares no node with the pools of those held (so it can neither delay them nor be delayed)."""
        if not self.reservations:
            return True
        if not job.node_selector or any(scope is None for _, scope in self.reservations):
            return False
        for gpu_type in self.types_for(job):
            mine = self.scope(job, gpu_type)
            assert mine is not None
            if any(not mine.isdisjoint(scope) for _, scope in self.reservations if scope is not None):
                return False
        return True

    def add_reservation(self, res: Reservation, job: Job) -> None:
        scope: frozenset[str] | None = None
        if job.node_selector:
            scope = frozenset().union(*(self.scope(job, t) or () for t in self.types_for(job)))
        self.reservations.append((res, scope))
        self._exclusions.clear()

    def exclusion_for(self, job: Job) -> Excluded:
        """The reserved nodes ``job`` may not use: those of every reservation it would delay."""
        if not self.reservations:
            return _NOTHING_EXCLUDED
        end = self.now + self.estimate_of(job)
        if len(self.reservations) == 1:  # the common case: one reservation, no tuple to build
            res = self.reservations[0][0]
            if res.job_id == job.job_id or end <= res.time:
                return _NOTHING_EXCLUDED
            return self._excluding((res.job_id,))
        held = tuple(r.job_id for r, _ in self.reservations if r.job_id != job.job_id and end > r.time)
        return self._excluding(held)

    def exclusion_for_growth(self) -> Excluded:
        return self._excluding(tuple(r.job_id for r, _ in self.reservations))

    def _excluding(self, held: tuple[str, ...]) -> Excluded:
        if not held:
            return _NOTHING_EXCLUDED
        found = self._exclusions.get(held)
        if found is None:
            nodes = [r.nodes for r, _ in self.reservations if r.job_id in held]
            found = self._exclusions[held] = Excluded(nodes[0] if len(nodes) == 1 else frozenset().union(*nodes), held)
        return found

    def try_admit(self, job: Job, within: frozenset[str] | None = None) -> PendingReason | None:
        """Admit ``job`` on the scratch state if it fits now; otherwise the reason it does not. ``within``
        confines it to those nodes (the reservations' exclusions do not apply then)."""
        st, book = self.st, self.book
        tenant = job.tenant or book.queues[job.queue].tenant
        if tenant and tenant in st.exhausted:
            return PendingReason.BUDGET
        pods = max(job.min_size, 1)
        if job.needs_gpus and not book.user_ok(job.queue, job.user, job.amount_at(pods)):
            return PendingReason.USER_LIMIT
        if not self.feasible(job, pods):
            return PendingReason.NO_MATCHING_NODES
        if within is None:
            excluded = self.exclusion_for(job)
        else:  # a miss here is remembered apart from the job's unconfined ones
            excluded = Excluded(frozenset(self.cap.nodes).difference(within), ("within:" + job.job_id,))
        shape = _shape(job)
        best: PendingReason | None = None
        for gpu_type in self.types_for(job):
            key = (gpu_type, shape, pods, excluded.held)
            reason = self.fails.get(key)  # capacity only shrinks within a cycle: a miss stays a miss
            if reason is None:
                req = job_request(job, gpu_type, pods)
                reason = self._known_quota_failure(job, req)
                borrowed = False
                if reason is None:
                    failed_on: list[str] = []
                    reason, borrowed = book.check(job.queue, req, may_borrow=job.preemptible, failed_on=failed_on)
                    if reason is not None:
                        self._remember_quota_failure(job, failed_on[0], req[failed_on[0]], reason)
                if reason is None:
                    spread = not self.cfg.bin_packing
                    most = self._most_pods(job, gpu_type, pods)
                    placement = Placer(self.cap, job, excluded, spread).place(gpu_type, pods, most)
                    if placement is not None:
                        placed = placement.pods
                        if placed > pods:
                            borrowed = book.check(job.queue, job_request(job, gpu_type, placed),
                                                  may_borrow=job.preemptible)[1]
                        self.commit_admit(job, gpu_type, placement, placed, borrowed)
                        return None
                    reason = self.fails[key] = self._why_not_placed(job, gpu_type, pods, excluded)
            if best is None or _PRECEDENCE.index(reason) < _PRECEDENCE.index(best):
                best = reason
        return best if best is not None else PendingReason.NO_MATCHING_NODES

    def _known_quota_failure(self, job: Job, req: Mapping[str, Amount]) -> PendingReason | None:
        """The reason a request is out of quota, known from an earlier request of this cycle of the queue that
        asked no more of one of its resources (quota is judged per resource and only tightens in a cycle)."""
        floors = self.quota_floors
        for res, amount in req.items():
            known = floors.get((job.queue, job.preemptible, res))
            if known is not None and amount >= known[0]:
                return known[1]
        return None

    def _remember_quota_failure(self, job: Job, res: str, amount: Amount, reason: PendingReason) -> None:
        key = (job.queue, job.preemptible, res)
        known = self.quota_floors.get(key)
        if known is None or amount < known[0]:
            self.quota_floors[key] = (amount, reason)

    def _most_pods(self, job: Job, gpu_type: str, pods: int) -> int:
        """The most pods an elastic job may start with. Jobs are walked in order, so a job tried before it
        that waits for capacity of this type is ahead of it (or of another queue): then only its minimum
        (``pods``), the rest is left to grow later. Otherwise as many of its replicas as its quota and user
        limit allow. A fixed-size job: ``pods``."""
        if not job.elastic or not self.cfg.elastic:
            return pods
        blocked = self.blocked
        if blocked and ("" in blocked or gpu_type in blocked or not job.gpu_type):
            return pods
        return max(pods, self.book.most_pods(job, gpu_type, job.replicas))

    def _why_not_placed(self, job: Job, gpu_type: str, pods: int, excluded: Excluded) -> PendingReason:
        if excluded.reserved and Placer(self.cap, job).place(gpu_type, pods, pods) is not None:
            return PendingReason.BEHIND_RESERVATION
        topo = job.topology
        if topo is not None and topo.mode is TopologyMode.REQUIRED:
            loose = replace(job, topology=None)
            if Placer(self.cap, loose, excluded).place(gpu_type, pods, pods) is not None:
                return PendingReason.TOPOLOGY
        return PendingReason.CAPACITY

    def quota_spent(self, queue: str) -> bool:
        """Whether ``queue`` is refused even a single GPU of every type (it stays so for the cycle)."""
        if queue in self._spent:
            return True
        for gpu_type in self._all_types:
            if self.book.check(queue, {gpu_resource(gpu_type): 1})[0] is None:
                return False
        self._spent.add(queue)
        return True

    def preemptor_queues(self) -> frozenset[str]:
        """Queues with a waiting job whose victims are still stopping (it holds their capacity)."""
        if self._preemptor_queues is None:
            pending = self.st.pending
            self._preemptor_queues = frozenset(pending[j].queue for j in self.st.victims_of if j in pending)
        return self._preemptor_queues

    def commit_admit(self, job: Job, gpu_type: str, placement: Placement, pods: int, borrowed: bool) -> None:
        for a in placement.nodes:
            self.cap.take_for(job, a)
        self.book.add(job.queue, job_request(job, gpu_type, pods), job.user, +1)
        self.admitted[job.job_id] = (len(self.decisions), job, gpu_type)
        self.decisions.append(Admit(job.job_id, job.attempt, placement, pods, borrowed))
        self.admissions += 1
        self.shares.pop(job.queue, None)
        self._headroom.pop(job.queue, None)
        self._borrows.pop(job.queue, None)
        run = RunningJob(job, placement, pods, self.now, borrowed)
        end = self.now + self.estimate_of(job)
        self.admitted_runs.setdefault(gpu_type, []).append((end, run))
        pool = self.pools.get(gpu_type)
        if pool is not None:
            pool.occupy(job.gpus_at(pods), end)
        if self.scoped_pools:
            for (t, _), scoped in self.scoped_pools.items():
                if t == gpu_type:
                    gpus = gpus_in(run, scoped.scope)
                    if gpus:
                        scoped.occupy(gpus, end)

    def feasible(self, job: Job, pods: int) -> bool:
        """Whether the job could ever run on the current node set (cached until nodes change): its main role
        on one cluster's nodes of a GPU type, and every companion role on that cluster's nodes."""
        key = ("feasible", _shape(job), pods)
        hit = self.st.cache.get(key)
        if isinstance(hit, bool):
            return hit
        topo = job.topology
        single = topo is not None and topo.mode is TopologyMode.REQUIRED and topo.level == "node"
        per_type: dict[tuple[str, str], int] = {}
        best_single: dict[tuple[str, str], int] = {}
        for node, count in self.st.node_kinds.values():  # one entry per distinct node shape
            if job.gpu_type and node.gpu_type != job.gpu_type:
                continue
            if job.cluster is not None and node.cluster != job.cluster:
                continue
            if not _eligible_ignoring_health(node, job):
                continue
            n = _empty_node_pods(node, job, pods)
            k = (node.cluster, node.gpu_type)
            per_type[k] = per_type.get(k, 0) + n * count
            best_single[k] = max(best_single.get(k, 0), n)
        room = best_single if single else per_type
        ok = any(v >= pods for v in room.values())
        if ok and job.companions:  # the whole gang on an empty cluster: companions and main role share nodes
            empty = self._empty_index()
            ok = any(Placer(empty, job).place(t, pods, pods) is not None for t in self.types_for(job))
        self.st.cache[key] = ok
        return ok

    def _empty_index(self) -> CapacityIndex:
        """Every node, healthy and empty: where a job could run once everything else ended (cached until the
        node set changes)."""
        hit = self.st.cache.get("empty-index")
        if isinstance(hit, CapacityIndex):
            return hit
        index = CapacityIndex()
        for node in self.cap.nodes.values():
            index.add_node(replace(node, healthy=True, schedulable=True), ())
        self.st.cache["empty-index"] = index
        return index

    # ------------------------------------------------------------------ estimates and statuses

    def pool(self, gpu_type: str) -> Pool:
        """The cycle's fluid model of one GPU type, which the statuses' start estimates commit into."""
        pool = self.pools.get(gpu_type)
        if pool is None:
            pool = self.pools[gpu_type] = self._fresh_pool(gpu_type)
        return pool

    def pool_for(self, job: Job, gpu_type: str) -> Pool:
        """The statuses' fluid model for ``job`` on ``gpu_type``: the nodes of its pool when a node selector
        confines it, every node of the type otherwise."""
        if not job.node_selector:
            return self.pool(gpu_type)
        key = (gpu_type, job.selector_key)
        pool = self.scoped_pools.get(key)
        if pool is None:
            pool = self.scoped_pools[key] = self._fresh_pool(gpu_type, self.scope(job, gpu_type))
        return pool

    def _fresh_pool(self, gpu_type: str, scope: frozenset[str] | None = None) -> Pool:
        cap = self.cap
        if scope is None:
            free = sum(cap.group_free(k) for k in cap.buckets if k[1] == gpu_type)
            total = self.st.totals.get(gpu_resource(gpu_type), 0)
        else:
            usable = [n for n in scope if CapacityIndex.usable(cap.nodes[n])]
            free = sum(max(cap.free[n], 0) for n in usable)
            total = sum(cap.nodes[n].gpus for n in usable)
        source = running_ends(self.st, gpu_type, self.now, self.cfg.default_runtime_estimate_s, scope)
        pool = Pool(self.now, free, total, source, scope)
        for end, run in self.admitted_runs.get(gpu_type, ()):
            gpus = gpus_in(run, scope)
            if gpus:
                pool.release_at(end, gpus)
        return pool

    def start_in_order(self, job: Job, commit: bool) -> float | None:
        """When ``job`` should start without preempting anything: after the running jobs' estimated
        ends, this cycle's admissions and the blocked jobs considered before it (``commit`` adds
        ``job`` to those). Kept apart from the statuses' estimates, so that decisions taken from it
        are the same whether or not the cycle reports statuses. None: not known, also for a job confined
        by a node selector (a pool): the model holds every node of a GPU type and would promise it GPUs
        it can never use."""
        if job.node_selector:
            return None
        gpus = job.min_gpus
        best: tuple[float, str] | None = None
        for gpu_type in self.types_for(job):
            pool = self.ahead.get(gpu_type)
            if pool is None:
                pool = self.ahead[gpu_type] = self._fresh_pool(gpu_type)
            t = pool.probe(gpus)
            if t is not None and (best is None or t < best[0]):
                best = (t, gpu_type)
        if best is not None and commit:
            self.ahead[best[1]].commit(gpus, self.estimate_of(job))
        return None if best is None else best[0]

    def estimate_start(self, job: Job) -> float | None:
        """Fluid estimate of when the job starts if the jobs ahead of it start first."""
        gpus = job.min_gpus
        if gpus <= 0:
            return None
        types = self.types_for(job)
        if len(types) == 1:
            return self.pool_for(job, types[0]).commit(gpus, self.estimate_of(job))
        best: tuple[float, str] | None = None
        for gpu_type in types:
            t = self.pool_for(job, gpu_type).probe(gpus)
            if t is not None and (best is None or t < best[0]):
                best = (t, gpu_type)
        if best is None:
            return None
        return self.pool_for(job, best[1]).commit(gpus, self.estimate_of(job))

    def lent_out(self, job: Job, reason: PendingReason) -> PendingReason:
        """``QUOTA_LENT`` for a job refused by its cohort although it asks only for its own queue's nominal
        quota (that quota is lent, and could not be reclaimed); ``reason`` itself otherwise."""
        if reason is not PendingReason.COHORT_QUOTA:
            return reason
        pods = max(job.min_size, 1)
        if any(self.book.within_nominal(job.queue, job_request(job, t, pods)) for t in self.types_for(job)):
            return PendingReason.QUOTA_LENT
        return reason

    def quota_start(self, job: Job, reason: PendingReason, capacity_start: float | None) -> float | None:
        """The later of the capacity estimate and the time quota frees up; None when quota never does."""
        released = self.quota_releases.start_time(job, reason, self.types_for(job))
        if released is None:
            return None
        return released if capacity_start is None else max(released, capacity_start)

    def report(self, job: Job, reason: PendingReason, position: int | None, start: float | None) -> None:
        self.info[job.job_id] = PendingInfo(job.job_id, reason, describe(reason, job), position, start)

    def note_wanted(self, job: Job) -> None:
        self.wanted.add(job.gpu_type)

    def note_blocked(self, job: Job) -> None:
        """A job tried in the walk waits for capacity: later elastic jobs start with their minimum only
        (the same jobs are tried, in the same order, whether or not the cycle reports statuses)."""
        self.blocked.add(job.gpu_type)
        self.wanted.add(job.gpu_type)

    def note_quota_wanted(self, job: Job) -> None:
        """A job waits for quota: elastic jobs sharing that quota must not grow into it."""
        self.quota_wanted.add(job.queue)
        root = self.book.root_of.get(job.queue)
        if root is not None:
            self.quota_wanted.add("cohort:" + root)


def _shape(job: Job) -> tuple[object, ...]:
    return (
        job.gpu_type,
        job.gpus_per_pod,
        job.gpu_share,
        job.mig_profile,
        job.mig_per_pod,
        job.cpu_m,
        job.memory_mb,
        job.selector_key,
        job.tolerations,
        job.topology,
        job.cluster,
        job.companions,
    )


def _eligible_ignoring_health(node: Node, job: Job) -> bool:
    if node.taints and not node.taints <= job.tolerations:
        return False
    return job.selects(node.labels)


def _empty_node_pods(node: Node, job: Job, limit: int) -> int:
    n = limit
    g = job.gpus_per_pod
    if g > 0:
        per_node = sum(size // g for size in node.nvlink_groups) if fits_in_group(node, g) else node.gpus // g
        n = min(n, per_node)
    if job.mig_profile:
        n = min(n, node.mig.get(job.mig_profile, 0) // max(job.mig_per_pod, 1))
    elif job.gpu_share:
        n = min(n, min(node.shared_gpus, node.gpus) * int(1 // job.gpu_share))
    if job.cpu_m and node.cpu_m:
        n = min(n, node.cpu_m // job.cpu_m)
    if job.memory_mb and node.memory_mb:
        n = min(n, node.memory_mb // job.memory_mb)
    return n
