"""Victim search: shrink elastic jobs first, then preempt whole gangs, as few and as cheap as possible."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .cycle_parts import VictimListKey, VictimPool, VictimRank
from .model import Amount, Job, NodeAssignment, Placement, PreemptReason, QueueOrderKind, RunningJob
from .placement import Placer, candidate_gpu_types
from .quota import job_request

if TYPE_CHECKING:
    from .cycle import Cycle
    from .runtimes import RuntimeSample

MAX_CANDIDATES = 64


@dataclass(frozen=True, slots=True)
class Candidate:
    """Capacity one running job can give up: ``release`` pods now, keeping ``keep`` (None: all go)."""

    run: RunningJob
    gpu_type: str
    release: tuple[NodeAssignment, ...]
    pods: int
    keep: Placement | None
    reason: PreemptReason

    @property
    def shrink(self) -> bool:
        return self.keep is not None


@dataclass(frozen=True, slots=True)
class Plan:
    chosen: tuple[Candidate, ...]
    placement: Placement


def shrink_candidate(rj: RunningJob, gpu_type: str, pods: int | None = None) -> Candidate:
    """Give up ``pods`` replicas (default: all above ``min_size``) of the main role, taken from the end of its
    placement (companion roles keep theirs)."""
    pods = rj.replicas - rj.job.min_size if pods is None else pods
    drop = pods
    kept: list[NodeAssignment] = []
    released: list[NodeAssignment] = []
    for a in reversed(rj.placement.main):
        take = min(drop, a.pods)
        drop -= take
        if take:
            released.append(
                replace(
                    a,
                    pods=take,
                    groups=a.groups[a.pods - take :] if a.groups else (),
                    slots=a.slots[a.pods - take :] if a.slots else (),
                )
            )
        if a.pods - take:
            kept.append(
                replace(
                    a,
                    pods=a.pods - take,
                    groups=a.groups[: a.pods - take] if a.groups else (),
                    slots=a.slots[: a.pods - take] if a.slots else (),
                )
            )
    keep = rj.placement.with_main(tuple(reversed(kept)))
    return Candidate(rj, gpu_type, tuple(released), pods, keep, PreemptReason.PRIORITY)


def _sorted_victims(
    cycle: Cycle, pool: VictimPool, name: str, job_ids: Iterable[str], min_runtime: float
) -> list[VictimRank]:
    """Preemptible, old-enough running jobs of a queue or cohort, cheapest first (cached per cycle): ranked
    (priority, not checkpointable, -start time, job)."""
    key: VictimListKey = (pool, name, min_runtime)
    cached = cycle.memo.victim_lists.get(key)
    if cached is None:
        st, now = cycle.st, cycle.now
        cached = []
        for jid in job_ids:
            rj = st.running[jid]
            if rj.job.preemptible and not rj.terminating and now - rj.start_time >= min_runtime:
                cached.append((rj.job.priority, not rj.job.checkpointable, -rj.start_time, jid))
        cached.sort()
        cycle.memo.victim_lists[key] = cached
    return cached


def candidates(cycle: Cycle, job: Job, min_runtime: float | None = None) -> list[Candidate]:
    """The running jobs ``job`` may take capacity from, cheapest first, at most ``MAX_CANDIDATES``: elastic
    jobs' pods above their minimum, then whole jobs of its queue of lower priority, far behind it in the
    queue's order, or borrowed by other queues of its cohort (reclaim, fair share)."""
    st, book = cycle.st, cycle.book
    types = candidate_gpu_types(cycle.cap, job)
    shrinks: list[Candidate] = []
    if cycle.cfg.elastic:
        for jid in st.elastic_running:
            rj = st.running[jid]
            t = st.run_type.get(jid, "")
            if (
                jid not in cycle.out.taken
                and not rj.terminating
                and rj.replicas > rj.job.min_size
                and rj.job.priority <= job.priority
                and t in types
                and _may_shrink_for(cycle, rj, job)
            ):
                shrinks.append(shrink_candidate(rj, t))
    shrinks.sort(key=lambda c: (c.run.job.priority, -c.run.start_time, c.run.job.job_id))
    sources: list[Iterator[tuple[VictimRank, PreemptReason]]] = []
    protect = cycle.cfg.min_runtime_s if min_runtime is None else min_runtime
    same_queue = _sorted_victims(cycle, VictimPool.QUEUE, job.queue, st.running_by_queue.get(job.queue, {}), protect)
    sources.append((k, PreemptReason.PRIORITY) for k in same_queue if k[0] < job.priority)
    if cycle.cfg.reorder_preemption and cycle.order.kind != QueueOrderKind.SUBMIT:
        sources.append((k, PreemptReason.QUEUE_ORDER) for k in _reorder_victims(cycle, job, protect))
    root = book.root_of.get(job.queue)
    if root is not None:
        borrowed = _sorted_victims(cycle, VictimPool.BORROWED, root, st.borrowed_by_root.get(root, {}), protect)
        if _within_nominal_without(cycle, job, same_queue, types):
            sources.append((k, PreemptReason.RECLAIM) for k in borrowed if st.running[k[3]].job.queue != job.queue)
        elif cycle.cfg.fair_share and cycle.cfg.fair_share_preemption:
            sources.append((k, PreemptReason.FAIR_SHARE) for k in _over_share(cycle, job, borrowed, types))
    out = shrinks[:MAX_CANDIDATES]
    shrinking = {c.run.job.job_id for c in out}  # shrunk this cycle, preempted whole in a later one
    chosen: set[str] = set()
    for key, reason in heapq.merge(*sources):
        if len(out) >= MAX_CANDIDATES:
            break
        jid = key[3]
        rj = st.running[jid]
        if jid in cycle.out.taken or jid in shrinking or st.run_type.get(jid) not in types:
            continue
        if job.cluster is not None and rj.placement.cluster != job.cluster:
            continue
        if jid in chosen:
            continue  # offered by two sources
        chosen.add(jid)
        out.append(whole_candidate(cycle, rj, reason))
    return out


