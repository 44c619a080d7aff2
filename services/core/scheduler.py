"""The entry point: ``schedule(state, now, config)`` computes one cycle's decisions without mutating state."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import replace

from .backfill import find_reservation
from .consolidation import find_moves
from .cycle import Cycle
from .elastic import grow, grow_ahead_of, may_grow_in_walk
from .model import (
    CycleResult,
    Job,
    Node,
    PendingReason,
    Preempt,
    PreemptReason,
    Reject,
    Scale,
    SchedulerConfig,
)
from .pending import ordered
from .policy import resolve
from .preemption import (
    Plan,
    find_plan,
    fits,
    give_back,
    hold,
    hold_for_preemptor,
    hold_nominal,
    protected_until,
    take_freed,
)
from .state import SchedulerState

_QUOTA_BLOCKED = (
    PendingReason.QUEUE_QUOTA,
    PendingReason.COHORT_QUOTA,
    PendingReason.NON_PREEMPTIBLE_QUOTA,
    PendingReason.QUOTA_LENT,
)
_QUOTA_REASONS = (
    *_QUOTA_BLOCKED,
    PendingReason.USER_LIMIT,
    PendingReason.BUDGET,
    PendingReason.NO_MATCHING_NODES,
)
_PREEMPTABLE_REASONS = (
    PendingReason.QUEUE_QUOTA,
    PendingReason.COHORT_QUOTA,
    PendingReason.NON_PREEMPTIBLE_QUOTA,  # lower-priority work of its own queue may make nominal room
    PendingReason.CAPACITY,
)


def schedule(state: SchedulerState, now: float, config: SchedulerConfig, *, report: bool = True) -> CycleResult:
    """One scheduling cycle. Deterministic; the state is only read (fold decisions back with ``apply``).

    ``report`` False skips the waiting jobs' statuses (reason, position and the estimated start, the
    costly part with a large backlog): ``CycleResult.pending`` is then empty and callers keep the
    statuses of an earlier reporting cycle. The decisions are the same either way.
    """
    cfg = resolve(config)
    cycle = Cycle(state, now, cfg)
    _housekeeping(cycle)
    if cfg.policy == "fifo":
        _fifo_per_queue(cycle, report)
    elif cfg.policy == "fifo-global":
        _fifo(cycle, report)
    else:
        _ordered(cycle, report)
        if cfg.elastic:
            grow(cycle)
    if report:
        _suspended(cycle)
    return CycleResult(tuple(cycle.decisions), cycle.info)


# ---------------------------------------------------------------------- limits and health


def _housekeeping(cycle: Cycle) -> None:
    st, now = cycle.st, cycle.now
    for job_id, job in sorted(st.orphans.items()):
        cycle.decisions.append(Reject(job_id, PendingReason.UNKNOWN_QUEUE.value, f"unknown queue {job.queue!r}"))
    for deadline, job_id in ordered(st.wait_deadlines):
        if deadline > now:
            break
        waiting_job = st.pending.get(job_id) or st.suspended.get(job_id)
        limit = waiting_job.max_wait_s if waiting_job is not None else None
        if waiting_job is None or limit is None or waiting_job.submit_time + limit != deadline:
            continue
        if job_id not in cycle.rejected:
            cycle.rejected.add(job_id)
            msg = f"pending for more than max_wait_s={limit:g}s"
            cycle.decisions.append(Reject(job_id, PendingReason.MAX_WAIT_EXCEEDED.value, msg))
    for deadline, job_id in ordered(st.run_deadlines):
        if deadline > now:
            break
        rj = st.running.get(job_id)
        if rj is None or rj.terminating or job_id in cycle.taken or rj.job.max_runtime_s is None:
            continue
        if rj.start_time + rj.job.max_runtime_s != deadline:
            continue
        cycle.stop(rj)
        cycle.decisions.append(
            Preempt(job_id, rj.job.attempt, PreemptReason.MAX_RUNTIME.value, rj.job.grace_period_s, requeue=False)
        )
    for name in sorted(st.lost_nodes):
        if not _lost_for_good(st.cap.nodes.get(name), now, cycle.cfg.node_unhealthy_grace_s):
            continue
        for job_id in st.node_jobs.get(name, {}):
            rj = st.running[job_id]
            if rj.terminating or job_id in cycle.taken:
                continue
            cycle.stop(rj)
            cycle.decisions.append(
                Preempt(job_id, rj.job.attempt, PreemptReason.NODE_UNHEALTHY.value, rj.job.grace_period_s)
            )


def _lost_for_good(node: Node | None, now: float, grace_s: float) -> bool:
    """Whether the jobs on an unhealthy or removed node must be stopped now.

    A removed node is gone with its pods. An unhealthy one is given ``grace_s`` from when it stopped
    being healthy (Kubernetes waits 300 s before it evicts from a NotReady node): a heartbeat that
    comes late for a moment must not preempt a week-long gang. It takes no new work meanwhile.
    """
    if node is None or node.healthy:
        return node is None
    return node.unhealthy_since is None or now - node.unhealthy_since >= grace_s


# ---------------------------------------------------------------------- the muster order


def _next(cycle: Cycle, walker: Iterator[str]) -> Job | None:
    for job_id in walker:
        if job_id not in cycle.rejected and job_id not in cycle.admitted:
            return cycle.st.pending[job_id]
    return None


def _preemptors_first(cycle: Cycle) -> None:
    """Capacity freed by preemption for a job is held for it until it starts.

    Before any other job is considered, what the victims that are gone freed for each waiting preemptor
    (``SchedulerState.freed_for``) is set aside. Then the preemptors take their turn, those whose
    victims are all gone first (they may start now; one whose victims still stop counts its quota on top
    of theirs), each in the walk's order: it gets back what was freed for it and starts if it fits (a job
    of one size on the nodes its victims left if it can); otherwise, while victims of it still stop, it
    takes the placement they will complete. So no job ahead of it in the walk (a requeued victim, a
    borrower, another preemptor) takes the GPUs it preempted for and makes it preempt again. A preemptor
    whose victims are gone and that no longer fits (a node failed, a quota changed) holds nothing and
    waits in its queue's order as any job."""
    st, cfg = cycle.st, cycle.cfg
    ids = [j for j in dict.fromkeys((*st.freed_for, *st.victims_of)) if j in st.pending and j not in cycle.rejected]
    preemptors = sorted((st.pending[j] for j in ids), key=lambda job: (job.job_id in st.victims_of,
                                                                         cycle.order_key(job)))
    taken = take_freed(cycle, [job.job_id for job in preemptors])
    for job in preemptors:
        own = taken.pop(job.job_id, None)
        if own is not None:
            give_back(cycle, own)
        if cycle.admissions >= cfg.max_admissions_per_cycle:
            continue
        # a job of one size first on the nodes its victims left, leaving other free capacity as it was (an
        # elastic one takes its size from everything free, as it preempted for it)
        if own is not None and not job.elastic and cycle.try_admit(job, frozenset(n for n, *_ in own)) is None:
            continue
        if cycle.try_admit(job) is None:
            continue
        victims = [st.running[v] for v in st.victims_of.get(job.job_id, ()) if v in st.running]
        if victims:
            cycle.front[job.job_id] = hold_for_preemptor(cycle, job, victims)


