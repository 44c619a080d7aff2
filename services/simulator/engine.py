"""Discrete-event driver of ``services.core.schedule`` in virtual time.

Events live in one heap ordered by (time, sequence): arrivals, completions, preemption stops and
periodic ticks. After every batch of events sharing a timestamp the simulator runs one scheduling
cycle (the very same ``schedule`` the queue manager runs) and folds each decision back with
``SchedulerState.apply``. The state integrates each queue's decayed GPU usage itself as jobs start
and stop, so the quota accountant's ``set_usage`` feed is not needed in virtual time.

While jobs are pending the simulator also runs a cycle on a tick: ``tick_s`` after the last
event, doubling after each tick that changed nothing, up to ``max_tick_s``, so a blocked queue
does not cost a cycle per minute over months of trace.

With ``round_s`` set, cycles run only at multiples of it (every round while jobs wait), as the
research simulators (Tiresias, Pollux: 60 s) do; events between two rounds wait for the next one.

Work model: a job's work is ``duration x GPUs`` GPU-seconds at its full size; it progresses at a
rate equal to the GPUs it currently holds (linear scaling), so an elastic job running at half size
takes twice as long. Below a job's own size that is conservative for data-parallel training, whose
speed-up is concave in its GPUs (the Pollux workloads' own figures at several sizes agree); above it,
it would flatter, and no job grows past its size. Every (re)start, and every ``Scale`` (the job
re-forms its gang at the new size from a checkpoint), first costs ``restart_cost_s`` during which the
job holds its GPUs and makes no progress. A preempted job keeps
running until its stop time ``now + min(grace period, checkpoint_s)``; then a checkpointable job
keeps the progress made so far and a non-checkpointable one restarts from zero when it is admitted
again. A job that completes during its grace period simply completes.

A job of several roles (``WorkloadJob.roles``) is a core job of its main role's pods with its companion
roles (``Job.role``, ``Job.companions``, every role's CPU and memory), so admission, quota, fair share,
placement and preemption count every role as the queue manager does. Its work is its main role's
(``duration x`` the main role's GPUs; only the main role grows and shrinks); its GPU-seconds and the
allocation timeline count every role's GPUs.

A job of Muster's own log (``WorkloadJob.spec``, see ``services.simulator.replay``) is built from its spec
by the queue manager's translation (``services.spec.core_types.job_from_spec``): its name, user, tolerations
(the GPU taint when it asks for GPUs), grace period (its checkpoint's, none when it does not checkpoint), node
selector, topology, cluster, GPU sharing, CPU and memory, deadlines and elasticity are the ones the queue
manager schedules. Its allocation counts what the core charges its pods (shares of GPUs included); its
``max_wait_s`` and ``max_runtime_s`` bring a cycle when they run out. A job of a workload file (a trace's) has
no spec: it is split into pods of at most a node's GPUs (``pod_shape``), tolerates every taint of the
cluster, waits the simulation's ``grace_period_s`` when preempted, and is named by its id.

Either kind is configured as the queue manager configures it (``services.spec.core_types.configured_job``):
a queue confined to a pool (``QueueConfig.pool``) has its jobs placed only on that pool's nodes, and a job
of the log whose priority class is not preemptible (in the configuration the run is given) is not either.

The policy never sees a job's true duration: only a ``runtime_estimate`` the workload gives, or
what the core learns from the jobs that finished before (``services.core.runtimes``; a trace job's
name is its id).

Dependencies (``WorkloadJob.after``) are judged by ``services.core.dependencies``, as the queue manager
does: an arrived job whose conditions do not hold yet is held out of the core; it is submitted (with its
own submit time) once they hold, and ends without running (``cancelled`` or ``failed``, as its
``on_dependency_failure`` says) once one cannot hold any more, which may end its own dependants in turn.
A job ends ``succeeded``, or ``failed`` when the workload says it ``fails`` (after its duration; the
policy is not told) or a preemption killed it, or ``rejected``.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

from schemas.config import MusterConfig
from schemas.jobspec import JobSpec
from services.core import CycleResult, SchedulerState, queue_order, schedule
from services.core.dependencies import After, verdict
from services.core.growth import next_release_at
from services.core.model import (
    ANY_GPU,
    Admit,
    Decision,
    Job,
    Node,
    Preempt,
    Provision,
    Reject,
    Scale,
    SchedulerConfig,
)
from services.core.policy import resolve
from services.simulator.workload import JobRoles, Workload, WorkloadJob, min_replicas, pod_shape
from services.spec.cluster_file import (
    bought_node_name,
    core_burst_budgets,
    core_cohorts,
    core_growable_groups,
    core_nodes,
    core_queues,
)
from services.spec.core_types import configured_job, job_from_spec

JobsProgress = Callable[[int, int, float], None]
"""Told ``(jobs finished, jobs in the workload, virtual time)`` during a run (at most every
``PROGRESS_EVERY_S`` of wall time, and once at the end); the simulator itself draws nothing."""
PROGRESS_EVERY_S = 0.25


class EventKind(IntEnum):
    COMPLETE = 0
    STOP = 1
    ARRIVAL = 2
    TICK = 3
    DEADLINE = 4  # a job's max_wait_s or max_runtime_s runs out: the core decides in a cycle then
    PROVISIONED = 5  # nodes bought for a job are ready (the token numbers the request)
    IDLE_DUE = 6  # a bought node may have been idle long enough to give back: a cycle decides


@dataclass(frozen=True, slots=True)
class SimOptions:
    """Knobs of the simulation itself (the policy's knobs are in ``SchedulerConfig``)."""

    tick_s: float = 60.0
    max_tick_s: float = 3600.0
    checkpoint_s: float = 30.0  # time a job needs to write a checkpoint once asked to stop
    grace_period_s: float = 30.0
    restart_cost_s: float = 0.0  # every (re)start holds the GPUs this long before the job makes progress
    round_s: float | None = None  # cycles only at multiples of this (None: after every batch of events)
    all_checkpointable: bool = False  # treat every job as checkpointable (the research simulators' setting)
    # treat every multi-pod job as elastic down to one pod (Pollux's setting: every job may be resized) under
    # a policy that resizes; a job's speed is linear in the GPUs it holds, which understates it below its
    # size when scaling is concave
    all_elastic: bool = False
    idle_ticks_limit: int = 48  # stop after this many fruitless max-interval ticks with nothing running
    max_time_s: float | None = None  # stop the clock here (virtual seconds)
    # per-queue depth of pending status (position, start estimate) the core computes each cycle;
    # None keeps the policy's value. Status is informational, so 0 speeds long replays up.
    status_depth: int | None = None
    #: break down the waits of the jobs asking for this many GPUs (an inclusive range) by the reason the core
    #: gave each cycle (``JobRecord.waits``); None: no breakdown
    explain_gpus: tuple[int, float] | None = None


#: the wait reason of a job whose status the cycle did not compute: it stood beyond the ``status_depth``
#: jobs of its queue the core reports on (a long way back in its queue's order)
BEYOND_STATUS_DEPTH = "beyond_status_depth"


@dataclass(slots=True)
class JobRecord:
    """What happened to one job during a run."""

    spec: WorkloadJob
    job: Job
    work: float  # GPU-seconds at full size
    remaining: float
    unit: int  # GPUs per pod of the main role (at least 1 for progress)
    companion_gpus: int = 0  # GPUs the companion roles hold whenever the job runs (they make no progress)
    #: GPUs each pod of the main role holds (allocation, GPU-seconds): ``unit`` for a trace's job; for a job
    #: with a spec what the core charges it (whole GPUs, a share of one, MIG slices' share; none for CPU only)
    pod_gpus: float = 0.0
    rate: int = 0  # progress rate now: pods running x unit, every role's GPUs
    held: float = 0  # GPUs held now, every role
    since: float = 0.0
    warm_at: float = 0.0  # the current run makes progress from here on (after its restart cost)
    version: int = 0  # bumps whenever a scheduled completion becomes stale
    run: int = 0  # bumps on every admission
    first_start: float | None = None
    end: float | None = None
    preemptions: int = 0
    restarts_from_zero: int = 0
    gpu_seconds: float = 0.0
    rejected: str | None = None
    killed: bool = False
    stopping: bool = False
    requeue_on_stop: bool = True
    outcome: str | None = None  # how it ended: succeeded, failed, cancelled or rejected
    dependency_failed: str | None = None  # why it ended without running: a job it waited for ended otherwise
    #: the job's wait before it first started (its queueing delay) by the reason the core gave each cycle
    #: (``SimOptions.explain_gpus``): the time from one cycle to the next counts for the reason of the first
    waits: dict[str, float] | None = None
    #: ... and its waits after preemptions, by reason the same way (explained jobs only)
    requeued_waits: dict[str, float] = field(default_factory=dict)
    wait_reason: str | None = None  # the reason of the last cycle, while it waits
    wait_since: float = 0.0
    overtaken_gpus: float = 0.0  # GPUs of jobs of its queue submitted after it that started while it waited


@dataclass(slots=True)
class BoughtNode:
    """One node the run bought: for which job and queue, when it was asked for, ready and given back."""

    node: str
    group: str
    job_id: str
    queue: str
    gpus: int
    price_per_gpu_hour: float
    requested_at: float
    ready_at: float
    released_at: float | None = None

    def gpu_hours(self, end: float) -> float:
        """GPU-hours billed: from ready until given back (or ``end``, the run's end, if still held)."""
        until = self.released_at if self.released_at is not None else end
        return self.gpus * max(until - self.ready_at, 0.0) / 3600.0


@dataclass(slots=True)
class SimResult:
    """Everything a report needs: per-job records, the allocation timeline and run counters."""

    policy: str
    seed: int
    workload: str
    capacity_gpus: int
    records: dict[str, JobRecord]
    timeline: list[tuple[float, str, float]] = field(default_factory=list)  # (time, queue, delta GPUs)
    cycles: int = 0
    decisions: int = 0
    preemptions: int = 0
    wall_s: float = 0.0
    cycle_wall_s: float = 0.0
    end_time: float = 0.0
    bought: list[BoughtNode] = field(default_factory=list)  # nodes bought for waiting jobs (growable groups)
    #: jobs nodes were bought for (one request each time), and how many GPU-hours their queues were charged
    provisions: int = 0


def _role_fields(roles: JobRoles | None) -> dict[str, Any]:
    """The core job's fields a job of several roles sets: its main role's name, CPU and memory, its companions."""
    if roles is None:
        return {}
    return {"role": roles.main, "cpu_m": roles.cpu_m, "memory_mb": roles.memory_mb, "companions": roles.companions}


def _gpus_per_node(nodes: list[Node], gpu_type: str) -> int:
    sizes = [n.gpus for n in nodes if gpu_type in (ANY_GPU, n.gpu_type)]
    return max(sizes, default=0)


class Simulator:
    """One run of one policy over one workload on one cluster."""

    def __init__(
        self,
        workload: Workload,
        cluster: MusterConfig,
        config: SchedulerConfig,
        *,
        seed: int = 0,
        options: SimOptions | None = None,
        policy_name: str | None = None,
        on_progress: JobsProgress | None = None,
    ) -> None:
        self._opts = options or SimOptions()
        self._on_progress = on_progress
        self._finished = 0
        if self._opts.status_depth is not None:
            config = replace(config, status_depth=self._opts.status_depth)
        self._config = config
        nodes = core_nodes(cluster)
        queues = core_queues(cluster)
        tenants = {q.name: q.tenant for q in queues}
        self._state = SchedulerState(
            queues=queues,
            cohorts=core_cohorts(cluster),
            nodes=nodes,
            half_life_s=config.fair_share_half_life_s,
            order=queue_order(config),
        )
        self._heap: list[tuple[float, int, EventKind, str, int]] = []
        self._seq = 0
        self._tick_token = 0
        self._tick_interval = self._opts.tick_s
        self._round_due = False  # a tick at the next round boundary is in the heap
        self._arrivals_left = 0
        self._running = 0
        self._held: set[str] = set()  # arrived jobs waiting for their dependencies, out of the core
        self._dependants: dict[str, list[str]] = {}  # job id -> the held jobs that wait for it
        self._watched: dict[str, JobRecord] = {}  # explained jobs that may be waiting in the core
        self._requests: dict[int, Provision] = {}  # request serial -> the request, until its nodes are ready
        self._bought: dict[str, BoughtNode] = {}  # bought node -> its record, while held
        self._serials: dict[str, int] = {}  # growable group -> nodes bought for it so far
        self._idle_due: float | None = None  # an IDLE_DUE event is in the heap for this time
        start = min((j.submit_time for j in workload.jobs), default=0.0)
        for grown, names in core_growable_groups(cluster):
            self._state.set_growable_group(grown, names, start)
        for queue, budget in core_burst_budgets(cluster).items():
            self._state.set_burst_budget(queue, budget)
        self._result = SimResult(
            policy=policy_name or config.policy,
            seed=seed,
            workload=workload.name,
            capacity_gpus=sum(n.gpus for n in nodes),
            records={},
        )
        tolerations = frozenset(t for n in nodes for t in n.taints)
        pools = {q.name: q.pool for q in cluster.queues}  # a queue with a pool runs only on that pool's nodes
        classes = {c.name: c.preemptible for c in cluster.priority_classes}
        node_sizes = {t: _gpus_per_node(nodes, t) for t in {j.gpu_type for j in workload.jobs if j.spec is None}}
        # a policy that does not resize runs every job at the size it asked for
        all_elastic = self._opts.all_elastic and resolve(config).elastic
        explain = self._opts.explain_gpus
        for wjob in workload.jobs:
            if wjob.spec is None:
                job = self._trace_job(wjob, node_sizes[wjob.gpu_type], tolerations, tenants, all_elastic)
                pod_gpus: float = max(job.gpus_per_pod, 1)
                class_preemptible = True  # a trace's job has a priority, not a class
            else:
                job = self._spec_job(wjob, wjob.spec, tenants, all_elastic)
                pod_gpus = float(job.gpu_amount)
                class_preemptible = classes.get(wjob.spec.priority_class, True)
            job = configured_job(job, class_preemptible=class_preemptible, pool=pools.get(wjob.queue))
            unit = max(job.gpus_per_pod, 1)
            work = wjob.duration * job.replicas * unit
            rec = JobRecord(wjob, job, work, work, unit, job.companion_gpus, pod_gpus)
            if explain is not None and explain[0] <= wjob.num_gpus <= explain[1]:
                rec.waits = {}
            self._result.records[wjob.job_id] = rec
            self._push(wjob.submit_time, EventKind.ARRIVAL, wjob.job_id, 0)
            self._arrivals_left += 1

    def _trace_job(self, wjob: WorkloadJob, node_gpus: int, tolerations: frozenset[str], tenants: Mapping[str, str],
                   all_elastic: bool) -> Job:
        """A job of a workload file (a trace's): split into pods of at most a node's GPUs; it tolerates every
        taint of the cluster, a preemption waits the simulation's grace period, and its name is its id."""
        roles = wjob.roles
        if roles is None:
            replicas, per_pod = pod_shape(wjob.num_gpus, node_gpus)
        else:
            replicas, per_pod = roles.replicas, roles.gpus_per_pod
        return Job(
            job_id=wjob.job_id,
            queue=wjob.queue,
            submit_time=wjob.submit_time,
            replicas=replicas,
            gpus_per_pod=per_pod,
            gpu_type=wjob.gpu_type,
            min_replicas=min_replicas(per_pod if all_elastic else wjob.main_min_gpus, per_pod, replicas),
            priority=wjob.priority,
            user=wjob.user,
            tenant=wjob.tenant or tenants.get(wjob.queue, ""),
            runtime_estimate=wjob.runtime_estimate,
            preemptible=wjob.preemptible,
            checkpointable=wjob.checkpointable or self._opts.all_checkpointable,
            grace_period_s=self._opts.grace_period_s,
            tolerations=tolerations,
            name=wjob.job_id,
            **_role_fields(roles),
        )

    def _spec_job(self, wjob: WorkloadJob, spec: JobSpec, tenants: Mapping[str, str], all_elastic: bool) -> Job:
        """A job of Muster's log, built from its spec by the queue manager's own translation (``job_from_spec``)
        with the priority it was admitted with; ``all_checkpointable`` and ``all_elastic`` still apply."""
        job = job_from_spec(spec, job_id=wjob.job_id, priority=wjob.priority, submit_time=wjob.submit_time,
                            user=wjob.user, tenant=wjob.tenant or tenants.get(wjob.queue, ""))
        job = replace(job, queue=wjob.queue)
        if self._opts.all_checkpointable and not job.checkpointable:
            job = replace(job, checkpointable=True, grace_period_s=self._opts.grace_period_s)
        if all_elastic and job.gpus_per_pod:
            job = replace(job, min_replicas=min_replicas(job.gpus_per_pod, job.gpus_per_pod, job.replicas))
        return job

    # ------------------------------------------------------------------ event plumbing

    def _push(self, at: float, kind: EventKind, job_id: str, token: int) -> None:
        heapq.heappush(self._heap, (at, self._seq, kind, job_id, token))
        self._seq += 1

    def _schedule_tick(self, now: float) -> None:
        self._tick_token += 1
        round_s = self._opts.round_s
        at = (math.floor(now / round_s) + 1) * round_s if round_s else now + self._tick_interval
        self._push(at, EventKind.TICK, "", self._tick_token)

    def _progress(self, rec: JobRecord, now: float) -> None:
        if rec.rate > 0:
            working = now - max(rec.since, rec.warm_at)
            if working > 0:
                rec.remaining = max(0.0, rec.remaining - working * (rec.rate - rec.companion_gpus))
            if now > rec.since:
                rec.gpu_seconds += (now - rec.since) * rec.held
        rec.since = now

    def _set_size(self, rec: JobRecord, pods: int, now: float) -> None:
        """The job now runs ``pods`` pods of its main role (0: none), its companion roles with them."""
        rate = pods * rec.unit + rec.companion_gpus if pods else 0
        held = pods * rec.pod_gpus + rec.companion_gpus if pods else 0
        delta = held - rec.held
        if delta:
            self._result.timeline.append((now, rec.spec.queue, delta))
        rec.rate, rec.held = rate, held

    def _schedule_completion(self, rec: JobRecord, now: float) -> None:
        rec.version += 1
        speed = max(rec.rate - rec.companion_gpus, 1)
        self._push(max(now, rec.warm_at) + rec.remaining / speed, EventKind.COMPLETE, rec.spec.job_id, rec.version)

    # ------------------------------------------------------------------ event handlers

    def _on_arrival(self, rec: JobRecord) -> None:
        self._arrivals_left -= 1
        if rec.job.max_wait_s is not None:  # the core rejects it then if it still waits
            self._push(rec.job.submit_time + rec.job.max_wait_s, EventKind.DEADLINE, rec.spec.job_id, 0)
        if not rec.spec.after:
            self._submit(rec)
            return
        self._held.add(rec.spec.job_id)
        for dep, _ in rec.spec.after:
            self._dependants.setdefault(dep, []).append(rec.spec.job_id)
        self._judge([rec.spec.job_id])

    def _submit(self, rec: JobRecord) -> None:
        self._state.submit(rec.job)
        if rec.waits is not None:
            self._watched[rec.spec.job_id] = rec

    def _explain(self, result: CycleResult, now: float) -> None:
        """Charge each explained waiting job's time since the last cycle to that cycle's reason, and note this
        cycle's reason (and the jobs of its queue submitted after it that start now)."""
        pending = self._state.pending
        records = self._result.records
        started = [records[d.job_id] for d in result.decisions if isinstance(d, Admit)]
        admitted = {r.spec.job_id for r in started}
        for job_id, rec in list(self._watched.items()):
            waits = rec.waits
            assert waits is not None
            if rec.wait_reason is not None:
                into = waits if rec.first_start is None else rec.requeued_waits
                into[rec.wait_reason] = into.get(rec.wait_reason, 0.0) + now - rec.wait_since
                rec.wait_reason = None
            if job_id not in pending or job_id in admitted:
                del self._watched[job_id]  # it starts now, or left the queue (it comes back with a requeue)
                continue
            info = result.pending.get(job_id)
            rec.wait_reason = info.reason.value if info is not None else BEYOND_STATUS_DEPTH
            rec.wait_since = now
            for other in started:
                if other.spec.queue == rec.spec.queue and other.job.submit_time > rec.job.submit_time:
                    rec.overtaken_gpus += other.spec.num_gpus

    def _judge(self, job_ids: list[str]) -> None:
        """Submit the held jobs among ``job_ids`` whose dependencies hold now, end those whose never will
        (and judge their dependants in turn)."""
        records = self._result.records
        while job_ids:
            job_id = job_ids.pop()
            if job_id not in self._held:
                continue
            rec = records[job_id]
            states = {dep: records[dep].outcome or "pending" for dep, _ in rec.spec.after if dep in records}
            judged = verdict([After(dep, on) for dep, on in rec.spec.after], states)
            if judged.ready:
                self._held.discard(job_id)
                self._submit(rec)
            elif judged.broken is not None:
                self._held.discard(job_id)
                rec.dependency_failed = f"dependency not met: {judged.broken[1]}"
                job_ids += self._ended(rec, "cancelled" if rec.spec.on_dependency_failure == "cancel" else "failed")

    def _ended(self, rec: JobRecord, outcome: str) -> list[str]:
        """Record how a job ended; the held jobs waiting for it, to judge again."""
        if rec.outcome is None:
            rec.outcome = outcome
            if rec.dependency_failed is not None:
                self._finished += 1
        return self._dependants.pop(rec.spec.job_id, [])

    def _on_complete(self, rec: JobRecord, token: int, now: float) -> bool:
        if token != rec.version or rec.end is not None or rec.rate == 0:
            return False
        self._progress(rec, now)
        rec.remaining = 0.0
        rec.end = now
        rec.stopping = False
        self._finished += 1
        self._set_size(rec, 0, now)
        self._running -= 1
        self._state.job_finished(rec.spec.job_id, now, succeeded=not rec.spec.fails)
        self._judge(self._ended(rec, "failed" if rec.spec.fails else "succeeded"))
        return True

    def _on_stop(self, rec: JobRecord, token: int, now: float) -> bool:
        if token != rec.run or not rec.stopping or rec.end is not None:
            return False
        self._progress(rec, now)
        rec.stopping = False
        rec.version += 1  # the pending completion no longer applies
        if not rec.job.checkpointable:
            rec.remaining = rec.work
            rec.restarts_from_zero += 1
        self._set_size(rec, 0, now)
        self._running -= 1
        self._state.job_stopped(rec.spec.job_id, now, requeue=rec.requeue_on_stop)
        if rec.waits is not None and rec.requeue_on_stop:
            self._watched[rec.spec.job_id] = rec
        if not rec.requeue_on_stop:
            rec.killed = True
            rec.end = now
            self._finished += 1
            self._judge(self._ended(rec, "failed"))
        return True

    # ------------------------------------------------------------------ decisions

    def _apply(self, decision: Decision, now: float) -> None:
        rec = self._result.records[decision.job_id]
        self._state.apply(decision, now)
        self._result.decisions += 1
        if isinstance(decision, Admit):
            rec.since = now
            rec.warm_at = now + self._opts.restart_cost_s
            rec.run += 1
            if rec.first_start is None:
                rec.first_start = now
            if rec.job.max_runtime_s is not None:  # the core stops it then if it still runs
                self._push(now + rec.job.max_runtime_s, EventKind.DEADLINE, rec.spec.job_id, rec.run)
            self._running += 1
            self._set_size(rec, decision.replicas, now)
            self._schedule_completion(rec, now)
        elif isinstance(decision, Scale):
            self._progress(rec, now)
            # a data-parallel job re-forms its gang at the new size: a checkpoint and restart
            rec.warm_at = max(rec.warm_at, now + self._opts.restart_cost_s)
            self._set_size(rec, decision.replicas, now)
            self._schedule_completion(rec, now)
        elif isinstance(decision, Preempt):
            rec.preemptions += 1
            self._result.preemptions += 1
            rec.stopping = True
            rec.requeue_on_stop = decision.requeue
            wait = min(decision.grace_period_s, self._opts.checkpoint_s)
            self._push(now + wait, EventKind.STOP, rec.spec.job_id, rec.run)
        elif isinstance(decision, Reject):
            if rec.rejected is None:
                self._finished += 1
            rec.rejected = decision.reason
            self._judge(self._ended(rec, "rejected"))

    def _cycle(self, now: float) -> int:
        started = time.perf_counter()
        result = schedule(self._state, now, self._config)
        self._result.cycle_wall_s += time.perf_counter() - started
        self._result.cycles += 1
        if self._watched:
            self._explain(result, now)
        for decision in result.decisions:
            self._apply(decision, now)
        if self._state.growth:
            self._grow(result, now)
        return len(result.decisions)

    # ------------------------------------------------------------------ capacity that grows

    def _grow(self, result: CycleResult, now: float) -> None:
        """Carry out the cycle's requests for nodes (they are ready after their group's delay) and give back
        the idle nodes; make sure a cycle comes when the next idle node may be given back."""
        st = self._state
        for p in result.provisions:
            st.provision_requested(p, now)
            self._result.provisions += 1
            serial = self._result.provisions
            self._requests[serial] = p
            self._push(p.ready_at, EventKind.PROVISIONED, p.job_id, serial)
        for r in result.releases:
            st.node_released(r.node, now)
            bought = self._bought.pop(r.node, None)
            if bought is not None:
                bought.released_at = now
        due = next_release_at(st.growth)
        if due is not None and due > now and due != self._idle_due:
            self._idle_due = due
            self._push(due, EventKind.IDLE_DUE, "", 0)

    def _on_provisioned(self, serial: int, now: float) -> None:
        p = self._requests.pop(serial)
        group = self._state.growth.groups[p.group]
        nodes = []
        for _ in range(p.nodes):
            n = self._serials.get(p.group, 0) + 1
            self._serials[p.group] = n
            node = replace(group.template, name=bought_node_name(p.group, n))
            nodes.append(node)
            bought = BoughtNode(node.name, p.group, p.job_id, p.queue, node.gpus, group.price_per_gpu_hour,
                                now - group.provision_delay_s, now)
            self._bought[node.name] = bought
            self._result.bought.append(bought)
        self._state.provisioned(p.job_id, nodes, now, now + self._config.provision_booking_s)

    # ------------------------------------------------------------------ main loop

    def run(self) -> SimResult:
        """Run to the end of the workload; returns the records of every job."""
        return self.run_until(self._opts.max_time_s)

    def run_until(self, limit: float | None) -> SimResult:
        """Run the events up to virtual time ``limit`` (None: to the end); a later call goes on from there."""
        started = time.perf_counter()
        idle_ticks = 0
        now = self._result.end_time
        rounds = self._opts.round_s is not None
        # a round's tick never stretches: count as many quiet rounds as the stretched ticks would span
        idle_limit = self._opts.idle_ticks_limit
        if rounds:
            idle_limit *= max(1, int(self._opts.max_tick_s // (self._opts.round_s or 1.0)))
        total = len(self._result.records)
        told_at = started
        while self._heap:
            now = self._heap[0][0]
            if limit is not None and now > limit:
                break
            if self._on_progress is not None:
                wall = time.perf_counter()
                if wall - told_at >= PROGRESS_EVERY_S:
                    told_at = wall
                    self._on_progress(self._finished, total, now)
            changed = False
            ticked = False
            while self._heap and self._heap[0][0] == now:
                _, _, kind, job_id, token = heapq.heappop(self._heap)
                if kind is EventKind.TICK:
                    ticked = ticked or token == self._tick_token
                    continue
                if kind is EventKind.PROVISIONED:
                    self._on_provisioned(token, now)
                    changed = True
                    continue
                if kind is EventKind.IDLE_DUE:
                    changed = True
                    continue
                rec = self._result.records[job_id]
                if kind is EventKind.ARRIVAL:
                    self._on_arrival(rec)
                    changed = True
                elif kind is EventKind.COMPLETE:
                    changed = self._on_complete(rec, token, now) or changed
                elif kind is EventKind.DEADLINE:
                    changed = changed or (rec.end is None and rec.rejected is None)
                else:
                    changed = self._on_stop(rec, token, now) or changed
            if not (changed or ticked):
                continue
            if rounds and not ticked:
                if not self._round_due:
                    self._schedule_tick(now)  # the next round decides
                    self._round_due = True
                continue
            self._round_due = False
            if changed:
                self._tick_interval = self._opts.tick_s
            made = self._cycle(now)
            while made >= self._config.max_admissions_per_cycle:
                made = self._cycle(now)
            if ticked and not changed and made == 0:
                self._tick_interval = min(self._tick_interval * 2, self._opts.max_tick_s)
                quiet = self._running == 0 and self._arrivals_left == 0
                stretched = rounds or self._tick_interval >= self._opts.max_tick_s
                idle_ticks = idle_ticks + 1 if quiet and stretched else 0
                if idle_ticks >= idle_limit:
                    break
            else:
                idle_ticks = 0
            if self._state.pending_count > 0:
                self._schedule_tick(now)
                self._round_due = rounds
            else:
                self._tick_token += 1  # nothing pending: no tick until the next event
        self._result.end_time = now
        self._result.wall_s += time.perf_counter() - started
        if self._on_progress is not None:
            self._on_progress(self._finished, total, now)
        return self._result

    @property
    def state(self) -> SchedulerState:
        return self._state


def simulate(
    workload: Workload,
    cluster: MusterConfig,
    config: SchedulerConfig,
    *,
    seed: int = 0,
    options: SimOptions | None = None,
    policy_name: str | None = None,
    on_progress: JobsProgress | None = None,
) -> SimResult:
    """Run one policy over a workload; a convenience around ``Simulator``."""
    return Simulator(workload, cluster, config, seed=seed, options=options, policy_name=policy_name,
                     on_progress=on_progress).run()


def queue_names(result: SimResult) -> list[str]:
    return sorted({r.spec.queue for r in result.records.values()})


def records_by_queue(result: SimResult) -> Mapping[str, list[JobRecord]]:
    out: dict[str, list[JobRecord]] = {}
    for rec in result.records.values():
        out.setdefault(rec.spec.queue, []).append(rec)
    return out