def _within_nominal_without(cycle: Cycle, job: Job, same_queue: list[VictimRank], types: list[str]) -> bool:
    """Whether ``job`` would be within its queue's nominal quota on one of ``types`` once the lower-priority
    work of its queue that it may preempt (``same_queue``) were gone: it may then reclaim what other queues of
    its cohort borrow, together with those victims of its own (a plan with reclaimed victims must leave it
    within nominal, ``_admissible``), as Kueue's ``reclaimWithinCohort`` with ``withinClusterQueue``."""
    book = cycle.book
    pods = max(job.min_size, 1)
    alloc: dict[str, Amount] | None = None
    for t in types:
        req = job_request(job, t, pods)
        if book.within_nominal(job.queue, req):
            return True
        if alloc is None:
            held: dict[str, Amount] = {}
            for key in same_queue:
                if key[0] >= job.priority:
                    break  # cheapest first: the rest are of its priority or higher
                cycle.add_held(held, cycle.st.running[key[3]])
            own = book.alloc.get(job.queue, {})
            alloc = {res: own.get(res, 0) - held.get(res, 0) for res in own.keys() | held.keys()}
        if book.within_nominal(job.queue, req, alloc=alloc):
            return True
    return False


def _over_share(cycle: Cycle, job: Job, borrowed: list[VictimRank], types: list[str]) -> Iterator[VictimRank]:
    """Borrowed work of other queues of the cohort that a job of a queue under its fair share may take
    back (work within its own queue's nominal quota is guaranteed and never a victim here). A victim
    qualifies when its queue's share exceeds the preemptor's by more than ``fair_share_tolerance`` and,
    after the swap, the preemptor's queue (with the job) is still at most the victim's (without the
    victim), as Kueue's LessThanOrEqualToFinalShare: the victim's queue can then never take the GPUs
    straight back for fairness, so fair-share preemption does not ping-pong. Never for higher-priority
    work."""
    st = cycle.st
    pods = max(job.min_size, 1)
    before = cycle.share(job.queue)
    after = min(cycle.share_after(job.queue, job_request(job, t, pods), +1) for t in types)
    tolerance = cycle.cfg.fair_share_tolerance
    leaving: dict[str, dict[str, Amount] | None] = {}  # victim queue -> what it already gives up; None: not over
    for key in borrowed:
        rj = st.running[key[3]]
        v = rj.job
        if v.queue == job.queue or v.priority > job.priority:
            continue
        if v.queue not in leaving:
            gone = cycle.leaving(v.queue)  # what its queue already gives up counts for fairness
            leaving[v.queue] = gone if cycle.share_after(v.queue, gone, -1) - before > tolerance else None
        gone_already = leaving[v.queue]
        if gone_already is None:
            continue
        released = dict(gone_already)
        cycle.add_held(released, rj)
        if after <= cycle.share_after(v.queue, released, -1):
            yield key