def _ordered(cycle: Cycle, report: bool) -> None:
    """Queue heads merged by priority, starvation, fair share, submit time; waiting preemptors first."""
    st, cfg = cycle.st, cycle.cfg
    if st.victims_of or st.freed_for:
        _preemptors_first(cycle)
    walkers: dict[str, Iterator[str]] = {}
    heads: list[tuple[tuple[bool, int, int, float, float, str], Job]] = []
    for queue in st.pq.queue_names():
        walker = st.walk_queue(queue, cycle.now, cycle.order)
        job = _next(cycle, walker)
        if job is not None:
            walkers[queue] = walker
            heads.append((cycle.order_key(job), job))
    heapq.heapify(heads)
    waiting: dict[str, int] = {}
    blocked: dict[str, int] = {}
    while heads:
        _, job = heapq.heappop(heads)
        q = job.queue
        position = waiting.get(q, 0)
        trying = cycle.admissions < cfg.max_admissions_per_cycle and blocked.get(q, 0) < cfg.backfill_depth
        if trying:
            if cfg.elastic and st.elastic_running:
                grow_ahead_of(cycle, job)
            outcome = _consider(cycle, job, position, report and position < cfg.status_depth)
            if outcome is not None:
                blocked[q] = blocked.get(q, 0) + 1
                waiting[q] = position + 1
                if not report:
                    if _settled(cycle):
                        return
                    if outcome in _QUOTA_BLOCKED and _out_of_quota(cycle, q):
                        continue  # the rest of the queue would only be found out of quota as well
        else:
            waiting[q] = position + 1
            cycle.note_wanted(job)
            if report and position < cfg.status_depth:
                cycle.report(job, PendingReason.QUEUED, position, cycle.estimate_start(job))
            elif not report and _settled(cycle):
                return
        trying = blocked.get(q, 0) < cfg.backfill_depth and cycle.admissions < cfg.max_admissions_per_cycle
        if not trying and not report:
            # the queue is done deciding for this cycle (both limits only grow): the rest of its walk
            # would only report and note what its waiting jobs want, so note that without ordering them
            for _ in range(cfg.status_depth - waiting.get(q, 0)):
                rest = _next(cycle, walkers[q])
                if rest is None:
                    break
                cycle.note_wanted(rest)
            continue
        if trying or waiting.get(q, 0) < cfg.status_depth:
            nxt = _next(cycle, walkers[q])
            if nxt is not None:
                heapq.heappush(heads, (cycle.order_key(nxt), nxt))


