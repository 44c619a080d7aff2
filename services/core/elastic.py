"""Elastic growth: running elastic jobs take idle capacity nobody pending could use."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from .model import Admit, Job, NodeAssignment, Placement, RunningJob, Scale, TopologyMode
from .placement import Placer
from .quota import job_request

if TYPE_CHECKING:
    from .cycle import Cycle
    from .reservations import Excluded


def merge(placement: Placement, extra: Iterable[NodeAssignment]) -> Placement:
    """Placement with ``extra`` pods of the main role added, one main-role assignment per node (the
    companion roles' assignments stay as they are)."""
    by_node: dict[str, NodeAssignment] = {a.node: a for a in placement.main}
    order = [a.node for a in placement.main]
    for a in extra:
        old = by_node.get(a.node)
        if old is None:
            by_node[a.node] = a
            order.append(a.node)
        else:
            by_node[a.node] = replace(old, pods=old.pods + a.pods, groups=old.groups + a.groups,
                                      slots=old.slots + a.slots)
    return placement.with_main(tuple(by_node[n] for n in order))


def _allowed_nodes(cycle: Cycle, job: Job, placement: Placement) -> list[str] | None:
    """Nodes growth may use under a required topology (None: anywhere in the cluster)."""
    topo = job.topology
    main = placement.main
    if topo is None or topo.mode is not TopologyMode.REQUIRED or not main:
        return None
    first = cycle.cap.nodes.get(main[0].node)
    if first is None:
        return []
    if topo.level == "node":
        return [first.name]
    return list(cycle.cap.domain_nodes.get(first.domain(topo.level), ()))


Entry = tuple[str, Job, int, Placement, str]  # job id, job, current pods, placement, GPU type


def _place_in_order(cycle: Cycle, job: Job, attained: float) -> tuple[int, float]:
    """Where a job stands among its queue's jobs, waiting or running: (-priority, standing)."""
    order = cycle.order
    estimate, sample = cycle.st.known(job, order.learned)
    return -job.priority, order.standing(job, estimate, attained, sample)


def _growers(cycle: Cycle) -> dict[str, list[tuple[tuple[int, float], str]]]:
    """Per queue, its running elastic jobs below full size by their place in its order (the furthest
    ahead last); built once per cycle."""
    if cycle.memo.growers is None:
        st = cycle.st
        cycle.memo.growers = {}
        for jid in st.elastic_running:
            rj = st.running[jid]
            if rj.terminating or rj.replicas >= rj.job.replicas:
                continue
            place = _place_in_order(cycle, rj.job, rj.attained(cycle.now))
            cycle.memo.growers.setdefault(rj.job.queue, []).append((place, jid))
        for waiting_list in cycle.memo.growers.values():
            waiting_list.sort(reverse=True)
    return cycle.memo.growers


def may_grow_in_walk(cycle: Cycle) -> bool:
    """Whether a running elastic job may still grow ahead of a job walked later in this cycle."""
    return any(_growers(cycle).values())


def grow_ahead_of(cycle: Cycle, waiting: Job) -> None:
    """Before ``waiting`` is considered, grow the running elastic jobs of its queue that stand ahead of it
    in the queue's order into free capacity: a job below its full size still wants the rest, and a job
    behind it must not take it first (it would have, had the GPUs been free when it started)."""
    entries = _growers(cycle).get(waiting.queue)
    if not entries:
        return
    place = _place_in_order(cycle, waiting, waiting.attained_gpu_s)
    st = cycle.st
    while entries and entries[-1][0] < place:
        _, jid = entries.pop()
        rj = st.running[jid]
        if jid in cycle.out.taken:
            continue
        _grow_one(cycle, (jid, rj.job, rj.replicas, rj.placement, st.run_type.get(jid, "")),
                  cycle.reservations.exclusion_for_growth())


def _worth_growing(cycle: Cycle, rj: RunningJob, current: int, target: int) -> bool:
    """Whether growing a running job from ``current`` to ``target`` pods saves it more time than the
    resize costs it (``resize_cost_s``), by its estimated remaining work at the GPUs it holds now; always
    for a serving job."""
    cost = cycle.cfg.resize_cost_s
    if cost <= 0 or rj.job.serving:
        return True  # a serving job's size is what its owner asked for: it has no remaining work to weigh
    job, order = rj.job, cycle.order
    est = cycle.st.estimate(job, order.learned)
    left = (order.default_estimate_s if est is None else est) * max(job.total_gpus, 1) - rj.attained(cycle.now)
    if left <= 0:
        return False  # past its estimate: nothing says it has long to go
    gpus = max(current * job.gpus_per_pod, 1)
    return left / gpus * (1.0 - current / target) > cost


def grow(cycle: Cycle) -> None:
    """Scale elastic jobs up (or enlarge this cycle's admissions) where capacity is idle."""
    if "" in cycle.wants.wanted:
        return
    st = cycle.st
    entries: list[tuple[int, float, Entry]] = []
    for jid in st.elastic_running:
        rj = st.running[jid]
        if jid in cycle.out.taken or rj.terminating or rj.replicas >= rj.job.replicas:
            continue
        entry = (jid, rj.job, rj.replicas, rj.placement, st.run_type.get(jid, ""))
        entries.append((-rj.job.priority, rj.start_time, entry))
    for jid, (idx, job, gpu_type) in cycle.out.admitted.items():
        d = cycle.out.decisions[idx]
        if job.elastic and isinstance(d, Admit) and d.replicas < job.replicas:
            entries.append((-job.priority, cycle.now, (jid, job, d.replicas, d.placement, gpu_type)))
    entries.sort(key=lambda e: (e[0], e[1], e[2][0]))
    excluded = cycle.reservations.exclusion_for_growth()
    for _, _, entry in entries[: cycle.cfg.max_growth_per_cycle]:
        if entry[4] not in cycle.wants.wanted:
            _grow_one(cycle, entry, excluded)


def _grow_one(cycle: Cycle, entry: Entry, excluded: Excluded) -> None:
    """Add as many of the job's missing pods as its quota and the free capacity allow."""
    jid, job, current, placement, gpu_type = entry
    book = cycle.book
    wants = cycle.wants
    if job.queue in wants.quota_queues or book.root_of.get(job.queue) in wants.quota_cohorts:
        return
    k = book.most_pods(job, gpu_type, job.replicas - current, companions=False)
    if k <= 0:
        return
    running = cycle.st.running.get(jid) if jid not in cycle.out.admitted else None
    if running is not None and not _worth_growing(cycle, running, current, current + k):
        return
    placer = Placer(cycle.cap, job, excluded)
    names = _allowed_nodes(cycle, job, placement)
    found = placer.fill_group((placement.cluster, gpu_type), 1, k) if names is None else placer.place_in(names, 1, k)
    if not found:
        return
    added = sum(a.pods for a in found)
    for a in found:
        cycle.cap.take_for(job, a)
    book.add(job.queue, job_request(job, gpu_type, added, companions=False), job.user, +1)
    new_placement = merge(placement, found)
    if jid in cycle.out.admitted:
        idx = cycle.out.admitted[jid][0]
        d = cycle.out.decisions[idx]
        assert isinstance(d, Admit)
        borrowed = d.borrowed or book.over_nominal(job.queue)
        cycle.out.decisions[idx] = Admit(jid, d.attempt, new_placement, current + added, borrowed)
    else:
        cycle.out.taken.add(jid)
        cycle.out.decisions.append(Scale(jid, job.attempt, current + added, new_placement))