def _may_shrink_for(cycle: Cycle, rj: RunningJob, job: Job) -> bool:
    """Whether running elastic ``rj`` gives its pods above its minimum to waiting ``job``. A job of lower
    priority, or of another queue (quota and fair share decide between queues), always does. A job of the
    same queue and priority only when it is behind ``job`` in the queue's order: shrinking costs it a restart
    too, so the rule is the one reordering preemption follows (``reorder_ratio`` under ``remaining``),
    and under ``submit`` order only for an earlier submission."""
    v = rj.job
    if v.priority < job.priority or v.queue != job.queue:
        return True
    order, st = cycle.order, cycle.st
    estimate, sample = st.known(v, order.learned)
    behind = order.standing(v, estimate, rj.attained(cycle.now), sample)
    if order.kind == QueueOrderKind.REMAINING:
        return behind > _far_behind(cycle, job, job.attained_gpu_s, *st.known(job, order.learned))
    ahead = order.standing(job, st.estimate(job, order.learned), job.attained_gpu_s)
    if order.kind == QueueOrderKind.LAS:
        return behind > ahead
    return (ahead, job.job_id) < (behind, v.job_id)


def _reorder_victims(cycle: Cycle, job: Job, min_runtime: float) -> list[VictimRank]:
    """Running jobs of ``job``'s queue and priority that are far behind it in the queue's order:
    checkpointable (nothing is lost), old enough, not requeued too often already (if capped). The furthest behind
    come first. Under ``remaining`` order "far" is ``reorder_ratio`` times the preemptor's remaining
    work; under ``las`` it is a lower level of attained service. Under ``remaining`` a job promoted past its bound
    may also take back what the jobs that started after its promotion hold (``overtaken_preemption``): they
    overtook a job whose slowdown bound had come. Either way only for a job that would otherwise wait longer than
    ``reorder_wait_ratio`` times its runtime."""
    cfg, order, st, now = cycle.cfg, cycle.order, cycle.st, cycle.now
    if cfg.reorder_wait_ratio > 0:
        # worth it only when the job would otherwise wait long for its own size: a short wait is
        # cheaper than the victims' checkpoint, restart and place in the queue
        start = cycle.forecast.start_in_order(job, commit=False)
        if start is not None and start - now <= cfg.reorder_wait_ratio * cycle.estimate_of(job):
            return []
    key: VictimListKey = (VictimPool.ORDER, job.queue, min_runtime)
    ranked = cycle.memo.victim_lists.get(key)
    if ranked is None:
        ranked = []
        for jid in st.running_by_queue.get(job.queue, {}):
            rj = st.running[jid]
            v = rj.job
            if not (v.preemptible and v.checkpointable) or rj.terminating:
                continue
            if cfg.max_reorder_restarts and v.attempt >= cfg.max_reorder_restarts:
                continue
            if now - rj.start_time < min_runtime:
                continue
            estimate, sample = st.known(v, order.learned)
            behind = order.standing(v, estimate, rj.attained(now), sample)
            ranked.append((v.priority, False, -behind, jid))
        ranked.sort()
        cycle.memo.victim_lists[key] = ranked
    estimate, sample = st.known(job, order.learned)
    if order.kind == QueueOrderKind.LAS:
        promoted = order.promote_at(job, estimate) <= now
        floor = 0.0 if promoted else float(order.level(job.attained_gpu_s))
        return [k for k in ranked if k[0] == job.priority and -k[2] > floor]
    floor = _far_behind(cycle, job, job.attained_gpu_s, estimate, sample)
    since = _promoted_since(cycle, job)
    if since is None:
        return [k for k in ranked if k[0] == job.priority and -k[2] > floor]
    standing = order.standing(job, estimate, job.attained_gpu_s, sample)
    return [k for k in ranked if k[0] == job.priority and (-k[2] > floor or _overtook(cycle, k[3], since, standing))]


