"""The entry point: ``schedule(state, now, config)`` computes one cycle's decisions without mutating state."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import replace

from .backfill import find_reservation
from .consolidation import find_moves
from .cycle import Cycle
from .elastic import grow, grow_ahead_of, may_grow_in_walk
from .fifo import fifo_global, fifo_per_queue
from .growth import admit_on_bought, idle_releases
from .growth import consider as consider_growth
from .growth import message as growth_message
from .model import (
    CycleResult,
    Job,
    Node,
    PendingReason,
    Policy,
    Preempt,
    PreemptReason,
    QueueOrderKind,
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
    if cfg.policy == Policy.FIFO:
        fifo_per_queue(cycle, report)
    elif cfg.policy == Policy.FIFO_GLOBAL:
        fifo_global(cycle, report)
    else:
        _ordered(cycle, report)
        if cfg.elastic:
            grow(cycle)
    if report:
        _suspended(cycle)
    releases = idle_releases(cycle) if state.growth else ()
    return CycleResult(tuple(cycle.out.decisions), cycle.out.info, tuple(cycle.out.provisions), tuple(releases))


# ---------------------------------------------------------------------- limits and health


def _housekeeping(cycle: Cycle) -> None:
    st, now = cycle.st, cycle.now
    for job_id, job in sorted(st.orphans.items()):
        cycle.out.decisions.append(Reject(job_id, PendingReason.UNKNOWN_QUEUE.value, f"unknown queue {job.queue!r}"))
    for deadline, job_id in ordered(st.wait_deadlines):
        if deadline > now:
            break
        waiting_job = st.pending.get(job_id) or st.suspended.get(job_id)
        limit = waiting_job.max_wait_s if waiting_job is not None else None
        if waiting_job is None or limit is None or waiting_job.submit_time + limit != deadline:
            continue
        if job_id not in cycle.out.rejected:
            cycle.out.rejected.add(job_id)
            msg = f"pending for more than max_wait_s={limit:g}s"
            cycle.out.decisions.append(Reject(job_id, PendingReason.MAX_WAIT_EXCEEDED.value, msg))
    for deadline, job_id in ordered(st.run_deadlines):
        if deadline > now:
            break
        rj = st.running.get(job_id)
        if rj is None or rj.terminating or job_id in cycle.out.taken or rj.job.max_runtime_s is None:
            continue
        if rj.start_time + rj.job.max_runtime_s != deadline:
            continue
        cycle.stop(rj)
        cycle.out.decisions.append(
            Preempt(job_id, rj.job.attempt, PreemptReason.MAX_RUNTIME.value, rj.job.grace_period_s, requeue=False)
        )
    for name in sorted(st.lost_nodes):
        if not _lost_for_good(st.cap.nodes.get(name), now, cycle.cfg.node_unhealthy_grace_s):
            continue
        for job_id in st.node_jobs.get(name, {}):
            rj = st.running[job_id]
            if rj.terminating or job_id in cycle.out.taken:
                continue
            cycle.stop(rj)
            cycle.out.decisions.append(
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
    ids = [j for j in dict.fromkeys((*st.freed_for, *st.victims_of)) if j in st.pending and j not in cycle.out.rejected]
    preemptors = sorted((st.pending[j] for j in ids), key=lambda job: (job.job_id in st.victims_of,
                                                                         cycle.order_key(job)))
    taken = take_freed(cycle, [job.job_id for job in preemptors])
    for job in preemptors:
        own = taken.pop(job.job_id, None)
        if own is not None:
            give_back(cycle, own)
        if cycle.out.admissions >= cfg.max_admissions_per_cycle:
            continue
        # a job of one size first on the nodes its victims left, leaving other free capacity as it was (an
        # elastic one takes its size from everything free, as it preempted for it)
        if own is not None and not job.elastic and cycle.try_admit(job, frozenset(n for n, *_ in own)) is None:
            continue
        if cycle.try_admit(job) is None:
            continue
        victims = [st.running[v] for v in st.victims_of.get(job.job_id, ()) if v in st.running]
        if victims:
            cycle.out.front[job.job_id] = hold_for_preemptor(cycle, job, victims)


def _ordered(cycle: Cycle, report: bool) -> None:
    """Queue heads merged by priority, starvation, fair share, submit time; waiting preemptors first."""
    st, cfg = cycle.st, cycle.cfg
    if st.victims_of or st.freed_for:
        _preemptors_first(cycle)
    walkers: dict[str, Iterator[str]] = {}
    heads: list[tuple[tuple[bool, int, int, float, float, str], Job]] = []
    for queue in st.pq.queue_names():
        walker = st.walk_queue(queue, cycle.now, cycle.order)
        job = cycle.next_waiting(walker)
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
        trying = cycle.out.admissions < cfg.max_admissions_per_cycle and blocked.get(q, 0) < cfg.backfill_depth
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
                cycle.report(job, PendingReason.QUEUED, position, cycle.forecast.estimate_start(job))
            elif not report and _settled(cycle):
                return
        trying = blocked.get(q, 0) < cfg.backfill_depth and cycle.out.admissions < cfg.max_admissions_per_cycle
        if not trying and not report:
            # the queue is done deciding for this cycle (both limits only grow): the rest of its walk
            # would only report and note what its waiting jobs want, so note that without ordering them
            for _ in range(cfg.status_depth - waiting.get(q, 0)):
                rest = cycle.next_waiting(walkers[q])
                if rest is None:
                    break
                cycle.note_wanted(rest)
            continue
        if trying or waiting.get(q, 0) < cfg.status_depth:
            nxt = cycle.next_waiting(walkers[q])
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
    if cycle.out.admissions >= cfg.max_admissions_per_cycle:
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
    return ("" not in cycle.wants.wanted and bool(st.elastic_running or st.elastic_pending)) or may_grow_in_walk(cycle)


def _may_look_for_victims(cycle: Cycle) -> bool:
    cfg = cycle.cfg
    return cfg.preemption and cycle.out.preempt_attempts < cfg.max_preemption_attempts


def _orders_by_preemption(cycle: Cycle) -> bool:
    """Whether a later job of this cycle may still preempt for its queue's order (and so needs to know
    how long it would wait behind the jobs considered before it)."""
    cfg = cycle.cfg
    return cfg.reorder_preemption and cycle.order.kind != QueueOrderKind.SUBMIT and _may_look_for_victims(cycle)


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


#: what the steps decided for one waiting job: why it waits, and when it should start if a step knows
Verdict = tuple[PendingReason, "float | None"]


def _consider(cycle: Cycle, job: Job, position: int, report: bool) -> PendingReason | None:
    """Admit, preempt for, or reserve for one waiting job; returns why it waits (None: admitted).

    The steps, in order. The first of 1-3 that decides ends that part; 4-7 refine why the job waits and
    what is done for it; 8-10 record it for the rest of the cycle.

    1. held placement: a preemptor that took its turn first (``_preemptors_first``) keeps the placement its
       victims will free, until they are gone.
    2. ``_start_whole``: an elastic job that would start below its full size preempts or shrinks running
       jobs to start whole, if victims are found as for any waiting job.
    3a. ``growth.admit_on_bought``: nodes bought for it are ready: it starts there, outside its quota.
    3. ``Cycle.try_admit``: it starts now if its quota, its user's limit and free capacity allow.
    4. ``_make_room``: it waits for quota or capacity: one of the cycle's bounded victim searches (quota
       reclaim, priority, fair share, the queue's order) preempts or shrinks running jobs for it; if only
       jobs still inside their minimum runtime would do, it waits for them and holds its nominal quota.
    5. ``Cycle.lent_out``: a cohort's refusal of quota its own queue holds nominally reads as quota lent.
    6. ``_consolidate``: it waits for capacity after a victim search: running jobs are moved to gather room.
    7. ``_reserve``: it waits for capacity: a backfill reservation of the nodes that free up first.
    7b. ``growth.consider``: it waits for capacity: nodes of a growable group are bought for it when that
       starts it sooner than existing capacity would and its queue's burst budget allows.
    8. its place in line: later jobs' in-order start estimates (``Forecast.start_in_order``) queue behind it.
    9. what it wants (``Cycle.note_*``): holds elastic growth and the starting size of elastic jobs back.
    10. its status (when the cycle reports): the reason, its position and an estimated start.
    """
    cfg = cycle.cfg
    looked = False  # whether this job had one of the cycle's bounded victim searches
    held = cycle.out.front.get(job.job_id)
    verdict: Verdict | None
    if held is not None:  # 1
        verdict = (PendingReason.PREEMPTING, held)
    else:
        verdict = _start_whole(cycle, job)  # 2
        looked = verdict is not None
        if verdict is None:
            if cycle.st.growth.booked and admit_on_bought(cycle, job):  # 3a
                return None
            found = cycle.try_admit(job)  # 3
            if found is None:
                return None
            verdict = (found, None)
            if (cfg.preemption and found in _PREEMPTABLE_REASONS  # 4
                    and cycle.out.preempt_attempts < cfg.max_preemption_attempts):
                looked = True
                verdict = _make_room(cycle, job, found)
    reason, start = verdict
    if reason is PendingReason.COHORT_QUOTA:  # 5
        reason = cycle.lent_out(job, reason)
    if reason is PendingReason.CAPACITY and cfg.consolidation and looked:  # 6
        reason, start = _consolidate(cycle, job) or (reason, start)
    if reason is PendingReason.CAPACITY and cfg.backfill and cycle.reservations.may_reserve(job):  # 7
        reason, start = _reserve(cycle, job) or (reason, start)
    if cfg.provisioning and cycle.st.growth:  # 7b
        reason, start = consider_growth(cycle, job, reason, start) or (reason, start)
    if _orders_by_preemption(cycle) and reason is not PendingReason.NO_MATCHING_NODES and gpus_needed(job):  # 8
        cycle.forecast.start_in_order(job, commit=True)
    if reason not in _QUOTA_REASONS:  # 9
        cycle.note_blocked(job)
    elif reason is not PendingReason.NO_MATCHING_NODES:
        cycle.note_quota_wanted(job)
    if report:  # 10
        if start is None and reason is not PendingReason.NO_MATCHING_NODES:
            start = cycle.forecast.estimate_start(job)
        if reason in _QUOTA_BLOCKED:
            start = cycle.forecast.quota_start(job, reason, start)
        cycle.report(job, reason, position, start)
        if cycle.st.growth:
            told = growth_message(cycle, job, reason)
            if told is not None:
                cycle.out.info[job.job_id] = replace(cycle.out.info[job.job_id], message=told)
    return reason


def _start_whole(cycle: Cycle, job: Job) -> Verdict | None:
    """Step 2: for an elastic job that would start below its full size, preempt or shrink the victims that
    let it start whole (None: not elastic, nothing free even for its minimum, enough free for all of it, or
    no victims: it goes on to start with what is free). Victims are found as for any waiting job (lower
    priority, far behind in the queue's order, reclaimed or over their fair share; elastic jobs shrink
    first), so a job ahead gets its full size before jobs behind it run, as it would if it were not
    elastic; a job that only waits for jobs ahead of it starts with what is free instead of waiting."""
    st, cfg = cycle.st, cycle.cfg
    if not (cfg.elastic and cfg.preemption and job.elastic) or job.shares_gpus:
        return None
    if job.job_id in st.victims_of or cycle.out.preempt_attempts >= cfg.max_preemption_attempts:
        return None
    if fits(cycle, job) is None:
        return None  # not even its minimum is free: the usual search, for its minimum
    whole = replace(job, min_replicas=None)
    if fits(cycle, whole) is not None:
        return None  # free capacity is enough
    cycle.out.preempt_attempts += 1
    plan = find_plan(cycle, whole)
    return None if plan is None else (PendingReason.PREEMPTING, _carry_out(cycle, whole, plan))


def _make_room(cycle: Cycle, job: Job, reason: PendingReason) -> Verdict:
    """Step 4, one of the cycle's bounded victim searches for a job that waits for ``reason`` (quota or
    capacity): preempt or shrink the victims found; failing that, when only running jobs still inside
    their minimum runtime would do, wait until they may be preempted (holding the job's nominal quota
    if it waits for quota); failing that, ``reason`` unchanged."""
    cycle.out.preempt_attempts += 1
    plan = find_plan(cycle, job)
    if plan is not None:
        return PendingReason.PREEMPTING, _carry_out(cycle, job, plan)
    if cycle.cfg.min_runtime_s > 0:
        until = protected_until(cycle, job)
        if until is not None:
            if reason in _QUOTA_BLOCKED:
                hold_nominal(cycle, job)
            return PendingReason.PROTECTED, until
    return reason, None


def _consolidate(cycle: Cycle, job: Job) -> Verdict | None:
    """Step 6: move running jobs to gather room for ``job`` (None: no such moves)."""
    moves = find_moves(cycle, job)
    if moves is None:
        return None
    cycle.out.moves += len(moves.chosen)
    return PendingReason.PREEMPTING, _carry_out(cycle, job, moves)


def _reserve(cycle: Cycle, job: Job) -> Verdict | None:
    """Step 7: reserve for ``job`` the nodes that free up first, so that later jobs only backfill what
    ends before it starts (None: no reservation found)."""
    res = find_reservation(cycle, job)
    if res is None:
        return None
    cycle.reservations.add(res, job)
    cycle.forecast.estimate_start(job)  # later jobs' estimates queue behind it
    return PendingReason.RESERVATION, res.time


def _carry_out(cycle: Cycle, job: Job, plan: Plan) -> float:
    """Shrink or preempt the plan's candidates for ``job`` and hold its placement; returns when the
    whole victims should be gone (their longest grace period)."""
    for c in plan.chosen:
        rj = c.run
        if c.keep is not None:
            cycle.out.taken.add(rj.job.job_id)
            cycle.out.decisions.append(Scale(rj.job.job_id, rj.job.attempt, rj.replicas - c.pods, c.keep))
        else:
            cycle.stop(rj)
            cycle.out.decisions.append(
                Preempt(rj.job.job_id, rj.job.attempt, c.reason.value, rj.job.grace_period_s, preemptor=job.job_id)
            )
    hold(cycle, job, plan.chosen, plan.placement)
    return cycle.now + max((c.run.job.grace_period_s for c in plan.chosen if c.keep is None), default=0.0)


def _suspended(cycle: Cycle) -> None:
    shown: dict[str, int] = {}
    for job_id, job in cycle.st.suspended.items():
        n = shown.get(job.queue, 0)
        if n < cycle.cfg.status_depth and job_id not in cycle.out.rejected:
            shown[job.queue] = n + 1
            cycle.report(job, PendingReason.SUSPENDED, None, None)