def _settled(cycle: Cycle) -> bool:
    """Whether the rest of the walk can no longer change the cycle's decisions, so that a cycle that
    does not report may stop: the admission limit is reached, or else every GPU is taken, every
    waiting job needs one (free capacity only shrinks during the walk) and no blocked job may look for
    victims any more; and what the rest of the walk would still record of what its jobs want cannot
    change elastic growth."""
    cfg = cycle.cfg
    if _wants_matter(cycle):
        return False
    if cycle.admissions >= cfg.max_admissions_per_cycle:
        return True  # nothing later is considered at all
    if _may_look_for_victims(cycle):
        return False
    return cycle.st.gpuless_pending == 0 and not cycle.cap.gpus_left()


def _wants_matter(cycle: Cycle) -> bool:
    """Whether the rest of the walk may still change elastic growth: growth is on, and either what waiting
    jobs want may still hold it back (it is not already ruled out for the cycle by a waiting job that
    accepts any GPU type, and an elastic job is running or waiting) or a running elastic job below its
    full size may still grow ahead of a later job of its queue."""
    st = cycle.st
    if not cycle.cfg.elastic:
        return False
    return ("" not in cycle.wanted and bool(st.elastic_running or st.elastic_pending)) or may_grow_in_walk(cycle)


def _may_look_for_victims(cycle: Cycle) -> bool:
    cfg = cycle.cfg
    return cfg.preemption and cycle.preempt_attempts < cfg.max_preemption_attempts


def _orders_by_preemption(cycle: Cycle) -> bool:
    """Whether a later job of this cycle may still preempt for its queue's order (and so needs to know
    how long it would wait behind the jobs considered before it)."""
    cfg = cycle.cfg
    return cfg.reorder_preemption and cycle.order.kind != "submit" and _may_look_for_victims(cycle)


def _out_of_quota(cycle: Cycle, queue: str) -> bool:
    """Whether no later job of ``queue`` can change the cycle's outcome (for a cycle that does not
    report): the queue cannot take even one more GPU of any type (usage only grows during the walk),
    every waiting job needs a GPU, no blocked job may look for victims any more, none of the queue's
    jobs holds capacity for victims that are stopping, and what its later jobs want (even those only
    walked for their statuses) cannot change elastic growth. Its later jobs would all be blocked on
    quota (or never fit) and change nothing."""
    if _wants_matter(cycle) or _may_look_for_victims(cycle):
        return False
    if cycle.st.gpuless_pending or queue in cycle.preemptor_queues():
        return False
    return cycle.quota_spent(queue)