def _overtook(cycle: Cycle, jid: str, since: float, standing: float) -> bool:
    """Whether running ``jid`` overtook a job promoted at ``since`` that stands at ``standing`` in the queue's order:
    it started after the promotion, and it would not be entitled to preempt that job right back once it ran (the
    job would not be far behind it by ``reorder_ratio``): taking back from such a job would only trade restarts."""
    rj = cycle.st.running[jid]
    if rj.start_time <= since:
        return False
    return standing <= _far_behind(cycle, rj.job, rj.attained(cycle.now), *cycle.st.known(rj.job, cycle.order.learned))


def _far_behind(
    cycle: Cycle, job: Job, attained: float, estimate: float | None, sample: RuntimeSample | None
) -> float:
    """The standing in the queue's order (``remaining``) beyond which a running job is far enough behind ``job``,
    having received ``attained``, to be preempted for it: ``reorder_ratio`` times its remaining work."""
    order = cycle.order
    return order.levelled(cycle.cfg.reorder_ratio * order.remaining(job, estimate, attained, sample), attained)


def _promoted_since(cycle: Cycle, job: Job) -> float | None:
    """When waiting ``job`` was promoted past its slowdown bound, if it was and may therefore preempt the jobs of
    its queue that started after that, which overtook it (``overtaken_preemption``, ``remaining`` order); None
    otherwise. The promotion time is the one the job was queued with (``PendingQueues.ranks``), as the walk's."""
    if not cycle.cfg.overtaken_preemption or cycle.order.kind != QueueOrderKind.REMAINING:
        return None
    pushed = cycle.st.pq.ranks.get(job.job_id)
    if pushed is None or pushed[1] > cycle.now:
        return None
    return pushed[1]


def whole_candidate(cycle: Cycle, rj: RunningJob, reason: PreemptReason) -> Candidate:
    """All of ``rj`` as a candidate: every pod released, nothing kept."""
    t = cycle.st.run_type.get(rj.job.job_id, "")
    return Candidate(rj, t, rj.placement.nodes, rj.replicas, None, reason)


def release(cycle: Cycle, c: Candidate, sign: int) -> None:
    """Give back (+1) or take again (-1) what a candidate holds, on the cycle's scratch state."""
    j = c.run.job
    for a in c.release:
        if sign > 0:
            cycle.cap.give_for(j, a)
        else:
            cycle.cap.take_for(j, a)
    cycle.book.add(j.queue, job_request(j, c.gpu_type, c.pods, companions=not c.shrink), j.user, -sign)


def fits(cycle: Cycle, job: Job) -> Placement | None:
    pods = max(job.min_size, 1)
    for t in candidate_gpu_types(cycle.cap, job):
        reason, _ = cycle.book.check(job.queue, job_request(job, t, pods), may_borrow=job.preemptible)
        if reason is not None:
            continue
        if job.needs_gpus and not cycle.book.user_ok(job.queue, job.user, job.amount_at(pods)):
            continue
        placement = Placer(cycle.cap, job).place(t, pods, pods)
        if placement is not None:
            return placement
    return None


def find_plan(cycle: Cycle, job: Job, min_runtime: float | None = None) -> Plan | None:
    """The fewest, cheapest candidates whose capacity lets ``job`` fit; scratch state left unchanged.

    ``min_runtime`` overrides the configured protection of young jobs (0: ask what would be possible).
    A job that shares GPUs (fractional or MIG) preempts nothing: it waits for capacity (it may be a victim).
    """
    if job.shares_gpus:
        return None
    found = _cheapest_victims(cycle, job, candidates(cycle, job, min_runtime))
    if found is None:
        return None
    chosen, placement = found
    return _trimmed(cycle, job, chosen, placement)


