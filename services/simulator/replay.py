"""What really happened, rebuilt from Muster's own log: the workload, the cluster and the configuration.

Pure: the input is the log's envelopes (any order; they are put in time order here), the window's start
(``since``, or None for the whole log) and the time the log was read (``as_of``); the output is a
``Reconstruction`` the simulator can replay, plus what each job actually went through, for comparing.

What is read from which topic:

- ``muster.intents`` ``SubmitJob``: each job's submission (time, tenant, spec).
- ``muster.decisions``: ``JobAdmitted`` (when a job was admitted, with what spec and size; a job
  submitted before the window is known from it), ``JobPreemptionRequested`` (preemptions; a cancel is
  not one), ``JobRejected``.
- ``muster.runs`` and ``muster.dispatches``: when each attempt ran. An attempt runs from its
  ``RunStarted`` until the first of ``RunSucceeded``, ``JobStopped``, ``RunEvicted``, ``RunDeleted``,
  ``DispatchFailed`` or a ``RunFailed`` that ends it (an infrastructure failure, or a reason in
  ``NOT_RESTARTED_REASONS``); one still going at ``as_of`` runs until then.
- ``muster.status``: each job's final state (compacted: the latest state of every job).
- ``muster.capacity``: the nodes, as they were at the window's start (a node first seen later counts
  from the start; one removed before it does not), regrouped into node groups.
- ``muster.config``: queues, cohorts, priority classes, GPU types, pools and tenants as defined at the
  end of the log (a queue deleted while jobs of the window used it keeps its last definition).

A job's **duration** in the replay is what it really took: the run time of the attempt that succeeded,
or, for a checkpointable job that was preempted and resumed, the sum of its attempts' run times. Jobs that
did not succeed are replayed as far as they got (they held GPUs that long): a failed job, or one cancelled
while running, for the time it ran; one still running when the log was read for the time it has run so far
(a lower bound). A job still pending when the log was read is replayed with its runtime estimate, or the
scheduler's default estimate, since its real runtime is unknown. Jobs cancelled or rejected before they
ever ran are left out. Jobs submitted before the window and still there at its start arrive at the start
(with what remained of them) as load, and are left out of the figures.

A job of several roles (``spec.roles``) is replayed with the same roles (``workload_roles``): its main role
(``JobSpec.main_role``) and every other role as a companion, each with its pods, GPUs, CPU and memory, as
the queue manager builds the job it schedules; a job of one role is replayed with its GPUs, as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from schemas.capacity import NodeRemoved, NodeState, NodeStateObserved
from schemas.config import (
    ClusterConfig,
    CohortDefined,
    ConfigItemDeleted,
    GpuTypeDefined,
    MusterConfig,
    NodeGroupConfig,
    PoolDefined,
    PriorityClassDefined,
    QueueDefined,
    TenantDefined,
    TopologyConfig,
)
from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobRejected
from schemas.envelope import Envelope, Message
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec
from schemas.kube import NODE_GROUP
from schemas.runs import (
    NOT_RESTARTED_REASONS,
    DispatchFailed,
    JobStopped,
    RunDeleted,
    RunEvicted,
    RunFailed,
    RunStarted,
    RunSucceeded,
)
from schemas.status import JobStatusChanged
from services.core.model import ANY_GPU, Role
from services.simulator.workload import JobRoles, Workload, WorkloadJob, sort_jobs
from services.spec.config_items import ConfigItems

Outcome = Literal["succeeded", "failed", "cancelled", "running", "pending", "rejected"]

#: label domains that Kubernetes, NVIDIA and Muster set on nodes themselves: not part of a node group's labels
_SYSTEM_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", "nvidia.com", "muster.dev")
_RACK_INDEX = re.compile(r"^(?P<prefix>.*?)-?(?P<index>[0-9]+)$")

#: the run time assumed for a job that never ran and gives no estimate (the core's default estimate)
DEFAULT_RUNTIME_S = 3600.0


@dataclass(slots=True)
class _Attempt:
    start: datetime | None = None
    end: datetime | None = None
    gpus: int = 0


@dataclass(slots=True)
class _Job:
    job_id: str
    submitted_at: datetime | None = None
    tenant: str = ""
    queue: str = ""
    spec: JobSpec | None = None
    priority: int | None = None
    admitted_at: datetime | None = None
    attempts: dict[int, _Attempt] = field(default_factory=dict)
    preemptions: int = 0
    preempt_asked: dict[int, datetime] = field(default_factory=dict)  # attempt -> when its stop was asked
    stop_s: list[float] = field(default_factory=list)  # how long each asked stop took
    rejected: bool = False
    status: JobStatusChanged | None = None

    def attempt(self, n: int) -> _Attempt:
        return self.attempts.setdefault(n, _Attempt())


@dataclass(frozen=True, slots=True)
class ActualJob:
    """What one job went through in reality (times in seconds after the window's start)."""

    job_id: str
    queue: str
    gpus: int
    outcome: Outcome
    submit_time: float
    first_start: float | None  # first admission (the replay's start is an admission too)
    end: float | None  # when it ended (None: still running or pending when the log was read)
    run_s: float  # time it ran over all attempts, up to the read
    gpu_seconds: float
    preemptions: int
    carried_over: bool  # submitted before the window: load in the replay, left out of the figures
    replayed: bool
    duration_s: float  # the duration it is replayed with
    note: str = ""

    @property
    def wait_s(self) -> float | None:
        return None if self.first_start is None else self.first_start - self.submit_time

    @property
    def jct_s(self) -> float | None:
        return None if self.end is None or self.outcome != "succeeded" else self.end - self.submit_time


@dataclass(frozen=True, slots=True)
class Reconstruction:
    """The replayable workload and cluster of a window of the log, and what actually happened in it."""

    origin: datetime  # time 0 of the workload
    as_of: datetime  # when the log was read: the end of the window
    workload: Workload
    cluster: MusterConfig
    jobs: Mapping[str, ActualJob]
    notes: tuple[str, ...]
    #: median time from a preemption's request to the job's stop (its checkpoint and grace), None if none
    stop_s: float | None = None

    @property
    def window_s(self) -> float:
        return max(0.0, (self.as_of - self.origin).total_seconds())

    def counts(self) -> dict[str, int]:
        """Jobs of the window (carried-over ones apart) by outcome, how many of them are replayed and, when
        any is, how many of the replayed ones have several roles (``several_roles``)."""
        out: dict[str, int] = {}
        for job in self.jobs.values():
            key = "carried_over" if job.carried_over else job.outcome
            out[key] = out.get(key, 0) + 1
        out["replayed"] = sum(1 for j in self.jobs.values() if j.replayed)
        several = sum(1 for w in self.workload.jobs if w.roles is not None and w.roles.several)
        if several:
            out["several_roles"] = several
        return out


def _time_of(env: Envelope) -> datetime:
    payload = env.payload
    if isinstance(payload, SubmitJob):
        return payload.submitted_at
    observed = getattr(payload, "observed_at", None)
    if isinstance(observed, datetime):
        return observed
    updated = getattr(payload, "updated_at", None)
    return updated if isinstance(updated, datetime) else env.occurred_at


def _ends_attempt(message: object) -> bool:
    if isinstance(message, RunSucceeded | JobStopped | RunEvicted | RunDeleted | DispatchFailed):
        return True
    return isinstance(message, RunFailed) and (
        message.classification == "infrastructure" or message.reason in NOT_RESTARTED_REASONS
    )


# ---------------------------------------------------------------- configuration


@dataclass(slots=True)
class _Config:
    """The config topic folded as every service folds it, plus the last definition of each deleted item."""

    items: ConfigItems = field(default_factory=ConfigItems)
    deleted: dict[str, dict[str, object]] = field(default_factory=dict)

    def fold(self, message: Message) -> None:
        change = self.items.fold(message.key(), message)
        if change is None:
            return
        if change.item is None:
            self.deleted.setdefault(change.kind, {})[change.name] = change.previous
        else:
            self.deleted.get(change.kind, {}).pop(change.name, None)

    def of(self, kind: str) -> dict[str, Any]:
        return {item.name: item for item in self.items.of_kind(kind)}


def _config_of(cfg: _Config, used_queues: Iterable[str], notes: list[str]) -> dict[str, list[object]]:
    of = cfg.of
    queues = of("queue")
    cohorts = of("cohort")
    for name in sorted(set(used_queues) - set(queues)):
        item = cfg.deleted.get("queue", {}).get(name)
        if item is not None:
            queues[name] = item
            notes.append(f"queue {name} was deleted before the log was read: its last definition is used")
        else:
            queues[name] = {"name": name}
            notes.append(f"queue {name} has jobs in the log but no definition: replayed without quota")
    for q in queues.values():
        cohort = getattr(q, "cohort", None)
        if cohort is not None and cohort not in cohorts:
            item = cfg.deleted.get("cohort", {}).get(cohort)
            cohorts[cohort] = item if item is not None else {"name": cohort}
    return {
        "queues": [queues[n] for n in sorted(queues)],
        "cohorts": [cohorts[n] for n in sorted(cohorts)],
        "priority_classes": [v for _, v in sorted(of("priority-class").items())],
        "gpu_types": [v for _, v in sorted(of("gpu-type").items())],
        "pools": [v for _, v in sorted(of("pool").items())],
        "tenants": [v for _, v in sorted(of("tenant").items())],
    }


# ---------------------------------------------------------------- capacity


def _group_labels(labels: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for key, value in labels.items():
        domain = key.split("/", 1)[0] if "/" in key else ""
        if any(domain == d or domain.endswith("." + d) for d in _SYSTEM_LABEL_DOMAINS):
            continue
        out[key] = value
    return out


def _rack_prefix(racks: Sequence[str]) -> str:
    for rack in racks:
        m = _RACK_INDEX.match(rack)
        if m and m["prefix"]:
            return m["prefix"]
    return "rack"


def node_groups(nodes: Iterable[NodeState]) -> list[ClusterConfig]:
    """Nodes regrouped into clusters of node groups: one group per node group label (``muster.dev/node-group``)
    and shape (GPU type and count, CPU, memory, NVLink groups, zone, block, labels); racks are counted."""
    shapes: dict[tuple[object, ...], list[NodeState]] = {}
    for node in sorted(nodes, key=lambda n: (n.cluster, n.node)):
        labels = _group_labels(node.labels)
        key = (
            node.cluster, node.labels.get(NODE_GROUP) or f"{node.gpu_type}-{node.gpus_allocatable}",
            node.gpu_type, node.gpus_allocatable, node.cpu_m // 1000, node.memory_mb // 1024,
            tuple(node.topology.nvlink_groups), node.topology.zone, node.topology.block,
            tuple(sorted(labels.items())), tuple(sorted(t.key for t in node.taints)),
        )
        shapes.setdefault(key, []).append(node)
    clusters: dict[str, list[NodeGroupConfig]] = {}
    for shape, members in shapes.items():
        cluster, group = str(shape[0]), str(shape[1])
        groups = clusters.setdefault(cluster, [])
        name = group if all(g.name != group for g in groups) else f"{group}-{len(groups)}"
        first = members[0]
        racks = sorted({n.topology.rack for n in members if n.topology.rack})
        groups.append(NodeGroupConfig(
            name=name,
            count=len(members),
            gpus_per_node=first.gpus_allocatable,
            gpu_type=first.gpu_type,
            cpu=first.cpu_m // 1000,
            memory_gb=first.memory_mb // 1024,
            nvlink_groups=list(first.topology.nvlink_groups),
            topology=TopologyConfig(
                zone=first.topology.zone or "zone-0", block=first.topology.block or "block-0",
                racks=max(1, len(racks)), rack_prefix=_rack_prefix(racks),
            ),
            labels=_group_labels(first.labels),
            taints=sorted({t.key for t in first.taints}),
        ))
    return [ClusterConfig(name=name, node_groups=groups) for name, groups in sorted(clusters.items())]


# ---------------------------------------------------------------- the reconstruction


def reconstruct(
    envelopes: Iterable[Envelope],
    *,
    as_of: datetime,
    since: datetime | None = None,
    default_runtime_s: float = DEFAULT_RUNTIME_S,
    name: str = "live-log",
) -> Reconstruction:
    """Rebuild the window ``[since, as_of]`` of the log (``since`` None: from the first submission)."""
    ordered = sorted(envelopes, key=_time_of)
    jobs: dict[str, _Job] = {}
    cfg = _Config()
    nodes_at_start: dict[tuple[str, str], NodeState] = {}
    nodes_later: dict[tuple[str, str], NodeState] = {}
    first_submit = min((e.payload.submitted_at for e in ordered if isinstance(e.payload, SubmitJob)), default=None)
    origin = since or first_submit or as_of

    def job(job_id: str) -> _Job:
        return jobs.setdefault(job_id, _Job(job_id))

    for env in ordered:
        msg = env.payload
        at = _time_of(env)
        if at > as_of:
            continue
        if isinstance(msg, QueueDefined | CohortDefined | PriorityClassDefined | GpuTypeDefined | PoolDefined
                      | TenantDefined | ConfigItemDeleted):
            cfg.fold(msg)
        elif isinstance(msg, NodeStateObserved):
            key = (msg.state.cluster, msg.state.node)
            if at <= origin:
                nodes_at_start[key] = msg.state
            elif key not in nodes_at_start:
                nodes_later.setdefault(key, msg.state)
        elif isinstance(msg, NodeRemoved):
            if at <= origin:
                nodes_at_start.pop((msg.cluster, msg.node), None)
        elif isinstance(msg, SubmitJob):
            j = job(msg.job_id)
            if j.submitted_at is None:
                j.submitted_at, j.tenant, j.spec, j.queue = msg.submitted_at, msg.tenant, msg.spec, msg.spec.queue
        elif isinstance(msg, JobAdmitted):
            j = job(msg.job_id)
            j.admitted_at = j.admitted_at or env.occurred_at
            j.priority = msg.priority
            j.queue, j.tenant = j.queue or msg.queue, j.tenant or msg.tenant
            j.spec = j.spec or msg.spec
            j.attempt(msg.attempt).gpus = msg.spec.gpus_for(msg.replicas)
        elif isinstance(msg, JobPreemptionRequested):
            if msg.reason != "cancelled":
                job(msg.job_id).preemptions += 1
                job(msg.job_id).preempt_asked.setdefault(msg.attempt, env.occurred_at)
        elif isinstance(msg, JobRejected):
            job(msg.job_id).rejected = True
        elif isinstance(msg, RunStarted):
            a = job(msg.job_id).attempt(msg.attempt)
            if a.start is None and a.end is None:
                a.start = msg.observed_at
        elif _ends_attempt(msg):
            run = msg
            assert isinstance(run, RunSucceeded | JobStopped | RunEvicted | RunDeleted | DispatchFailed | RunFailed)
            j = job(run.job_id)
            a = j.attempt(run.attempt)
            if a.end is None:
                a.end = run.observed_at
                asked = j.preempt_asked.get(run.attempt)
                if asked is not None:  # the first sign of the stop: JobStopped, or the objects' deletion before it
                    j.stop_s.append(max(0.0, (run.observed_at - asked).total_seconds()))
        elif isinstance(msg, JobStatusChanged):
            j = job(msg.job_id)
            if j.status is None or msg.updated_at >= j.status.updated_at:
                j.status = msg

    notes: list[str] = []
    classes = {k: (getattr(v, "value", 0), getattr(v, "preemptible", True))
               for k, v in cfg.of("priority-class").items()}
    actual: dict[str, ActualJob] = {}
    replayed: list[WorkloadJob] = []
    for j in jobs.values():
        result = _actual(j, origin, as_of, default_runtime_s, classes)
        if result is not None:
            actual[j.job_id] = result[0]
            if result[1] is not None:
                replayed.append(result[1])

    starting = dict(nodes_at_start)
    if nodes_later:
        notes.append(f"{len(nodes_later)} node(s) first seen after the window's start are counted from the start")
        starting.update(nodes_later)
    clusters = node_groups(starting.values())
    if not clusters:
        notes.append("no node capacity in the log (muster.capacity): the replay has no nodes")
    sections = _config_of(cfg, {r.queue for r in actual.values() if r.replayed}, notes)
    cluster = MusterConfig.model_validate({"clusters": clusters, **sections})
    counts: dict[str, int] = {}
    for r in actual.values():
        if not r.carried_over:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
    if counts.get("running"):
        notes.append(f"{counts['running']} job(s) still running when the log was read: replayed for the time "
                     "they had run (a lower bound), left out of the JCT")
    if counts.get("pending"):
        notes.append(f"{counts['pending']} job(s) still pending when the log was read: replayed with their "
                     "runtime estimate (their real runtime is unknown), left out of the wait and the JCT")
    for outcome, what in (("failed", "failed"), ("cancelled", "cancelled")):
        n = sum(1 for r in actual.values() if r.outcome == outcome and not r.carried_over)
        if n:
            ran = sum(1 for r in actual.values() if r.outcome == outcome and r.replayed and not r.carried_over)
            notes.append(f"{n} job(s) {what}: {ran} replayed for the time they ran, the rest (never ran) left out; "
                         "none counts in the JCT")
    carried = sum(1 for r in actual.values() if r.carried_over)
    if carried:
        notes.append(f"{carried} job(s) submitted before the window and not over at its start: they arrive at the "
                     "start with what remained of them, as load, and are left out of the figures")
    stops = sorted(t for j in jobs.values() for t in j.stop_s)
    stop_s = stops[len(stops) // 2] if stops else None
    return Reconstruction(origin, as_of, Workload(name, sort_jobs(replayed)), cluster, actual, tuple(notes), stop_s)


def workload_roles(spec: JobSpec) -> JobRoles | None:
    """The roles of a job given with ``roles`` as the simulator replays them: the main role the scheduler
    sizes the job by (``JobSpec.main_role``) and every other role as a companion, in the spec's order, each
    with its pods, whole GPUs, CPU and memory per pod. None for a job given as ``replicas`` + ``template``."""
    if not spec.roles:
        return None
    main = spec.main_role()
    res = main.template.resources
    companions = tuple(
        Role(name=r.name, replicas=r.replicas, gpus_per_pod=r.template.resources.gpus,
             cpu_m=r.template.resources.cpu_m, memory_mb=r.template.resources.memory_mb)
        for r in spec.pod_roles() if r.name != main.name
    )
    return JobRoles(main=main.name, replicas=main.replicas, gpus_per_pod=res.gpus, cpu_m=res.cpu_m,
                    memory_mb=res.memory_mb, companions=companions)


def _gpu_type(spec: JobSpec) -> str:
    """The job's GPU type: the first role's that names one (the roles asking for GPUs name the same)."""
    return next((r.template.resources.gpu_type for r in spec.pod_roles() if r.template.resources.gpu_type), ANY_GPU)


def _outcome(j: _Job, running: bool) -> Outcome:
    if j.rejected:
        return "rejected"
    state = j.status.state if j.status is not None else None
    if state in ("succeeded", "failed", "cancelled", "rejected"):
        return state
    if any(a.end is None and a.start is not None for a in j.attempts.values()) or running:
        return "running"
    return "pending"


def _actual(j: _Job, origin: datetime, as_of: datetime, default_runtime_s: float,
            classes: Mapping[str, tuple[int, bool]]) -> tuple[ActualJob, WorkloadJob | None] | None:
    status = j.status
    submitted = j.submitted_at or (status.submitted_at if status else None)
    if submitted is None:
        return None  # only run events of a job of which nothing else is known
    carried = submitted < origin
    if status is not None and status.state in ("succeeded", "failed", "cancelled", "rejected") \
            and status.updated_at < origin:
        return None  # over before the window
    queue = j.queue or (status.queue if status else "")
    if not queue:
        return None
    spec = j.spec
    per_pod = spec.resources.gpus if spec else 0
    gpus = spec.total_gpus if spec else (status.gpus if status else 0)
    runs: list[float] = []
    gpu_seconds = 0.0
    first_run: datetime | None = None
    last_end: datetime | None = None
    for _, a in sorted(j.attempts.items()):
        start = a.start or (origin if carried and a.end is not None else None)
        if start is None:
            continue
        start = max(start, origin)
        seconds = max(0.0, ((a.end or as_of) - start).total_seconds())
        runs.append(seconds)
        gpu_seconds += seconds * (a.gpus or gpus)
        first_run = first_run or start
        if a.end is not None:
            last_end = a.end
    outcome = _outcome(j, False)
    if carried and outcome not in ("running", "pending") and not runs:
        return None
    checkpointable = bool(spec and spec.checkpoint.enabled)
    ran = sum(runs) if checkpointable else (runs[-1] if runs else 0.0)
    estimate = spec.runtime_estimate_s if spec else None
    note = ""
    if outcome == "pending" or (outcome == "running" and not runs):
        duration = max(ran, estimate or default_runtime_s)
        note = "not running when the log was read: runtime estimate assumed"
    elif outcome == "running":
        duration, note = ran, "still running: the time it has run so far"
    else:
        duration = ran
    replay = outcome != "rejected" and (runs or outcome in ("pending", "running"))
    if outcome == "cancelled" and not runs:
        replay = False
    first_start = j.admitted_at or first_run
    end: datetime | None = None
    if outcome in ("succeeded", "failed", "cancelled"):
        end = last_end or (status.updated_at if status else None)

    def rel(t: datetime | None) -> float | None:
        return None if t is None else (t - origin).total_seconds()

    submit = 0.0 if carried else (submitted - origin).total_seconds()
    record = ActualJob(
        job_id=j.job_id, queue=queue, gpus=gpus, outcome=outcome, submit_time=submit,
        first_start=None if first_start is None else max(0.0, rel(first_start) or 0.0), end=rel(end),
        run_s=sum(runs), gpu_seconds=gpu_seconds, preemptions=j.preemptions, carried_over=carried,
        replayed=bool(replay), duration_s=duration, note=note,
    )
    if not replay:
        return record, None
    low = spec.main_min_replicas if spec else None
    min_gpus = spec.gpus_for(low) if spec and low and per_pod else None
    class_name = spec.priority_class if spec else (status.priority_class if status else "normal")
    class_value, class_preemptible = classes.get(class_name, (0, True))
    wjob = WorkloadJob(
        job_id=j.job_id, submit_time=submit, duration=duration, num_gpus=gpus, queue=queue,
        gpu_type=_gpu_type(spec) if spec else ANY_GPU,
        priority=j.priority if j.priority is not None else class_value,
        min_gpus=min_gpus, runtime_estimate=estimate,
        preemptible=(spec.preemptible if spec else True) and class_preemptible, checkpointable=checkpointable,
        roles=workload_roles(spec) if spec else None,
    )
    return record, wjob
