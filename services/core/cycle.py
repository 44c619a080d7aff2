"""One scheduling cycle's scratch state (``Cycle``) and the admission of a single job on it (``Cycle.try_admit``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

from .capacity import CapacityIndex, fits_in_group
from .cycle_parts import Memo, Outcome, Shape, Wants
from .fairshare import history_share, weighted_share
from .forecast import Forecast
from .model import (
    CPU,
    GPU_PREFIX,
    MEMORY,
    Admit,
    Amount,
    Job,
    Node,
    PendingInfo,
    PendingReason,
    Placement,
    RunningJob,
    SchedulerConfig,
    TopologyMode,
    gpu_resource,
)
from .ordering import QueueOrder
from .placement import Placer
from .quota import job_request
from .reservations import Excluded, Reservations
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
    PendingReason.PROVISIONING: "nodes are being bought for {need}",
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


class Cycle:
    """Scratch state of one ``schedule`` call, in typed parts: scratch copies of capacity (``cap``) and quota
    (``book``), what the cycle decided (``out``), what the jobs it passed want (``wants``), answers kept for the
    cycle (``memo``), its reservations and its start estimates (``forecast``). The ``SchedulerState`` is only
    read, except for the node facts it keeps between cycles (``node_facts.NodeFacts``: see there why)."""

    def __init__(self, state: SchedulerState, now: float, config: SchedulerConfig) -> None:
        self.st = state
        self.now = now
        self.cfg = config
        self.order = QueueOrder.of(config)
        self.cap: CapacityIndex = state.cap.clone()
        self.book = state.book.clone()
        self.out = Outcome()
        self.wants = Wants()
        self.memo = Memo()
        booked = state.growth.exclusive(now) if state.growth.booked else None
        self.reservations = Reservations(now, self.estimate_of, self.scope, self.types_for, booked)
        self.forecast = Forecast(state, self.cap, self.book, now, config, self.estimate_of, self.scope,
                                 self.types_for)
        self._total_gpus = sum(v for r, v in state.totals.items() if r.startswith(GPU_PREFIX))
        self._all_types = sorted({t for _, t in state.cap.buckets})

    def next_waiting(self, walker: Iterator[str]) -> Job | None:
        """The next job of a queue's walk that this cycle has neither admitted nor rejected (None: the walk
        is over)."""
        out = self.out
        for job_id in walker:
            if job_id not in out.rejected and job_id not in out.admitted:
                return self.st.pending[job_id]
        return None

    def types_for(self, job: Job) -> list[str]:
        """GPU types the job may run on (its own, or every type present when it accepts any)."""
        return [job.gpu_type] if job.gpu_type else self._all_types

    # ------------------------------------------------------------------ ordering inputs

    def estimate_of(self, job: Job) -> float:
        est = self.st.estimate(job, self.cfg.learn_runtimes)
        return self.cfg.default_runtime_estimate_s if est is None else est

    def share(self, queue: str) -> float:
        """The queue's weighted dominant share (current allocation plus decayed history) this cycle."""
        shares = self.memo.shares
        s = shares.get(queue)
        if s is None:
            s = shares[queue] = self.share_after(queue, {}, 0)
        return s

    def leaving(self, queue: str) -> dict[str, Amount]:
        """What the queue's work that is being stopped (earlier, or by this cycle) still holds."""
        out = dict(self.out.stopped.get(queue, {}))
        for jid in self.st.stopping_by_queue.get(queue, ()):
            self.add_held(out, self.st.running[jid])
        return out

    def stop(self, rj: RunningJob) -> None:
        """Note that this cycle preempts the whole of ``rj``."""
        self.out.taken.add(rj.job.job_id)
        self.add_held(self.out.stopped.setdefault(rj.job.queue, {}), rj)

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
        memo = self.memo.borrows.setdefault(job.queue, {})
        key = (job.gpus_per_pod, job.gpu_share, job.cpu_m, job.memory_mb, job.min_size, job.gpu_type, job.companions)
        answer = memo.get(key)
        if answer is None:
            answer = memo[key] = self._borrows_now(job)
        return answer

    def _borrows_now(self, job: Job) -> bool:
        room = self.memo.headroom.get(job.queue)
        if room is None:
            spec = self.book.queues[job.queue]
            alloc = self.book.alloc.get(job.queue, {})
            room = {r: q.nominal - alloc.get(r, 0) for r, q in spec.quotas.items()}
            self.memo.headroom[job.queue] = room
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

    # ------------------------------------------------------------------ a job's pool

    def scope(self, job: Job, gpu_type: str) -> frozenset[str] | None:
        """The nodes of ``gpu_type`` that ``job``'s node selector allows (its pool), whatever their health
        or free capacity; None for a job without a selector (every node of the type). Cached until the
        node set changes."""
        if not job.node_selector:
            return None
        scopes = self.st.facts.scopes
        key = (gpu_type, job.selector_key)
        hit = scopes.get(key)
        if hit is not None:
            return hit
        names = frozenset(
            name
            for name, node in self.cap.nodes.items()
            if node.gpu_type == gpu_type and job.selects(node.labels)
        )
        scopes[key] = names
        return names

    # ------------------------------------------------------------------ admission of one job

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
            excluded = self.reservations.exclusion_for(job)
        else:  # a miss here is remembered apart from the job's unconfined ones
            excluded = Excluded(frozenset(self.cap.nodes).difference(within), ("within:" + job.job_id,))
        shape = _shape(job)
        best: PendingReason | None = None
        for gpu_type in self.types_for(job):
            key = (gpu_type, shape, pods, excluded.held)
            reason = self.memo.fails.get(key)  # capacity only shrinks within a cycle: a miss stays a miss
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
                    reason = self.memo.fails[key] = self._why_not_placed(job, gpu_type, pods, excluded)
            if best is None or _PRECEDENCE.index(reason) < _PRECEDENCE.index(best):
                best = reason
        return best if best is not None else PendingReason.NO_MATCHING_NODES

    def _known_quota_failure(self, job: Job, req: Mapping[str, Amount]) -> PendingReason | None:
        """The reason a request is out of quota, known from an earlier request of this cycle of the queue that
        asked no more of one of its resources (quota is judged per resource and only tightens in a cycle)."""
        floors = self.memo.quota_floors
        for res, amount in req.items():
            known = floors.get((job.queue, job.preemptible, res))
            if known is not None and amount >= known[0]:
                return known[1]
        return None

    def _remember_quota_failure(self, job: Job, res: str, amount: Amount, reason: PendingReason) -> None:
        key = (job.queue, job.preemptible, res)
        floors = self.memo.quota_floors
        known = floors.get(key)
        if known is None or amount < known[0]:
            floors[key] = (amount, reason)

    def _most_pods(self, job: Job, gpu_type: str, pods: int) -> int:
        """The most pods an elastic job may start with. Jobs are walked in order, so a job tried before it
        that waits for capacity of this type is ahead of it (or of another queue): then only its minimum
        (``pods``), the rest is left to grow later. Otherwise as many of its replicas as its quota and user
        limit allow. A fixed-size job: ``pods``."""
        if not job.elastic or not self.cfg.elastic:
            return pods
        blocked = self.wants.blocked
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
        spent = self.memo.spent
        if queue in spent:
            return True
        for gpu_type in self._all_types:
            if self.book.check(queue, {gpu_resource(gpu_type): 1})[0] is None:
                return False
        spent.add(queue)
        return True

    def preemptor_queues(self) -> frozenset[str]:
        """Queues with a waiting job whose victims are still stopping (it holds their capacity)."""
        memo = self.memo
        if memo.preemptor_queues is None:
            pending = self.st.pending
            memo.preemptor_queues = frozenset(pending[j].queue for j in self.st.victims_of if j in pending)
        return memo.preemptor_queues

    def commit_admit(self, job: Job, gpu_type: str, placement: Placement, pods: int, borrowed: bool,
                     bought: bool = False) -> None:
        for a in placement.nodes:
            self.cap.take_for(job, a)
        if not bought:
            self.book.add(job.queue, job_request(job, gpu_type, pods), job.user, +1)
        out, memo = self.out, self.memo
        out.admitted[job.job_id] = (len(out.decisions), job, gpu_type)
        out.decisions.append(Admit(job.job_id, job.attempt, placement, pods, borrowed, bought))
        out.admissions += 1
        memo.shares.pop(job.queue, None)
        memo.headroom.pop(job.queue, None)
        memo.borrows.pop(job.queue, None)
        run = RunningJob(job, placement, pods, self.now, borrowed)
        self.forecast.admitted(run, gpu_type, self.now + self.estimate_of(job))

    def feasible(self, job: Job, pods: int) -> bool:
        """Whether the job could ever run on the current node set (cached until nodes change): its main role
        on one cluster's nodes of a GPU type, and every companion role on that cluster's nodes."""
        feasible = self.st.facts.feasible
        key = (_shape(job), pods)
        hit = feasible.get(key)
        if hit is not None:
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
        feasible[key] = ok
        return ok

    def _empty_index(self) -> CapacityIndex:
        """Every node, healthy and empty: where a job could run once everything else ended (cached until the
        node set changes)."""
        facts = self.st.facts
        if facts.empty is not None:
            return facts.empty
        index = CapacityIndex()
        for node in self.cap.nodes.values():
            index.add_node(replace(node, healthy=True, schedulable=True), ())
        facts.empty = index
        return index

    # ------------------------------------------------------------------ reasons, statuses and wants

    def lent_out(self, job: Job, reason: PendingReason) -> PendingReason:
        """``QUOTA_LENT`` for a job refused by its cohort although it asks only for its own queue's nominal
        quota (that quota is lent, and could not be reclaimed); ``reason`` itself otherwise."""
        if reason is not PendingReason.COHORT_QUOTA:
            return reason
        pods = max(job.min_size, 1)
        if any(self.book.within_nominal(job.queue, job_request(job, t, pods)) for t in self.types_for(job)):
            return PendingReason.QUOTA_LENT
        return reason

    def report(self, job: Job, reason: PendingReason, position: int | None, start: float | None) -> None:
        self.out.info[job.job_id] = PendingInfo(job.job_id, reason, describe(reason, job), position, start)

    def note_wanted(self, job: Job) -> None:
        self.wants.wanted.add(job.gpu_type)

    def note_blocked(self, job: Job) -> None:
        """A job tried in the walk waits for capacity: later elastic jobs start with their minimum only
        (the same jobs are tried, in the same order, whether or not the cycle reports statuses)."""
        wants = self.wants
        wants.blocked.add(job.gpu_type)
        wants.wanted.add(job.gpu_type)

    def note_quota_wanted(self, job: Job) -> None:
        """A job waits for quota: elastic jobs sharing that quota must not grow into it."""
        wants = self.wants
        wants.quota_queues.add(job.queue)
        root = self.book.root_of.get(job.queue)
        if root is not None:
            wants.quota_cohorts.add(root)


def _shape(job: Job) -> Shape:
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