def _cheapest_victims(
    cycle: Cycle, job: Job, cands: Iterable[Candidate]
) -> tuple[list[Candidate], Placement] | None:
    """Release ``cands`` in their order until ``job`` fits; the released ones and the placement, left
    released on the scratch state (None: it never fits, and nothing is left released)."""
    chosen: list[Candidate] = []
    for c in cands:
        if c.reason is PreemptReason.RECLAIM and not cycle.book.over_nominal(c.run.job.queue):
            continue  # with the victims before it gone its queue is within nominal: it borrows nothing
        release(cycle, c, +1)
        chosen.append(c)
        placement = _admissible(cycle, job, chosen)
        if placement is not None:
            return chosen, placement
    for c in chosen:
        release(cycle, c, -1)
    return None


def _admissible(cycle: Cycle, job: Job, chosen: list[Candidate]) -> Placement | None:
    """Where ``job`` fits with ``chosen`` released; a plan that reclaims other queues' borrowed work must
    leave the job's queue within its nominal quota (it takes back what is its own, it does not borrow)."""
    placement = fits(cycle, job)
    if placement is None or not any(c.reason is PreemptReason.RECLAIM for c in chosen):
        return placement
    request = job_request(job, _placed_type(cycle, placement), max(job.min_size, 1))
    return placement if cycle.book.within_nominal(job.queue, request) else None


def _placed_type(cycle: Cycle, placement: Placement) -> str:
    """The GPU type of the nodes ``placement`` puts the job's main role on ("" if none is known)."""
    return next((cycle.cap.nodes[a.node].gpu_type for a in placement.main if a.node in cycle.cap.nodes), "")


def _trimmed(cycle: Cycle, job: Job, chosen: list[Candidate], placement: Placement) -> Plan:
    """The plan from released ``chosen`` (in the order they were taken): any that turned out unnecessary
    dropped, costliest first, and a shrink cut to the pods the job needs; the scratch state is restored."""
    for c in reversed(chosen[:-1]):  # drop any that turned out unnecessary, costliest first
        release(cycle, c, -1)
        p = _admissible(cycle, job, [k for k in chosen if k is not c])
        if p is not None:
            chosen.remove(c)
            placement = p
        else:
            release(cycle, c, +1)
    for i, c in enumerate(chosen):  # a shrink gives up only the pods the job needs
        if not c.shrink or c.pods <= 1:
            continue
        release(cycle, c, -1)
        for pods in range(1, c.pods):
            fewer = shrink_candidate(c.run, c.gpu_type, pods)
            release(cycle, fewer, +1)
            p = _admissible(cycle, job, chosen)
            if p is not None:
                chosen[i], placement = fewer, p
                break
            release(cycle, fewer, -1)
        else:
            release(cycle, c, +1)
    for c in chosen:
        release(cycle, c, -1)
    return Plan(tuple(chosen), placement)


def hold_for_preemptor(cycle: Cycle, job: Job, victims: list[RunningJob]) -> float:
    """Keep capacity for a preemptor whose victims are stopping; returns when they should be gone."""
    cands = [whole_candidate(cycle, rj, PreemptReason.PRIORITY) for rj in victims]
    for c in cands:
        release(cycle, c, +1)
    placement = fits(cycle, job)
    for c in cands:
        release(cycle, c, -1)
    if placement is not None:
        hold(cycle, job, cands, placement)
    return cycle.now + max((rj.job.grace_period_s for rj in victims), default=0.0)


Taken = list[tuple[str, int, int, int]]  # (node, GPUs, CPU, memory) taken on a cycle's scratch capacity


