"""SchedulerState: the mutable scheduling state with its incremental indexes.

Every mutating method keeps the indexes (pending order, free capacity, quota usage, running-job
indexes, decayed usage) current, so ``schedule`` reads queue heads and bounded candidate sets
instead of rescanning everything. All lifecycle methods are idempotent.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType

from .capacity import CapacityIndex
from .fairshare import integrate
from .growth_book import Bought, GrowthBook
from .model import (
    CPU,
    GPU_PREFIX,
    MEMORY,
    Admit,
    Amount,
    BurstBudget,
    CohortSpec,
    Decision,
    GrowableGroup,
    Job,
    Node,
    Preempt,
    Provision,
    QueueSpec,
    Reject,
    RunningJob,
    Scale,
    gpu_resource,
)
from .node_facts import NodeFacts
from .ordering import QueueOrder
from .pending import PendingQueues
from .quota import QuotaBook, job_request
from .runtimes import Key, RuntimeHistory, RuntimeSample

DEFAULT_HALF_LIFE_S = 7 * 24 * 3600.0


class SchedulerState:
    """Jobs, nodes, queues and usage; read by ``schedule``, changed only through these methods."""

    def __init__(
        self,
        queues: Iterable[QueueSpec] = (),
        cohorts: Iterable[CohortSpec] = (),
        nodes: Iterable[Node] = (),
        *,
        half_life_s: float = DEFAULT_HALF_LIFE_S,
        order: QueueOrder | None = None,
    ) -> None:
        self.half_life_s = half_life_s
        self.order = order or QueueOrder()  # how each queue ranks its jobs (``QueueOrder.of(config)``)
        self.runtimes = RuntimeHistory()  # full-size runtimes of the jobs that succeeded
        self.by_stem: dict[Key, dict[str, None]] = {}  # name stem -> pending jobs ranked by its estimate
        self._relearnt: dict[Key, None] = {}  # stems taught since their jobs were last ranked
        self.book = QuotaBook()
        self.cap = CapacityIndex()
        self.pq = PendingQueues()
        self.pending: dict[str, Job] = {}  # considered by the scheduler
        self.gpuless_pending = 0  # pending jobs that ask for no whole GPU (placeable when every GPU is taken)
        self.elastic_pending = 0
        self.suspended: dict[str, Job] = {}
        self.orphans: dict[str, Job] = {}  # queue unknown
        self.running: dict[str, RunningJob] = {}
        self.run_type: dict[str, str] = {}  # job -> GPU type of its placement
        self.node_jobs: dict[str, dict[str, None]] = {}
        self.running_by_queue: dict[str, dict[str, None]] = {}
        self.borrowed_by_root: dict[str, dict[str, None]] = {}
        self.elastic_running: dict[str, None] = {}
        self.stopping_by_queue: dict[str, dict[str, None]] = {}  # queue -> its terminating jobs
        self.victims_of: dict[str, dict[str, None]] = {}  # preemptor -> terminating victims
        self.preemptor_of: dict[str, str] = {}
        #: waiting preemptor -> node -> (GPUs, CPU, memory) its victims freed there as they went: held for it
        #: until it starts or leaves the queue (``schedule`` gives preemptors their turn before other jobs)
        self.freed_for: dict[str, dict[str, tuple[int, int, int]]] = {}
        self.wait_deadlines: list[tuple[float, str, int]] = []  # (deadline, job, attempt)
        self.run_deadlines: list[tuple[float, str, float]] = []  # (deadline, job, start_time)
        # (gpu type, has estimate) -> heap of (start + estimate or start, job, start)
        self.ends: dict[tuple[str, bool], list[tuple[float, str, float]]] = {}
        self.history: dict[str, tuple[float, float]] = {}  # queue -> (decayed GPU-seconds, as_of)
        self.exhausted: set[str] = set()
        self.lost_nodes: set[str] = set()  # unhealthy or removed nodes (their jobs must be stopped)
        self.node_kinds: dict[tuple[object, ...], tuple[Node, int]] = {}  # static shape -> (example, count)
        self.totals: dict[str, int] = {}  # usable capacity per quota resource (for shares)
        self.node_version = 0
        self.facts = NodeFacts()  # derived from the node set only; replaced when it changes
        self.growth = GrowthBook()  # node groups that can grow, requests for nodes, burst budgets
        for c in cohorts:
            self.set_cohort(c)
        for q in queues:
            self.set_queue(q)
        for n in nodes:
            self.upsert_node(n)

    # ------------------------------------------------------------------ configuration and capacity

    def set_queue(self, spec: QueueSpec) -> None:
        self.book.set_queue(spec)
        for job_id in [j for j, job in self.orphans.items() if job.queue == spec.name]:
            self._enqueue(self.orphans.pop(job_id))

    def set_cohort(self, spec: CohortSpec) -> None:
        self.book.set_cohort(spec)

    def upsert_node(self, node: Node) -> None:
        used = []
        shared_used = []
        for job_id in self.node_jobs.get(node.name, {}):
            rj = self.running[job_id]
            for a in rj.placement.nodes:
                if a.node == node.name:
                    if a.fraction or a.mig_profile:
                        shared_used.append(a)
                    gpus, cpu_m, memory_mb = rj.job.shape(a.role)
                    for i in range(a.pods):
                        group = a.groups[i] if i < len(a.groups) else -1
                        used.append((gpus, cpu_m, memory_mb, group))
        old = self.cap.nodes.get(node.name)
        self._count_totals(old, -1)
        self._count_kind(old, -1)
        self._count_kind(node, +1)
        self.cap.add_node(node, used, shared_used)
        if node.healthy:
            self.lost_nodes.discard(node.name)
        else:
            self.lost_nodes.add(node.name)
        self._count_totals(node, +1)
        if old is None or replace(old, healthy=node.healthy, schedulable=node.schedulable,
                                  unhealthy_since=node.unhealthy_since) != node:
            self.node_version += 1  # static shape changed: facts derived from the node set are stale
            self.facts = NodeFacts()

    def remove_node(self, name: str) -> None:
        if name not in self.cap.nodes:
            return
        self._count_totals(self.cap.nodes[name], -1)
        self._count_kind(self.cap.nodes[name], -1)
        self.cap.remove_node(name)
        self.lost_nodes.add(name)
        self.node_version += 1
        self.facts = NodeFacts()

    def _count_kind(self, node: Node | None, sign: int) -> None:
        if node is None:
            return
        key = (
            node.cluster,
            node.gpu_type,
            node.gpus,
            node.cpu_m,
            node.memory_mb,
            node.nvlink_groups,
            frozenset(node.labels.items()),
            node.taints,
        )
        example, count = self.node_kinds.get(key, (node, 0))
        if count + sign <= 0:
            self.node_kinds.pop(key, None)
        else:
            self.node_kinds[key] = (example, count + sign)

    def _count_totals(self, node: Node | None, sign: int) -> None:
        if node is None or not CapacityIndex.usable(node):
            return
        for res, amount in ((gpu_resource(node.gpu_type), node.gpus), (CPU, node.cpu_m), (MEMORY, node.memory_mb)):
            self.totals[res] = self.totals.get(res, 0) + sign * amount

    # ------------------------------------------------------------------ capacity that grows

    def set_growable_group(self, group: GrowableGroup, nodes: Iterable[str], now: float) -> None:
        """Declare a node group that can grow and shrink, with the names of the nodes it has now."""
        self.growth.set_group(group, nodes, now)
        for name in nodes:
            if self.node_jobs.get(name):
                self.growth.idle_since.pop(name, None)

    def set_burst_budget(self, queue: str, budget: BurstBudget | None) -> None:
        if budget is None:
            self.growth.budgets.pop(queue, None)
        else:
            self.growth.budgets[queue] = budget

    def provision_requested(self, p: Provision, now: float) -> None:
        """A request for nodes is on its way: its job waits for it, and its queue's budget is charged."""
        g = self.growth
        if p.job_id in g.requests:
            return
        g.requests[p.job_id] = p
        g.failed.pop(p.job_id, None)
        g.charge(p.queue, p.gpu_hours, p.money, now)

    def provisioned(self, job_id: str, nodes: Iterable[Node], now: float, booked_until: float) -> None:
        """The nodes requested for ``job_id`` are ready: they join their group, kept for the job until
        ``booked_until`` (for as long as it runs on them once it starts)."""
        p = self.growth.requests.pop(job_id, None)
        nodes = list(nodes)
        for node in nodes:
            self.upsert_node(node)
            if p is None:
                continue
            self.growth.add_member(p.group, node.name, now)
            until = booked_until if job_id in self.pending else now
            self.growth.booked[node.name] = Bought(job_id, p.queue, now, until, node.gpus,
                                                   p.money / p.gpu_hours if p.gpu_hours else 0.0,
                                                   p.gpu_hours / max(len(nodes), 1))

    def provision_failed(self, job_id: str, reason: str, now: float) -> None:
        """The request for ``job_id`` failed: its charge is given back and the job waits for existing capacity."""
        p = self.growth.requests.pop(job_id, None)
        if p is not None:
            self.growth.charge(p.queue, -p.gpu_hours, -p.money, now)
        self.growth.failed[job_id] = (reason, now)

    def node_released(self, name: str, now: float) -> None:
        """A node of a growable group was given back. A bought one's queue is charged what it really cost (from
        ready until now) instead of what was charged up front."""
        b = self.growth.booked.get(name)
        if b is not None:
            hours = b.gpus * max(now - b.ready_at, 0.0) / 3600.0 - b.charged_gpu_hours
            self.growth.charge(b.queue, hours, hours * b.price_per_gpu_hour, now)
        self.growth.drop_member(name)
        self.remove_node(name)
        self.lost_nodes.discard(name)

    # ------------------------------------------------------------------ job lifecycle

    def submit(self, job: Job) -> None:
        known = self.job(job.job_id)
        if known is not None and (job.job_id in self.running or known.attempt >= job.attempt):
            return
        self._drop_pending(job.job_id)
        self._enqueue(job)

    def _enqueue(self, job: Job) -> None:
        if job.queue not in self.book.queues:
            self.orphans[job.job_id] = job
            return
        self.pending[job.job_id] = job
        self.gpuless_pending += not job.total_gpus
        self.elastic_pending += job.elastic
        self._push(job)
        if job.max_wait_s is not None:
            heapq.heappush(self.wait_deadlines, (job.submit_time + job.max_wait_s, job.job_id, job.attempt))

    def _ranking(self, job: Job) -> tuple[float, float]:
        """(rank, promotion time) of a pending job in its queue, by what is known of it now."""
        estimate, sample = self.known(job, self.order.learned)
        return self.order.rank(job, estimate, sample), self.order.promote_at(job, estimate)

    def _push(self, job: Job) -> None:
        """Put a pending job into its queue's order, ranked by what is known of it now."""
        order = self.order
        self.pq.push(job, *self._ranking(job))
        if order.learned and job.runtime_estimate is None:
            key = self.runtimes.stem_key(job)
            if key is not None:
                self.by_stem.setdefault(key, {})[job.job_id] = None

    def _drop_pending(self, job_id: str) -> Job | None:
        job = self.pending.pop(job_id, None)
        if job is not None:
            self.freed_for.pop(job_id, None)  # started, ended or suspended: nothing is held for it any more
            self.gpuless_pending -= not job.total_gpus
            self.elastic_pending -= job.elastic
            self.pq.remove(job_id, job.queue)
            key = self.runtimes.stem_key(job)
            if key is not None and key in self.by_stem:
                members = self.by_stem[key]
                members.pop(job_id, None)
                if not members:
                    del self.by_stem[key]
            if len(self.wait_deadlines) > 64:
                self._compact()
            return job
        return self.suspended.pop(job_id, None) or self.orphans.pop(job_id, None)

    def cancel(self, job_id: str) -> None:
        if job_id in self.running:
            self._release(job_id, None)
        else:
            self._drop_pending(job_id)

    def suspend(self, job_id: str) -> None:
        job = self.pending.get(job_id)
        if job is not None:
            self._drop_pending(job_id)
            self.suspended[job_id] = job

    def resume(self, job_id: str) -> None:
        job = self.suspended.pop(job_id, None)
        if job is not None:
            self._enqueue(job)

    def set_priority(self, job_id: str, priority: int, preemptible: bool | None = None) -> bool:
        """A new priority, and preemptibility unless ``preemptible`` is None (a priority class that differs in
        it). A job running on borrowed quota stays preemptible: False then, and nothing changes."""

        def changed(job: Job) -> Job:
            return replace(job, priority=priority, preemptible=job.preemptible if preemptible is None else preemptible)

        if job_id in self.pending:
            job = self.pending[job_id]
            if changed(job) != job:
                freed = self.freed_for.get(job_id)
                self._drop_pending(job_id)
                self._enqueue(changed(job))
                if freed is not None:  # still waiting: what its victims freed stays held for it
                    self.freed_for[job_id] = freed
        elif job_id in self.suspended:
            self.suspended[job_id] = changed(self.suspended[job_id])
        elif job_id in self.orphans:
            self.orphans[job_id] = changed(self.orphans[job_id])
        elif job_id in self.running:
            rj = self.running[job_id]
            if rj.borrowed and preemptible is False:
                return False
            self.running[job_id] = replace(rj, job=changed(rj.job))
        return True

    def resize_running(self, job: Job, now: float, kept: Mapping[str, int] | None = None) -> Scale | None:
        """A running job's owner changed its size: ``job`` is it as it is now (same id and attempt, its main
        role at the size asked, its elastic minimum at most what it runs). Smaller than it runs: it shrinks
        at once, its pods staying where ``kept`` (node -> pods) says they still are, and the ``Scale``
        returned (already applied) frees the rest. Larger: nothing is taken now; it grows to the size asked
        as its quota and free capacity allow, as an elastic job does. None when nothing was held or changed."""
        rj = self.running.get(job.job_id)
        if rj is None or rj.job.attempt != job.attempt or rj.terminating:
            return None
        if job.min_size > rj.replicas:
            raise ValueError(f"job {job.job_id}: a resize keeps at most the {rj.replicas} pods it runs as its minimum")
        self._unindex_candidate(job.job_id, rj)
        self.running[job.job_id] = rj = replace(rj, job=job)
        self._index_candidate(job.job_id, rj)
        if job.replicas >= rj.replicas:
            return None
        scale = Scale(job.job_id, job.attempt, job.replicas, rj.placement.main_shrunk(job.replicas, kept))
        self.apply(scale, now)
        return scale

    def apply(self, decision: Decision, now: float) -> None:
        """Fold one of ``schedule``'s decisions back into the state."""
        if isinstance(decision, Admit):
            self._admit(decision, now)
        elif isinstance(decision, Preempt):
            rj = self.running.get(decision.job_id)
            if rj is None or rj.job.attempt != decision.attempt or rj.terminating:
                return
            self.running[decision.job_id] = replace(rj, terminating=True, stopping_since=now)
            self.stopping_by_queue.setdefault(rj.job.queue, {})[decision.job_id] = None
            self._unindex_candidate(decision.job_id, rj)
            if decision.preemptor is not None:
                self.victims_of.setdefault(decision.preemptor, {})[decision.job_id] = None
                self.preemptor_of[decision.job_id] = decision.preemptor
        elif isinstance(decision, Scale):
            rj = self.running.get(decision.job_id)
            if rj is None or rj.job.attempt != decision.attempt or rj.replicas == decision.replicas:
                return
            self._hold(rj, -1, now)
            borrowed = rj.borrowed
            served = rj.attained(now) - rj.job.attained_gpu_s
            new = replace(rj, replicas=decision.replicas, placement=decision.placement, served_gpu_s=served,
                          sized_at=now)
            self._hold(new, +1, now)
            if not borrowed and decision.replicas > rj.replicas and self.book.over_nominal(rj.job.queue):
                new = replace(new, borrowed=True)
                self.running[decision.job_id] = new
                self._index_candidate(decision.job_id, new)
        elif isinstance(decision, Reject):
            self._drop_pending(decision.job_id)

    def _admit(self, d: Admit, now: float) -> None:
        job = self.pending.get(d.job_id)
        if job is None or job.attempt != d.attempt:
            return
        self._drop_pending(d.job_id)
        if self.growth.booked:
            for a in d.placement.nodes:
                b = self.growth.booked.get(a.node)
                if b is not None and b.job_id == d.job_id:
                    b.until = math.inf  # kept for it while it runs
        gpu_type = ""
        for a in d.placement.main:
            node = self.cap.nodes.get(a.node)
            if node is not None:
                gpu_type = node.gpu_type
                break
        self.run_type[d.job_id] = gpu_type or job.gpu_type
        rj = RunningJob(job, d.placement, d.replicas, now, borrowed=d.borrowed, bought=d.bought)
        self._hold(rj, +1, now)
        if job.max_runtime_s is not None:
            heapq.heappush(self.run_deadlines, (now + job.max_runtime_s, d.job_id, now))

    def _hold(self, rj: RunningJob, sign: int, now: float | None) -> None:
        """Take (+1) or give back (-1) everything a running job holds, and index it."""
        job = rj.job
        job_id = job.job_id
        self._integrate(job.queue, now)
        for a in rj.placement.nodes:
            if sign > 0:
                self.cap.take_for(job, a)
                self.node_jobs.setdefault(a.node, {})[job_id] = None
            else:
                self.cap.give_for(job, a)
                self.node_jobs.get(a.node, {}).pop(job_id, None)
        if self.growth.node_group:
            self._note_idle(rj, sign, now)
        if not rj.bought:  # work on nodes bought for it is paid by the burst budget, not charged to quota
            self.book.add(job.queue, job_request(job, self.run_type[job_id], rj.replicas), job.user, sign)
        if sign > 0:
            self.running[job_id] = rj
            if not rj.terminating:
                self._index_candidate(job_id, rj)
            est = self.estimate(job, self.order.learned)
            heapq.heappush(
                self.ends.setdefault((self.run_type[job_id], est is not None), []),
                (rj.start_time + (est or 0.0), job_id, rj.start_time),
            )
        else:
            self.running.pop(job_id, None)
            self._unindex_candidate(job_id, rj)
            self._compact()

    def _compact(self) -> None:
        """Drop stale entries of the lazily cleaned heaps once they outnumber the live ones."""
        limit = 2 * len(self.running) + 64
        for key, heap in list(self.ends.items()):
            if len(heap) > limit:
                live = [e for e in heap if (rj := self.running.get(e[1])) is not None and rj.start_time == e[2]]
                heapq.heapify(live)
                self.ends[key] = live
        if len(self.run_deadlines) > limit:
            self.run_deadlines = [
                e for e in self.run_deadlines if (rj := self.running.get(e[1])) is not None and rj.start_time == e[2]
            ]
            heapq.heapify(self.run_deadlines)
        if len(self.wait_deadlines) > 2 * (len(self.pending) + len(self.suspended)) + 64:
            self.wait_deadlines = [e for e in self.wait_deadlines if e[1] in self.pending or e[1] in self.suspended]
            heapq.heapify(self.wait_deadlines)
        for name in [n for n in self.lost_nodes if n not in self.cap.nodes and not self.node_jobs.get(n)]:
            self.lost_nodes.discard(name)
            self.node_jobs.pop(name, None)

    def _index_candidate(self, job_id: str, rj: RunningJob) -> None:
        self.running_by_queue.setdefault(rj.job.queue, {})[job_id] = None
        root = self.book.root_of.get(rj.job.queue)
        if rj.borrowed and root is not None:
            self.borrowed_by_root.setdefault(root, {})[job_id] = None
        if rj.job.elastic:
            self.elastic_running[job_id] = None

    def _unindex_candidate(self, job_id: str, rj: RunningJob) -> None:
        self.running_by_queue.get(rj.job.queue, {}).pop(job_id, None)
        for members in self.borrowed_by_root.values():
            members.pop(job_id, None)
        self.elastic_running.pop(job_id, None)

    def _note_idle(self, rj: RunningJob, sign: int, now: float | None) -> None:
        """Keep when each node of a growable group last went idle (a node idle long enough may be given back);
        a bought node is kept for its job no longer once the job leaves it."""
        g = self.growth
        for a in rj.placement.nodes:
            if a.node not in g.node_group:
                continue
            if sign > 0:
                g.idle_since.pop(a.node, None)
            elif not self.node_jobs.get(a.node) and now is not None:
                g.idle_since[a.node] = now
                b = g.booked.get(a.node)
                if b is not None and b.job_id == rj.job.job_id:
                    b.until = min(b.until, now)

    def _release(self, job_id: str, now: float | None) -> RunningJob:
        rj = self.running[job_id]
        stopping = self.stopping_by_queue.get(rj.job.queue)
        if stopping is not None and stopping.pop(job_id, 0) is None and not stopping:
            del self.stopping_by_queue[rj.job.queue]
        self._hold(rj, -1, now)
        self.run_type.pop(job_id, None)
        preemptor = self.preemptor_of.pop(job_id, None)
        if preemptor is not None:
            victims = self.victims_of.get(preemptor, {})
            victims.pop(job_id, None)
            if not victims:
                self.victims_of.pop(preemptor, None)
            if preemptor in self.pending:
                freed = self.freed_for.setdefault(preemptor, {})
                for a in rj.placement.nodes:
                    gpus, cpu_m, memory_mb = rj.job.shape(a.role)
                    g, c, m = freed.get(a.node, (0, 0, 0))
                    freed[a.node] = (g + a.pods * gpus, c + a.pods * cpu_m, m + a.pods * memory_mb)
        return rj

    def run_started(self, job_id: str, now: float) -> None:
        """The admitted job's pods run: its service counts from now, not from its admission (pulling
        images and starting pods on a real cluster is no progress)."""
        rj = self.running.get(job_id)
        if rj is not None and not rj.terminating and rj.served_gpu_s == 0.0 and rj.sized_at is None:
            self.running[job_id] = replace(rj, sized_at=max(now, rj.start_time))

    def job_finished(self, job_id: str, now: float, *, succeeded: bool = False) -> None:
        """The job ended for good; a success teaches its full-size runtime to ``runtimes``."""
        if job_id in self.running:
            rj = self._release(job_id, now)
            if succeeded:
                self.learn(rj.job, rj.attained(now) / max(rj.job.total_gpus, 1))
        else:
            self._drop_pending(job_id)

    def job_stopped(self, job_id: str, now: float, requeue: bool = True, avoid: frozenset[str] | None = None) -> None:
        """The job's run ended early; requeued as the next attempt, which avoids ``avoid`` (if given) instead
        of the nodes the job avoided so far."""
        if job_id not in self.running:
            return
        rj = self._release(job_id, now)
        if requeue:
            job = rj.job
            self._enqueue(
                replace(
                    job,
                    attempt=job.attempt + 1,
                    attained_gpu_s=rj.attained(now),
                    queued_at=now,
                    last_run_s=max(now - rj.start_time, 0.0),
                    avoid_nodes=job.avoid_nodes if avoid is None else avoid,
                )
            )

    # ------------------------------------------------------------------ runtime estimates

    def estimate(self, job: Job, learned: bool = True) -> float | None:
        """The job's runtime estimate: its submitter's, else (``learned``) what finished jobs taught."""
        if job.runtime_estimate is not None or not learned:
            return job.runtime_estimate
        return self.runtimes.estimate(job)

    def sample(self, job: Job, learned: bool = True) -> RuntimeSample | None:
        """The learnt runtimes the job's estimate is the median of; None when its submitter gave one, or
        nothing is learnt (``learned`` off, or no finished job of its kind)."""
        if job.runtime_estimate is not None or not learned:
            return None
        return self.runtimes.sample(job)

    def known(self, job: Job, learned: bool = True) -> tuple[float | None, RuntimeSample | None]:
        """``(estimate(job, learned), sample(job, learned))`` from one look-up."""
        sample = self.sample(job, learned)
        return (job.runtime_estimate if sample is None else sample.median), sample

    def learn(self, job: Job, runtime_s: float) -> None:
        """Teach the full-size runtime of a job that succeeded; waiting jobs of its stem are re-ranked
        before the next walk of their queues (once, however many of the stem's jobs finish until then)."""
        self.runtimes.observe(job, runtime_s)
        key = self.runtimes.stem_key(job)
        if key is not None and self.order.learned and key in self.by_stem:
            self._relearnt[key] = None

    def _rerank_relearnt(self) -> None:
        """Rank again the waiting jobs of the stems taught since they were last ranked (the walk's order is
        by value, so ranking them here or at each lesson gives the same walk)."""
        relearnt, self._relearnt = self._relearnt, {}
        for key in relearnt:
            for job_id in list(self.by_stem.get(key, ())):
                waiting = self.pending[job_id]
                ranking = self._ranking(waiting)
                if self.pq.ranks.get(job_id) != ranking:
                    self.pq.push(waiting, *ranking)

    def walk_queue(self, queue: str, now: float, order: QueueOrder) -> Iterator[str]:
        """The queue's pending jobs in ``order`` at ``now``: from the index when the state keeps that
        order, else sorted on the spot (a cycle whose configuration orders queues differently)."""
        if order == self.order:
            if self._relearnt:
                self._rerank_relearnt()
            return self.pq.walk_queue(queue, now, order.interleaves)
        return iter(self._sorted_queue(queue, now, order))

    def _sorted_queue(self, queue: str, now: float, order: QueueOrder) -> list[str]:
        lanes: dict[tuple[int, bool], list[tuple[float, float, str]]] = {}  # (-priority, promoted) -> jobs
        for job in self.pending.values():
            if job.queue != queue:
                continue
            estimate, sample = self.known(job, order.learned)
            promote_at = order.promote_at(job, estimate)
            promoted = promote_at <= now
            rank = promote_at if promoted else order.rank(job, estimate, sample)
            lanes.setdefault((-job.priority, promoted), []).append((rank, job.submit_time, job.job_id))
        walked: list[str] = []
        for level in sorted({neg for neg, _ in lanes}):
            first = sorted(lanes.get((level, True), []))
            rest = sorted(lanes.get((level, False), []))
            if not order.interleaves:
                walked += [j for *_, j in first + rest]
                continue
            for i in range(max(len(first), len(rest))):  # every other place, a promoted job's first
                walked += [lane[i][2] for lane in (first, rest) if i < len(lane)]
        return walked

    def set_usage(self, queue: str, decayed_gpu_seconds: float, as_of: float) -> None:
        self.history[queue] = (decayed_gpu_seconds, as_of)

    def set_budget_exhausted(self, tenant: str, exhausted: bool) -> None:
        if exhausted:
            self.exhausted.add(tenant)
        else:
            self.exhausted.discard(tenant)

    def _integrate(self, queue: str, now: float | None) -> None:
        if now is None:  # no time given (cancel): keep the history as it is
            return
        self.history[queue] = (self.decayed_usage(queue, now), now)

    def decayed_usage(self, queue: str, now: float, half_life_s: float | None = None) -> float:
        """Decayed GPU-seconds of ``queue`` extrapolated to ``now`` (read-only).

        History is folded in at every allocation change with the state's ``half_life_s``; a different
        half-life here only applies to the stretch since the last change.
        """
        value, as_of = self.history.get(queue, (0.0, now))
        h = self.half_life_s if half_life_s is None else half_life_s
        return integrate(value, as_of, self.queue_gpus(queue), now, h)

    def queue_gpus(self, queue: str) -> float:
        """GPUs the queue holds: whole GPUs plus the shares its fractional and MIG jobs are charged."""
        return float(sum(v for r, v in self.book.alloc.get(queue, {}).items() if r.startswith(GPU_PREFIX)))

    # ------------------------------------------------------------------ reads

    def job(self, job_id: str) -> Job | None:
        for table in (self.pending, self.suspended, self.orphans):
            job = table.get(job_id)
            if job is not None:
                return job
        rj = self.running.get(job_id)
        return rj.job if rj is not None else None

    @property
    def pending_count(self) -> int:
        return len(self.pending) + len(self.suspended) + len(self.orphans)

    def running_jobs(self) -> Mapping[str, RunningJob]:
        return MappingProxyType(self.running)

    def nodes(self) -> Mapping[str, Node]:
        return MappingProxyType(self.cap.nodes)

    def free_gpus(self, node: str) -> int:
        return self.cap.free.get(node, 0)

    def queue_usage(self, queue: str) -> Mapping[str, Amount]:
        return MappingProxyType({r: v for r, v in self.book.alloc.get(queue, {}).items() if v})
