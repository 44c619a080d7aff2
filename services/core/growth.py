"""Capacity that grows: when to buy nodes for a waiting job, and when to give bought nodes back.

A job the walk found blocked on capacity (its quota is there, the nodes are not) may have nodes of a growable
group bought for it (``Provision``) when all of these hold:

- it waits for capacity, or nothing in the existing cluster can host it, or its queue's quota is spent: work
  on bought nodes runs outside the queue's quota (``Admit.bought``), paid by the burst budget alone;
- its queue has a burst budget with room for the charge: the bought GPUs from ready until the job's estimated
  end plus the group's idle time, in GPU-hours and in money;
- a growable group can host its pods (GPU type, selector, taints, cluster pin, pod size) and has room below
  its maximum for the nodes its main role needs;
- the bought nodes would be ready more than ``provision_margin_s`` before existing capacity would start it.
  That start is, for a job waiting for quota, when its quota frees up; else the reservation the walk found
  for it, else the decisions' own estimate of when it starts behind the jobs ahead of it, else the earliest
  time its pool frees up as the running jobs end as estimated; unknown counts as never. So nothing is
  bought for work that existing capacity serves sooner. The last search clones the capacity index, so a
  cycle makes at most ``MAX_SEARCHES_PER_CYCLE``; a job it could not search gets nothing bought this cycle
  (never on a guess).

Among the groups that qualify the cheapest is taken, then the one ready first. One request per job is in
flight at a time; while it is, the job waits with reason ``waiting_for_provisioning`` and the request's
ready time as its estimated start. When the nodes come they are kept for the job (``provision_booking_s``):
other jobs may not use them meanwhile. A failed request (or one unanswered ``provision_timeout_s`` after the
nodes were expected: ``overdue``) gives its charge back and leaves the job waiting for existing capacity, its
status saying why; nothing more is bought for it for ``provision_retry_s``.

A bought node is kept for the job it was bought for until it starts (at most ``provision_booking_s`` after the
node is ready); while that job runs there, jobs of its queue may use the GPUs it leaves free (the queue pays
for the node anyway); once the job has left it, no new work goes there. A member node of a growable group that has
held no pod for the group's ``idle_s`` (a bought one counted from when it stopped being kept) is given back
(``Release``) while the group stays at or above its minimum; a bought node's queue is then charged what it
really cost, from ready until given back, in place of the up-front charge. All of it is pure: ``now`` comes in, the
decisions go out, and the caller (the simulator, or the service that talks to the cloud) carries them out
and tells the state (``SchedulerState.provision_requested``, ``provisioned``, ``provision_failed``,
``node_released``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .backfill import find_reservation
from .growth_book import GrowthBook
from .model import GrowableGroup, Job, PendingReason, Provision, Release
from .placement import Placer, node_eligible
from .reservations import Excluded

if TYPE_CHECKING:
    from .cycle import Cycle

Verdict = tuple[PendingReason, float | None]

#: blocked jobs per cycle whose existing-capacity start may be searched for (``find_reservation`` clones the
#: capacity index): the bound keeps a long backlog from making every cycle pay for it
MAX_SEARCHES_PER_CYCLE = 16

#: ``existing_start`` when the cycle's searches are spent: not known, so nothing is bought
NOT_SEARCHED = -math.inf

_CAPACITY_REASONS = (PendingReason.CAPACITY, PendingReason.RESERVATION, PendingReason.TOPOLOGY,
                     PendingReason.BEHIND_RESERVATION, PendingReason.NO_MATCHING_NODES)
#: a queue's quota is spent (or lent out): bought nodes carry its work beyond it, paid by its burst budget
_QUOTA_REASONS = (PendingReason.QUEUE_QUOTA, PendingReason.COHORT_QUOTA, PendingReason.QUOTA_LENT,
                  PendingReason.NON_PREEMPTIBLE_QUOTA)
_GROWS_FOR = (*_CAPACITY_REASONS, *_QUOTA_REASONS)


def pods_per_node(group: GrowableGroup, job: Job) -> int:
    """How many of the job's main-role pods one node of the group holds (0: none)."""
    t = group.template
    fits = [t.gpus // job.gpus_per_pod] if job.gpus_per_pod else []
    if job.cpu_m and t.cpu_m:
        fits.append(t.cpu_m // job.cpu_m)
    if job.memory_mb and t.memory_mb:
        fits.append(t.memory_mb // job.memory_mb)
    return min(fits) if fits else 0


def can_host(group: GrowableGroup, job: Job) -> bool:
    """Whether nodes of the group could ever host the job's pods (capacity aside)."""
    t = group.template
    if job.shares_gpus or job.gpus_per_pod <= 0:
        return False  # GPU sharing and CPU-only work never buy nodes
    if job.gpu_type and job.gpu_type != t.gpu_type:
        return False
    if job.cluster is not None and job.cluster != t.cluster:
        return False
    return node_eligible(t, job) and pods_per_node(group, job) > 0


def charge_for(group: GrowableGroup, nodes: int, runtime_s: float) -> tuple[float, float]:
    """GPU-hours and money charged up front for buying ``nodes`` of the group for a job of ``runtime_s``: from
    ready until the job's estimated end plus the group's idle time (a node is billed from ready until given
    back, and the charge is trued up to that when it is)."""
    gpu_hours = nodes * group.template.gpus * (runtime_s + group.idle_s) / 3600.0
    return gpu_hours, gpu_hours * group.price_per_gpu_hour


def consider(cycle: Cycle, job: Job, reason: PendingReason, start: float | None) -> Verdict | None:
    """Step 7b of the walk for a blocked job: its request in flight, a new request, or None (nothing bought)."""
    g = cycle.st.growth
    p = g.requests.get(job.job_id)
    if p is not None:
        return PendingReason.PROVISIONING, p.ready_at
    if reason not in _GROWS_FOR or job.queue not in g.budgets or job.job_id in cycle.out.provisioned:
        return None
    if g.kept_for(job.job_id, cycle.now):
        return None  # its bought nodes are here: it waits for something else
    failed = g.failed.get(job.job_id)
    if failed is not None and cycle.now < failed[1] + cycle.cfg.provision_retry_s:
        return None  # its last request failed a short while ago: it waits for existing capacity
    candidates = [grp for grp in sorted(g.groups.values(), key=lambda x: x.name) if can_host(grp, job)]
    if not candidates:
        return None
    runtime = cycle.estimate_of(job)
    best: tuple[float, float, str, Provision] | None = None
    for grp in candidates:
        nodes = math.ceil(max(job.min_size, 1) / pods_per_node(grp, job))
        if g.size(grp.name) + cycle.out.growing.get(grp.name, 0) + nodes > grp.max_nodes:
            continue
        gpu_hours, money = charge_for(grp, nodes, runtime)
        pending_hours, pending_money = cycle.out.charged.get(job.queue, (0.0, 0.0))
        if not g.allows(job.queue, pending_hours + gpu_hours, pending_money + money, cycle.now):
            continue
        ready = cycle.now + grp.provision_delay_s
        key = (money, ready, grp.name)
        if best is None or key < best[:3]:
            best = (money, ready, grp.name,
                    Provision(job.job_id, job.queue, grp.name, nodes, ready, gpu_hours, money))
    if best is None:
        return None
    chosen = best[3]
    existing = existing_start(cycle, job, reason, start)
    if existing == NOT_SEARCHED:
        return None  # not known this cycle: nothing is bought on a guess (a later cycle searches it)
    if existing is not None and chosen.ready_at + cycle.cfg.provision_margin_s >= existing:
        return None  # existing capacity serves it about as soon: nothing is bought
    out = cycle.out
    out.provisions.append(chosen)
    out.provisioned.add(job.job_id)
    out.growing[chosen.group] = out.growing.get(chosen.group, 0) + chosen.nodes
    hours, money = out.charged.get(job.queue, (0.0, 0.0))
    out.charged[job.queue] = (hours + chosen.gpu_hours, money + chosen.money)
    return PendingReason.PROVISIONING, chosen.ready_at


def message(cycle: Cycle, job: Job, reason: PendingReason) -> str | None:
    """The status message of a job nodes are bought for ("provisioning 4 x a100 node(s) ..."), or of one
    whose request failed; None: the usual message."""
    g = cycle.st.growth
    p = g.requests.get(job.job_id) or next((q for q in cycle.out.provisions if q.job_id == job.job_id), None)
    if reason is PendingReason.PROVISIONING and p is not None:
        t = g.groups[p.group].template
        minutes = max(math.ceil((p.ready_at - cycle.now) / 60.0), 0)
        return (f"provisioning {p.nodes} x {t.gpu_type} node{'' if p.nodes == 1 else 's'} "
                f"({t.gpus} GPUs each, group {p.group}), ready in ~{minutes} min")
    failed = g.failed.get(job.job_id)
    if failed is not None:
        return f"{cycle.out.info[job.job_id].message}; buying nodes failed ({failed[0]}), waiting for existing capacity"
    return None


def overdue(book: GrowthBook, now: float, timeout_s: float) -> list[str]:
    """The jobs whose request is still unanswered ``timeout_s`` after the nodes were expected: the caller fails
    them (``SchedulerState.provision_failed``), and they wait for existing capacity."""
    return sorted(job for job, p in book.requests.items() if now > p.ready_at + timeout_s)


def admit_on_bought(cycle: Cycle, job: Job) -> bool:
    """Step 3a: a job whose bought nodes are ready starts there, outside its queue's quota (True: admitted)."""
    g, now = cycle.st.growth, cycle.now
    kept = [n for n, b in g.booked.items() if b.job_id == job.job_id and now < b.until < math.inf]
    if not kept:
        return False
    tenant = job.tenant or cycle.book.queues[job.queue].tenant
    if tenant and tenant in cycle.st.exhausted:
        return False
    pods = max(job.min_size, 1)
    others = Excluded(frozenset(cycle.cap.nodes).difference(kept), ("bought-for:" + job.job_id,))
    for gpu_type in sorted({cycle.cap.nodes[n].gpu_type for n in kept if n in cycle.cap.nodes}):
        placement = Placer(cycle.cap, job, others).place(gpu_type, pods, pods)
        if placement is not None:
            cycle.commit_admit(job, gpu_type, placement, pods, borrowed=False, bought=True)
            return True
    return False


def existing_start(cycle: Cycle, job: Job, reason: PendingReason, start: float | None) -> float | None:
    """When existing capacity would start the job, as far as the cycle can tell (None: never, or unknown;
    ``NOT_SEARCHED``: the cycle's searches are spent, so it cannot tell)."""
    if reason in _QUOTA_REASONS:
        return cycle.forecast.quota_start(job, reason, start)  # when its quota frees up (None: never known)
    if reason is PendingReason.RESERVATION and start is not None:
        return start
    t = cycle.forecast.start_in_order(job, commit=False)
    if t is not None:
        return t
    if cycle.out.growth_searches >= MAX_SEARCHES_PER_CYCLE:
        return NOT_SEARCHED
    cycle.out.growth_searches += 1
    res = find_reservation(cycle, job)
    return None if res is None else res.time


def idle_releases(cycle: Cycle) -> list[Release]:
    """Member nodes without pods for their group's ``idle_s``, above each group's minimum; a bought node only
    once it is no longer kept for its job."""
    g, now = cycle.st.growth, cycle.now
    if not g.idle_since:
        return []
    left = {name: len(members) for name, members in g.members.items()}
    out: list[Release] = []
    for node, since in sorted(g.idle_since.items(), key=lambda e: (e[1], e[0])):
        group_name = g.node_group.get(node)
        if group_name is None or cycle.st.node_jobs.get(node):
            continue
        bought = g.booked.get(node)
        if bought is not None and bought.until > now:
            continue
        grp = g.groups[group_name]
        idle_from = since if bought is None else max(since, bought.until)
        if now - idle_from < grp.idle_s or left[group_name] <= grp.min_nodes:
            continue
        n = cycle.cap.nodes.get(node)
        if n is not None and cycle.cap.free.get(node, 0) < n.gpus:
            continue  # this cycle placed work on it
        left[group_name] -= 1
        out.append(Release(node, group_name))
    return out


def next_release_at(g: GrowthBook) -> float | None:
    """The earliest time a member node now idle could be given back (None: none idle)."""
    times = []
    for node, since in g.idle_since.items():
        grp = g.node_group.get(node)
        if grp is None:
            continue
        bought = g.booked.get(node)
        at = (since if bought is None else max(since, bought.until)) + g.groups[grp].idle_s
        if math.isfinite(at):
            times.append(at)
    return min(times, default=None)