def take_freed(cycle: Cycle, preemptors: Iterable[str]) -> dict[str, Taken]:
    """Take, on the scratch state, what the victims that are gone freed for each of ``preemptors``
    (``SchedulerState.freed_for``), as far as it is still free on a usable node; returns what was taken
    for each, for ``give_back``. Only capacity is taken: the victims' quota is free again, and the
    preemptor's own check decides whether it may use it."""
    cap, freed_for = cycle.cap, cycle.st.freed_for
    out: dict[str, Taken] = {}
    for job_id in preemptors:
        taken: Taken = []
        for node, (gpus, cpu_m, memory_mb) in sorted(freed_for.get(job_id, {}).items()):
            n = cap.nodes.get(node)
            if n is None or not cap.usable(n):
                continue
            g = min(gpus, max(cap.free[node], 0))
            c = min(cpu_m, max(cap.free_cpu[node], 0)) if n.cpu_m else 0
            m = min(memory_mb, max(cap.free_mem[node], 0)) if n.memory_mb else 0
            if g or c or m:
                cap.take(g, c, m, NodeAssignment(node, 1, (-1,)))
                taken.append((node, g, c, m))
        if taken:
            out[job_id] = taken
    return out


def give_back(cycle: Cycle, taken: Taken) -> None:
    """Return what ``take_freed`` took for one preemptor (its own turn has come)."""
    for node, g, c, m in taken:
        cycle.cap.give(g, c, m, NodeAssignment(node, 1, (-1,)))
    cycle.memo.fails.clear()  # capacity grew: a placement that failed this cycle may fit now


def hold(cycle: Cycle, job: Job, chosen: Iterable[Candidate], placement: Placement) -> None:
    """Take, on the scratch state, the part of ``placement`` that the victims do not free themselves.

    Capacity the victims still hold stays busy, so later jobs of the cycle can neither take the
    preemptor's share of free capacity nor the victims' capacity before it is really released. Its
    quota is counted as well (on top of the victims', which is conservative for this cycle).
    """
    freed: dict[str, list[int]] = {}
    for c in chosen:
        j = c.run.job
        for a in c.release:
            f = freed.setdefault(a.node, [0, 0, 0])
            for i, per_pod in enumerate(j.shape(a.role)):
                f[i] += a.pods * per_pod
    need = job_request(job, _placed_type(cycle, placement), max(job.min_size, 1))
    for c in chosen:  # same-queue victims already count against the quota the preemptor will use
        if c.run.job.queue == job.queue:
            for res, amount in job_request(c.run.job, c.gpu_type, c.pods, companions=not c.shrink).items():
                if res in need:
                    need[res] = max(0, need[res] - amount)
    cycle.book.add(job.queue, need, job.user, +1)
    cycle.memo.shares.pop(job.queue, None)
    wanted: dict[str, list[int]] = {}
    for a in placement.nodes:
        w = wanted.setdefault(a.node, [0, 0, 0])
        for i, per_pod in enumerate(job.shape(a.role)):
            w[i] += a.pods * per_pod
    for node, (g, cpu_m, memory_mb) in wanted.items():
        f = freed.get(node, [0, 0, 0])
        gpus, cpu, mem = max(0, g - f[0]), max(0, cpu_m - f[1]), max(0, memory_mb - f[2])
        if gpus or cpu or mem:
            cycle.cap.take(gpus, cpu, mem, NodeAssignment(node, 1, (-1,)))


def hold_nominal(cycle: Cycle, job: Job) -> None:
    """Count, on the cycle's quota book, the request of a job that waits for its victims' minimum runtime
    to reclaim its own queue's nominal quota, so that no later job of the cycle borrows that quota
    again (a borrower admitted now would start a new minimum runtime and push the reclaim back)."""
    pods = max(job.min_size, 1)
    for t in candidate_gpu_types(cycle.cap, job):
        req = job_request(job, t, pods)
        if cycle.book.within_nominal(job.queue, req):
            cycle.book.add(job.queue, req, job.user, +1)
            cycle.memo.shares.pop(job.queue, None)
            return


def protected_until(cycle: Cycle, job: Job) -> float | None:
    """When ``job`` could start if only the minimum runtime of its victims prevents preemption now:
    the last needed victim's protection ends, then the victims get their grace period. None when no
    plan exists even without the protection."""
    plan = find_plan(cycle, job, min_runtime=0.0)
    if plan is None or any(c.shrink for c in plan.chosen):
        return None
    protected = max(c.run.start_time for c in plan.chosen) + cycle.cfg.min_runtime_s
    return protected + max(c.run.job.grace_period_s for c in plan.chosen)
