"""Consolidation: move a few checkpointable jobs so that a gang held back only by fragmentation fits.

A gang can wait for capacity although its queue may take it and enough GPUs of its type are free in
total on the nodes it may use: the free GPUs are scattered in pieces that no pod of the gang fits
in (two free GPUs on each of four nodes, and the gang's pods need four each). Waiting for the right
jobs to end can take as long as the longest of them. Instead the cycle may stop a few small
checkpointable, preemptible jobs (through the usual checkpoint handshake: they are requeued and keep
their progress) whose GPUs complete whole nodes for the gang, but only when

- the moved jobs fit again, at their full size, in what stays free once the gang is placed (a move
  costs them a checkpoint and a restart, never their place in the cluster);
- each moved job is smaller than the gang, of no higher priority, has run its minimum runtime in
  this attempt (so no job moves twice within its minimum runtime) and has been restarted fewer than
  ``consolidation_max_job_attempts`` times;
- at most ``consolidation_max_moves`` jobs move per cycle, and only jobs that may look for victims
  this cycle (preemption on, within ``max_preemption_attempts``) look for moves;
- the gang's wait saved is worth more than the moves cost: its GPUs times the time until its
  estimated start exceed the moved GPUs times ``consolidation_move_cost_s`` (checkpoint and restart).

The moved jobs' placement is checked, not held: they are requeued and placed again in the next cycle
in their queue's order, like any preempted job. Pure, on the cycle's scratch state, which is left as
it was unless a plan is returned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from .model import Job, NodeAssignment, Placement, PreemptReason, RunningJob
from .placement import Placer, candidate_gpu_types, node_eligible
from .preemption import Candidate, Plan, release, whole_candidate
from .quota import job_request

if TYPE_CHECKING:
    from .cycle import Cycle
    from .reservations import Excluded


def find_moves(cycle: Cycle, job: Job) -> Plan | None:
    """Jobs to move so that ``job`` fits, with its placement once they are gone; None if not worth it."""
    cfg = cycle.cfg
    if not job.gpus_per_pod or cycle.out.moves >= cfg.consolidation_max_moves:
        return None
    pods = max(job.min_size, 1)
    need = job.gpus_at(pods)
    excluded = cycle.reservations.exclusion_for(job)
    for gpu_type in candidate_gpu_types(cycle.cap, job):
        reason, _ = cycle.book.check(job.queue, job_request(job, gpu_type, pods), may_borrow=job.preemptible)
        if reason is not None or _free_for(cycle, job, gpu_type, excluded) < need:
            continue  # not fragmentation: the queue may not take it, or the GPUs are not there at all
        movers = _movers(cycle, job, gpu_type, need)
        if not movers:
            continue
        plan = _plan(cycle, job, gpu_type, pods, movers, excluded)
        if plan is not None and _worth_it(cycle, job, need, plan):
            return plan
    return None


def _nodes_with_free(cycle: Cycle, job: Job, gpu_type: str) -> Iterator[tuple[str, int]]:
    """(node, free GPUs) of the usable nodes of ``gpu_type`` that have any free (of ``job``'s cluster,
    if it is pinned to one)."""
    for (cluster, t), buckets in cycle.cap.buckets.items():
        if t != gpu_type or (job.cluster is not None and cluster != job.cluster):
            continue
        for free, names in buckets.items():
            if free > 0:
                for name in names:
                    yield name, free


def _free_for(cycle: Cycle, job: Job, gpu_type: str, excluded: Excluded) -> int:
    """Free GPUs of ``gpu_type`` on the usable nodes ``job`` may run on."""
    nodes = cycle.cap.nodes
    return sum(
        free
        for name, free in _nodes_with_free(cycle, job, gpu_type)
        if name not in excluded and node_eligible(nodes[name], job)
    )


def _movers(cycle: Cycle, job: Job, gpu_type: str, need: int) -> list[RunningJob]:
    """Running jobs that may be moved for ``job``: those on nodes with free GPUs of the type (moving
    others frees nothing a pod could join), the emptiest nodes first (a move there completes a node
    soonest), then the smallest jobs."""
    st, cap = cycle.st, cycle.cap
    out: list[tuple[int, int, str, RunningJob]] = []
    seen: set[str] = set()
    for name, _ in _nodes_with_free(cycle, job, gpu_type):
        for jid in st.node_jobs.get(name, ()):
            if jid not in seen:
                seen.add(jid)
                rj = st.running.get(jid)
                if rj is not None and _movable(cycle, rj, job, gpu_type, need):
                    free_around = sum(cap.free.get(a.node, 0) for a in rj.placement.nodes)
                    out.append((-free_around, rj.gpus, jid, rj))
    out.sort(key=lambda e: e[:3])
    return [e[3] for e in out]


def _movable(cycle: Cycle, rj: RunningJob, job: Job, gpu_type: str, need: int) -> bool:
    cfg, st, now = cycle.cfg, cycle.st, cycle.now
    v = rj.job
    jid = v.job_id
    return not (
        jid in cycle.out.taken
        or rj.terminating
        or not (v.preemptible and v.checkpointable)
        or v.priority > job.priority
        or rj.gpus == 0
        or rj.gpus >= need
        or v.attempt >= cfg.consolidation_max_job_attempts
        or now - rj.start_time < cfg.min_runtime_s
        or st.run_type.get(jid) != gpu_type
        or (job.cluster is not None and rj.placement.cluster != job.cluster)
    )


def _plan(
    cycle: Cycle, job: Job, gpu_type: str, pods: int, movers: list[RunningJob], excluded: Excluded
) -> Plan | None:
    """The fewest movers, tried in order, after whose moving ``job`` fits and they fit again."""
    limit = cycle.cfg.consolidation_max_moves - cycle.out.moves
    chosen: list[Candidate] = []
    found: Placement | None = None
    for rj in movers:
        if len(chosen) >= limit:
            break
        c = whole_candidate(cycle, rj, PreemptReason.CONSOLIDATION)
        release(cycle, c, +1)
        chosen.append(c)
        found = _placed_with_room(cycle, job, gpu_type, pods, chosen, excluded)
        if found is not None:
            break
    if found is None:
        for c in reversed(chosen):
            release(cycle, c, -1)
        return None
    for c in reversed(chosen[:-1]):  # drop the moves that turned out unnecessary, the last tried first
        release(cycle, c, -1)
        kept = [k for k in chosen if k is not c]
        placement = _placed_with_room(cycle, job, gpu_type, pods, kept, excluded)
        if placement is not None:
            chosen, found = kept, placement
        else:
            release(cycle, c, +1)
    for c in reversed(chosen):
        release(cycle, c, -1)
    return Plan(tuple(chosen), found)


def _placed_with_room(
    cycle: Cycle, job: Job, gpu_type: str, pods: int, moved: list[Candidate], excluded: Excluded
) -> Placement | None:
    """Where ``job`` goes with the ``moved`` jobs' capacity released, provided each of them then fits
    again in what is left (at its full size); None otherwise. The scratch state is left as it was."""
    cap = cycle.cap
    placement = Placer(cap, job, excluded).place(gpu_type, pods, pods)
    if placement is None:
        return None
    taken: list[tuple[Job, NodeAssignment]] = []

    def take(owner: Job, nodes: tuple[NodeAssignment, ...]) -> None:
        for a in nodes:
            cap.take_for(owner, a)
            taken.append((owner, a))

    take(job, placement.nodes)
    try:
        for c in sorted(moved, key=lambda m: (-m.run.gpus, m.run.job.job_id)):  # biggest first: best fit
            v = c.run.job
            again = Placer(cap, v, cycle.reservations.exclusion_for(v)).place(gpu_type, c.run.replicas, c.run.replicas)
            if again is None:
                return None
            take(v, again.nodes)
        return placement
    finally:
        for owner, a in reversed(taken):
            cap.give_for(owner, a)


def _worth_it(cycle: Cycle, job: Job, need: int, plan: Plan) -> bool:
    """Whether the gang's GPU-time saved by starting now exceeds what the moves cost the moved jobs.

    Without the moves the gang waits, on these nodes, until the moved jobs end: the longest of their
    estimated remaining runtimes (for a job past its estimate, as long again as it has overrun: the
    longer a job has run, the longer it tends to run on)."""
    now = cycle.now
    wait = 0.0
    for c in plan.chosen:
        rj = c.run
        wait = max(wait, abs(rj.start_time + cycle.estimate_of(rj.job) - now))
    moved = sum(c.run.gpus for c in plan.chosen)
    return need * wait > moved * cycle.cfg.consolidation_move_cost_s