def gpus_needed(job: Job) -> int:
    return job.min_gpus


def _consider(cycle: Cycle, job: Job, position: int, report: bool) -> PendingReason | None:
    """Admit, preempt for, or reserve for one job; returns its pending reason (None: admitted)."""
    cfg = cycle.cfg
    start: float | None = None
    looked = False  # whether this job was one of the cycle's bounded victim searches
    held = cycle.front.get(job.job_id)  # its turn came first (``_preemptors_first``): it holds its placement
    whole = _plan_for_whole(cycle, job) if held is None else None
    if held is not None:
        reason, start = PendingReason.PREEMPTING, held
    elif whole is not None:
        looked = True
        reason, start = PendingReason.PREEMPTING, _carry_out(cycle, *whole)
    else:
        found = cycle.try_admit(job)
        if found is None:
            return None
        reason = found
        if cfg.preemption and reason in _PREEMPTABLE_REASONS and cycle.preempt_attempts < cfg.max_preemption_attempts:
            cycle.preempt_attempts += 1
            looked = True
            plan = find_plan(cycle, job)
            if plan is not None:
                reason, start = PendingReason.PREEMPTING, _carry_out(cycle, job, plan)
            elif cfg.min_runtime_s > 0:
                until = protected_until(cycle, job)
                if until is not None:
                    if reason in _QUOTA_BLOCKED:
                        hold_nominal(cycle, job)
                    reason = PendingReason.PROTECTED
                    start = until
    reason = cycle.lent_out(job, reason)
    if reason is PendingReason.CAPACITY and cfg.consolidation and looked:
        moves = find_moves(cycle, job)
        if moves is not None:
            cycle.moves += len(moves.chosen)
            reason, start = PendingReason.PREEMPTING, _carry_out(cycle, job, moves)
    if reason is PendingReason.CAPACITY and cfg.backfill and cycle.may_reserve(job):
        res = find_reservation(cycle, job)
        if res is not None:
            cycle.add_reservation(res, job)
            cycle.estimate_start(job)  # later jobs' estimates queue behind it
            reason, start = PendingReason.RESERVATION, res.time
    if _orders_by_preemption(cycle) and reason is not PendingReason.NO_MATCHING_NODES and gpus_needed(job):
        cycle.start_in_order(job, commit=True)  # later jobs wait behind it
    if reason not in _QUOTA_REASONS:
        cycle.note_blocked(job)
    elif reason is not PendingReason.NO_MATCHING_NODES:
        cycle.note_quota_wanted(job)
    if report:
        if start is None and reason is not PendingReason.NO_MATCHING_NODES:
            start = cycle.estimate_start(job)
        if reason in _QUOTA_BLOCKED:
            start = cycle.quota_start(job, reason, start)
        cycle.report(job, reason, position, start)
    return reason


def _plan_for_whole(cycle: Cycle, job: Job) -> tuple[Job, Plan] | None:
    """For an elastic job that would start below its full size, the victims that would let it start whole
    (None: start with what is free). Victims are found as for any waiting job (lower priority, far behind
    in the queue's order, reclaimed or over their fair share; elastic jobs shrink first), so a job ahead
    gets its full size before jobs behind it run, as it would if it were not elastic; a job that only
    waits for jobs ahead of it starts with what is free instead of waiting."""
    st, cfg = cycle.st, cycle.cfg
    if not (cfg.elastic and cfg.preemption and job.elastic) or job.shares_gpus:
        return None
    if job.job_id in st.victims_of or cycle.preempt_attempts >= cfg.max_preemption_attempts:
        return None
    if fits(cycle, job) is None:
        return None  # not even its minimum is free: the usual search, for its minimum
    whole = replace(job, min_replicas=None)
    if fits(cycle, whole) is not None:
        return None  # free capacity is enough
    cycle.preempt_attempts += 1
    plan = find_plan(cycle, whole)
    return None if plan is None else (whole, plan)


