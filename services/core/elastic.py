"""Elastic growth: running elastic jobs take idle capacity nobody pending could use."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from .model import Admit, Job, NodeAssignment, Placement, Scale, TopologyMode
from .placement import Placer
from .quota import job_request

if TYPE_CHECKING:
    from .cycle import Cycle


def merge(placement: Placement, extra: Iterable[NodeAssignment]) -> Placement:
    """Placement with ``extra`` pods added, one assignment per node."""
    by_node: dict[str, NodeAssignment] = {a.node: a for a in placement.nodes}
    order = [a.node for a in placement.nodes]
    for a in extra:
        old = by_node.get(a.node)
        if old is None:
            by_node[a.node] = a
            order.append(a.node)
        else:
            by_node[a.node] = replace(old, pods=old.pods + a.pods, groups=old.groups + a.groups,
                                      slots=old.slots + a.slots)
    return Placement(placement.cluster, tuple(by_node[n] for n in order))


def _allowed_nodes(cycle: Cycle, job: Job, placement: Placement) -> list[str] | None:
    """Nodes growth may use under a required topology (None: anywhere in the cluster)."""
    topo = job.topology
    if topo is None or topo.mode is not TopologyMode.REQUIRED or not placement.nodes:
        return None
    first = cycle.cap.nodes.get(placement.nodes[0].node)
    if first is None:
        return []
    if topo.level == "node":
        return [first.name]
    return list(cycle.cap.domain_nodes.get(first.domain(topo.level), ()))


def grow(cycle: Cycle) -> None:
    """Scale elastic jobs up (or enlarge this cycle's admissions) where capacity is idle."""
    if "" in cycle.wanted:
        return
    st, book = cycle.st, cycle.book
    entries: list[tuple[int, float, str, Job, int, Placement, str]] = []
    for jid in st.elastic_running:
        rj = st.running[jid]
        if jid in cycle.taken or rj.terminating or rj.replicas >= rj.job.replicas:
            continue
        entries.append(
            (-rj.job.priority, rj.start_time, jid, rj.job, rj.replicas, rj.placement, st.run_type.get(jid, ""))
        )
    for jid, (idx, job, gpu_type) in cycle.admitted.items():
        d = cycle.decisions[idx]
        if job.elastic and isinstance(d, Admit) and d.replicas < job.replicas:
            entries.append((-job.priority, cycle.now, jid, job, d.replicas, d.placement, gpu_type))
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    excluded = cycle.exclusion_for_growth()
    for _, _, jid, job, current, placement, gpu_type in entries[: cycle.cfg.max_growth_per_cycle]:
        root = book.root_of.get(job.queue)
        if gpu_type in cycle.wanted or job.queue in cycle.quota_wanted or f"cohort:{root}" in cycle.quota_wanted:
            continue
        k = job.replicas - current
        while k > 0 and (
            book.check(job.queue, job_request(job, gpu_type, k), may_borrow=job.preemptible)[0] is not None
            or (job.gpu_amount and not book.user_ok(job.queue, job.user, k * job.gpu_amount))
        ):
            k -= 1
        if k <= 0:
            continue
        placer = Placer(cycle.cap, job, excluded)
        names = _allowed_nodes(cycle, job, placement)
        found = (
            placer.fill_group((placement.cluster, gpu_type), 1, k) if names is None else placer.place_in(names, 1, k)
        )
        if not found:
            continue
        added = sum(a.pods for a in found)
        for a in found:
            cycle.cap.take(job.gpus_per_pod, job.cpu_m, job.memory_mb, a)
        book.add(job.queue, job_request(job, gpu_type, added), job.user, +1)
        new_placement = merge(placement, found)
        if jid in cycle.admitted:
            idx = cycle.admitted[jid][0]
            d = cycle.decisions[idx]
            assert isinstance(d, Admit)
            borrowed = d.borrowed or book.over_nominal(job.queue)
            cycle.decisions[idx] = Admit(jid, d.attempt, new_placement, current + added, borrowed)
        else:
            cycle.taken.add(jid)
            cycle.decisions.append(Scale(jid, job.attempt, current + added, new_placement))