def _carry_out(cycle: Cycle, job: Job, plan: Plan) -> float:
    """Shrink or preempt the plan's candidates for ``job`` and hold its placement; returns when the
    whole victims should be gone (their longest grace period)."""
    for c in plan.chosen:
        rj = c.run
        if c.keep is not None:
            cycle.taken.add(rj.job.job_id)
            cycle.decisions.append(Scale(rj.job.job_id, rj.job.attempt, rj.replicas - c.pods, c.keep))
        else:
            cycle.stop(rj)
            cycle.decisions.append(
                Preempt(rj.job.job_id, rj.job.attempt, c.reason.value, rj.job.grace_period_s, preemptor=job.job_id)
            )
    hold(cycle, job, plan.chosen, plan.placement)
    return cycle.now + max((c.run.job.grace_period_s for c in plan.chosen if c.keep is None), default=0.0)


# ---------------------------------------------------------------------- FIFO baselines


def _fifo_per_queue(cycle: Cycle, report: bool) -> None:
    """FIFO inside each queue: a queue's blocked head blocks only that queue (as Philly, the Helios
    simulator and Kueue's StrictFIFO do); the queues' heads are tried in submit-time order."""
    st, cfg = cycle.st, cycle.cfg
    heads: list[tuple[float, str, str]] = []
    walkers: dict[str, Iterator[str]] = {}
    for queue in st.pq.queue_names():
        walker = st.pq.walk_fifo(queue)
        job = _next(cycle, walker)
        if job is not None:
            walkers[queue] = walker
            heads.append((job.submit_time, job.job_id, queue))
    heapq.heapify(heads)
    while heads:
        _, job_id, queue = heapq.heappop(heads)
        job = st.pending[job_id]
        if cycle.admissions < cfg.max_admissions_per_cycle:
            reason = cycle.try_admit(job)
            if reason is None:
                nxt = _next(cycle, walkers[queue])
                if nxt is not None:
                    heapq.heappush(heads, (nxt.submit_time, nxt.job_id, queue))
                continue
            reason = cycle.lent_out(job, reason)
        else:
            reason = PendingReason.QUEUED
        if not report:
            continue  # the queue is blocked: nothing behind its head is admitted this cycle
        start = None if reason is PendingReason.NO_MATCHING_NODES else cycle.estimate_start(job)
        cycle.report(job, reason, 0, start)
        for position in range(1, cfg.status_depth):
            rest = _next(cycle, walkers[queue])
            if rest is None:
                break
            cycle.report(rest, PendingReason.QUEUED, position, cycle.estimate_start(rest))


def _fifo(cycle: Cycle, report: bool) -> None:
    """Strict global FIFO: one blocked head stops admission in every queue."""
    st, cfg = cycle.st, cycle.cfg
    waiting: dict[str, int] = {}
    head_blocked = False
    queues = max(len(st.pq.queue_names()), 1)
    seen_after_block = 0
    for job_id in st.pq.walk_fifo():
        if job_id in cycle.rejected:
            continue
        job = st.pending[job_id]
        position = waiting.get(job.queue, 0)
        if not head_blocked and cycle.admissions < cfg.max_admissions_per_cycle:
            reason = cycle.try_admit(job)
            if reason is None:
                continue
            reason = cycle.lent_out(job, reason)
            head_blocked = True
            if not report:
                break  # nothing after the blocked head is admitted: the rest of the walk only reports
        else:
            reason = PendingReason.QUEUED
            seen_after_block += 1
        waiting[job.queue] = position + 1
        if report and position < cfg.status_depth:
            start = None if reason is PendingReason.NO_MATCHING_NODES else cycle.estimate_start(job)
            cycle.report(job, reason, position, start)
        if seen_after_block >= cfg.status_depth * queues:
            break


def _suspended(cycle: Cycle) -> None:
    shown: dict[str, int] = {}
    for job_id, job in cycle.st.suspended.items():
        n = shown.get(job.queue, 0)
        if n < cycle.cfg.status_depth and job_id not in cycle.rejected:
            shown[job.queue] = n + 1
            cycle.report(job, PendingReason.SUSPENDED, None, None)
