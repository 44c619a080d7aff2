"""What really happened, rebuilt from Muster's own log: the workload, the cluster and the configuration.

Pure: the input is the log's envelopes (any order; they are put in time order here), the window's start
(``since``, or None for the whole log) and the time the log was read (``as_of``); the output is a
``Reconstruction`` the simulator can replay, plus what each job actually went through, for comparing.

What is read from which topic:

- ``muster.intents`` ``SubmitJob``: each job's submission (time, tenant, user, spec).
- ``muster.decisions``: ``JobAdmitted`` (when a job was admitted, with what spec and size; a job
  submitted before the window is known from it), ``JobPreemptionRequested`` (preemptions; a cancel is
  not one), ``JobRejected``.
- ``muster.runs`` and ``muster.dispatches``: when each attempt ran. An attempt runs from its
  ``RunStarted`` until the first message that ends it by ``schemas.runs.ends_attempt``, the rule the
  queue manager and the quota accountant go by too; one still going at ``as_of`` runs until then.
- ``muster.status``: each job's final state (compacted: the latest state of every job).
- ``muster.capacity``: the nodes, as they were at the window's start (a node first seen later counts
  from the start; one removed before it does not), regrouped into node groups.
- ``muster.config``: queues, cohorts, priority classes, GPU types, pools and tenants as defined at the
  end of the log (a queue deleted while jobs of the window used it keeps its last definition).

A job's **duration** in the replay is what it really took: the run time of the attempt that succeeded,
or, for a checkpointable job that was preempted and resumed, the sum of its attempts' run times. Jobs that
did not succeed are replayed as far as they got (they held GPUs that long): a failed job, or one cancelled
while running, for the time it ran, and it then ends failed (``WorkloadJob.fails``: no runtime is learnt
from it, and a job waiting for it to succeed never runs); one still running when the log was read for the
time it has run so far (a lower bound). A job still pending when the log was read is replayed with its
runtime estimate, or the scheduler's default estimate, since its real runtime is unknown. Jobs cancelled or
rejected before they ever ran are left out. Jobs submitted before the window and still there at its start
arrive at the start (with what remained of them) as load, and are left out of the figures.

Each replayed job carries its whole spec (``WorkloadJob.spec``, with its user and tenant), and the simulator
builds the core job from it by the queue manager's own translation (``services.spec.core_types``): its pods
and roles, GPU type, whole GPUs or shares of GPUs (fractions, MIG slices), CPU and memory, topology, node
selector, cluster, elasticity, checkpointing and grace period, ``max_wait_s`` and ``max_runtime_s``, its user
(per-user limits) and name (learnt runtimes), its dependencies (``spec.after``, resolved to the replayed jobs
as the queue manager resolves them); its priority is the one it was admitted with. For a report, a job of
several roles is also described by its roles (``workload_roles``). The nodes keep what the core places by:
shared GPUs, MIG slices, the labels all nodes of a group carry alike (Kubernetes' and NVIDIA's too) and the
taints a job must tolerate.

What the replay cannot replay, it says (``Reconstruction.not_replayed``, one line with a count each): a
node's failure (the replay's nodes never fail), an idle release, a resize by the job's owner, a suspension,
a priority change, a dependency on a job it has not got, a node selector on a label that differs between the
nodes of a group (a hostname), a rack of a rack-level topology (racks are counted per group, not kept per
node), the user of a job known only from its admission, the deadlines of a job submitted before the window,
MIG slices that do not split alike over a node's GPUs. A workload written out as CSV (``--write-workload``)
keeps only what the CSV form has: read back, its jobs are a trace's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
from schemas.intents import ChangePriority, ScaleJob, SubmitJob, SuspendJob
from schemas.jobspec import JobSpec
from schemas.kube import NODE_GROUP
from schemas.runs import (
    ATTEMPT_ENDS,
    RunEvicted,
    RunFailed,
    RunIdle,
    RunResized,
    RunStarted,
    ends_attempt,
)
from schemas.status import JobStatusChanged
from services.core.dependencies import On, find_cycle
from services.core.model import ANY_GPU, MIG_COMPUTE_SLICES, Role, mig_share
from services.simulator.workload import JobRoles, Workload, WorkloadJob, sort_jobs
from services.spec.cluster_file import core_nodes
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
    gpus: float = 0.0  # GPUs charged at admission (whole GPUs, or shares of GPUs)


@dataclass(slots=True)
class _Job:
    job_id: str
    submitted_at: datetime | None = None
    tenant: str = ""
    user: str = ""  # known from its submission only
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
    #: what happened to it that the replay does not replay (keys of ``_UNREPLAYED``)
    unreplayed: set[str] = field(default_factory=set)

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
    #: what happened in the window that the replay does not replay, and why (one line each, with a count)
    not_replayed: tuple[str, ...] = ()

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


def _muster_label(key: str) -> bool:
    """Whether a node label is one Muster sets itself (its node group, GPU type, pool)."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    return domain == "muster.dev" or domain.endswith(".muster.dev")


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


def _mig_layout(mig: Mapping[str, int]) -> tuple[int, dict[str, int]] | None:
    """A node's MIG slices (per profile) as ``(MIG GPUs, slices of each GPU per profile)``: the fewest GPUs cut
    alike that hold them, each within a GPU's compute slices; None when no such cut exists (its GPUs are cut
    differently) or a profile is not one."""
    slices = {p: n for p, n in mig.items() if n > 0}
    if not slices:
        return 0, {}
    compute: dict[str, int] = {}
    for profile in slices:
        try:
            compute[profile] = int(mig_share(profile) * MIG_COMPUTE_SLICES)
        except ValueError:
            return None
    for gpus in range(1, min(slices.values()) + 1):
        if any(n % gpus for n in slices.values()):
            continue
        layout = {p: n // gpus for p, n in slices.items()}
        if sum(compute[p] * n for p, n in layout.items()) <= MIG_COMPUTE_SLICES:
            return gpus, layout
    return None


def _taint_keys(node: NodeState) -> tuple[str, ...]:
    """The taints a job must tolerate, as the queue manager reads them (``node_from_state``): not the preferences."""
    return tuple(sorted({t.key for t in node.taints if t.effect != "PreferNoSchedule"}))


def node_groups(nodes: Iterable[NodeState]) -> list[ClusterConfig]:
    """Nodes regrouped into clusters of node groups: one group per node group label (``muster.dev/node-group``)
    and shape (GPU type and count, CPU, memory, NVLink groups, shared GPUs, MIG slices, zone, block, labels,
    taints); racks are counted. A group's labels are those all its nodes carry alike (Kubernetes' and NVIDIA's
    too, so node selectors on them replay), but Muster's own, which the simulator sets itself."""
    shapes: dict[tuple[object, ...], list[NodeState]] = {}
    for node in sorted(nodes, key=lambda n: (n.cluster, n.node)):
        labels = _group_labels(node.labels)
        key = (
            node.cluster, node.labels.get(NODE_GROUP) or f"{node.gpu_type}-{node.gpus_allocatable}",
            node.gpu_type, node.gpus_allocatable, node.cpu_m // 1000, node.memory_mb // 1024,
            tuple(node.topology.nvlink_groups), node.topology.zone, node.topology.block,
            tuple(sorted(labels.items())), _taint_keys(node),
            min(node.gpus_shared, node.gpus_allocatable), tuple(sorted((p, n) for p, n in node.mig.items() if n > 0)),
        )
        shapes.setdefault(key, []).append(node)
    clusters: dict[str, list[NodeGroupConfig]] = {}
    for shape, members in shapes.items():
        cluster, group = str(shape[0]), str(shape[1])
        groups = clusters.setdefault(cluster, [])
        name = group if all(g.name != group for g in groups) else f"{group}-{len(groups)}"
        first = members[0]
        racks = sorted({n.topology.rack for n in members if n.topology.rack})
        mig = _mig_layout(first.mig)
        mig_gpus, layout = mig if mig is not None and first.gpus_allocatable + mig[0] <= 64 else (0, {})
        common = {k: v for k, v in first.labels.items()
                  if not _muster_label(k) and all(m.labels.get(k) == v for m in members)}
        groups.append(NodeGroupConfig(
            name=name,
            count=len(members),
            gpus_per_node=first.gpus_allocatable + mig_gpus,
            gpu_type=first.gpu_type,
            cpu=first.cpu_m // 1000,
            memory_gb=first.memory_mb // 1024,
            nvlink_groups=list(first.topology.nvlink_groups),
            topology=TopologyConfig(
                zone=first.topology.zone or "zone-0", block=first.topology.block or "block-0",
                racks=max(1, len(racks)), rack_prefix=_rack_prefix(racks),
            ),
            labels=common,
            taints=list(_taint_keys(first)),
            shared_gpus=min(first.gpus_shared, first.gpus_allocatable),
            mig_gpus=mig_gpus,
            mig_layout=layout,
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
                j.submitted_at, j.tenant, j.user = msg.submitted_at, msg.tenant, msg.user
                j.spec, j.queue = msg.spec, msg.spec.queue
        elif isinstance(msg, JobAdmitted):
            j = job(msg.job_id)
            j.admitted_at = j.admitted_at or env.occurred_at
            j.priority = msg.priority
            j.queue, j.tenant = j.queue or msg.queue, j.tenant or msg.tenant
            j.spec = j.spec or msg.spec
            j.attempt(msg.attempt).gpus = msg.spec.gpus_charged_at(msg.replicas)
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
        elif isinstance(msg, ATTEMPT_ENDS):
            if isinstance(msg, RunEvicted) or (isinstance(msg, RunFailed) and msg.classification == "infrastructure"):
                job(msg.job_id).unreplayed.add("node_failure")
            known = jobs.get(msg.job_id)
            begun = known.attempts.get(msg.attempt) if known is not None else None
            if ends_attempt(msg, started=begun is not None and begun.start is not None):
                j = job(msg.job_id)
                a = j.attempt(msg.attempt)
                if a.end is None:
                    a.end = msg.observed_at
                    asked = j.preempt_asked.get(msg.attempt)
                    if asked is not None:  # the first sign of the stop: JobStopped, or the objects' deletion first
                        j.stop_s.append(max(0.0, (msg.observed_at - asked).total_seconds()))
        elif isinstance(msg, JobStatusChanged):
            j = job(msg.job_id)
            if j.status is None or msg.updated_at >= j.status.updated_at:
                j.status = msg
        elif isinstance(msg, RunIdle):
            job(msg.job_id).unreplayed.add("idle")
        elif isinstance(msg, RunResized | ScaleJob):
            job(msg.job_id).unreplayed.add("resized")
        elif isinstance(msg, SuspendJob):
            job(msg.job_id).unreplayed.add("suspended")
        elif isinstance(msg, ChangePriority):
            job(msg.job_id).unreplayed.add("priority_changed")

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
    replayed = _with_dependencies(replayed, jobs)

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
    limited = {q.name for q in cluster.queues if q.user_limit_gpus is not None}
    labels = {key for node in core_nodes(cluster) for key in node.labels}
    for i, w in enumerate(replayed):
        spec = w.spec
        if spec is None:
            continue
        if not w.user and w.queue in limited:
            jobs[w.job_id].unreplayed.add("no_user")
        if any(t is not None and t.level == "rack" for t in (spec.topology, *(r.topology for r in spec.roles))):
            jobs[w.job_id].unreplayed.add("racks")
        kept = {k: v for k, v in spec.node_selector.items() if k in labels}
        if len(kept) < len(spec.node_selector):
            jobs[w.job_id].unreplayed.add("selector_dropped")
            replayed[i] = replace(w, spec=spec.model_copy(update={"node_selector": kept}))
    unreplayed = _unreplayed([jobs[w.job_id] for w in replayed], starting.values())
    return Reconstruction(origin, as_of, Workload(name, sort_jobs(replayed)), cluster, actual, tuple(notes), stop_s,
                          unreplayed)


#: what the replay does not replay, and why: (key, what happened to the job, what the replay does instead)
_UNREPLAYED = (
    ("no_spec", "known from its status only (neither its submission nor an admission is in the log)",
     "replayed with its GPUs and nothing else of its spec"),
    ("no_user", "known from its admission only, in a queue with a per-user limit",
     "its user is unknown, so no per-user limit applies to it"),
    ("deadline_dropped", "submitted before the window with a max_wait_s or max_runtime_s",
     "those are not replayed: their clocks started before the window"),
    ("dependency_dropped", "waiting for a job the replay has not got (over before the window, or never run)",
     "that condition is taken as met"),
    ("selector_dropped", "selecting nodes by a label no node group of the replay keeps (one its nodes do not all "
     "carry alike, such as a hostname)", "that part of its node selector is dropped"),
    ("racks", "asking for its pods in one rack",
     "the replay's racks are as many as the log's per node group, but not each node's own"),
    ("node_failure", "stopped by a node's failure or an eviction",
     "the replay's nodes never fail: it runs for the time it really ran"),
    ("idle", "released for idleness (idle_timeout_s)",
     "the replay cannot tell when GPUs sit idle: it runs for the time it really ran"),
    ("resized", "resized by its owner or an autoscaler (RunResized, ScaleJob)",
     "replayed at the size it was submitted with (the core still grows and shrinks an elastic job)"),
    ("suspended", "suspended by its owner (SuspendJob)", "replayed as if it only ever waited for capacity"),
    ("priority_changed", "given another priority class (ChangePriority)",
     "replayed with the priority it was last admitted with, from its submission on"),
)


def _unreplayed(replayed: Iterable[_Job], nodes: Iterable[NodeState]) -> tuple[str, ...]:
    """What of the replayed jobs' histories and of the nodes the replay does not replay, and why."""
    count: dict[str, int] = {}
    for j in replayed:
        for key in j.unreplayed:
            count[key] = count.get(key, 0) + 1
    out = [f"{count[key]} job(s) {what}: {instead}" for key, what, instead in _UNREPLAYED if count.get(key)]
    mixed = sum(1 for n in nodes if n.mig and _mig_layout(n.mig) is None)
    if mixed:
        out.append(f"{mixed} node(s) with MIG slices that do not split into one layout per GPU: their MIG slices "
                   "are not replayed")
    return tuple(out)


def _with_dependencies(replayed: list[WorkloadJob], jobs: Mapping[str, _Job]) -> list[WorkloadJob]:
    """The replayed jobs that wait for others (``spec.after``) waiting for the replayed jobs their spec names, as
    the queue manager resolves them: a job id of the tenant's, else the tenant's latest job of that name
    submitted before. A condition on a job the replay has not got is dropped (taken as met)."""
    ids = {w.job_id for w in replayed}
    named: dict[tuple[str, str], list[_Job]] = {}
    for j in jobs.values():
        if j.spec is not None and j.submitted_at is not None:
            named.setdefault((j.tenant, j.spec.name), []).append(j)
    out: list[WorkloadJob] = []
    for w in replayed:
        if w.spec is None or not w.spec.after:
            out.append(w)
            continue
        me = jobs[w.job_id]
        after: list[tuple[str, On]] = []
        for dep in w.spec.after:
            target = _resolve(dep.job, me, jobs, named)
            if target is not None and target in ids and target != w.job_id:
                after.append((target, On(dep.on)))
            else:
                me.unreplayed.add("dependency_dropped")
        out.append(replace(w, after=tuple(after)))
    waits = {w.job_id: [dep for dep, _ in w.after] for w in out if w.after}
    cycle = find_cycle(waits)
    while cycle is not None:  # names resolved otherwise than the queue manager did: never wait in a circle
        for job_id in cycle:
            jobs[job_id].unreplayed.add("dependency_dropped")
            waits.pop(job_id, None)
        cycle = find_cycle(waits)
    return [w if not w.after or w.job_id in waits else replace(w, after=()) for w in out]


def _resolve(name: str, me: _Job, jobs: Mapping[str, _Job], named: Mapping[tuple[str, str], list[_Job]]) -> str | None:
    """The job id ``name`` (a job id or a job name in ``spec.after``) stands for among ``me``'s tenant's jobs."""
    other = jobs.get(name)
    if other is not None and other.tenant == me.tenant:
        return name
    before = [(o.submitted_at, o.job_id) for o in named.get((me.tenant, name), ()) if o is not me
              and o.submitted_at is not None and (me.submitted_at is None or o.submitted_at <= me.submitted_at)]
    return max(before)[1] if before else None


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
    charged = spec.gpus_charged_at(spec.main_replicas) if spec else gpus  # shares of GPUs count too
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
        gpu_seconds += seconds * (a.gpus or charged)
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
    replayed_spec = spec
    if spec is None:
        j.unreplayed.add("no_spec")
    elif carried and (spec.max_wait_s is not None or spec.max_runtime_s is not None):
        j.unreplayed.add("deadline_dropped")  # their clocks started before the window
        replayed_spec = spec.model_copy(update={"max_wait_s": None, "max_runtime_s": None})
    wjob = WorkloadJob(
        job_id=j.job_id, submit_time=submit, duration=duration, num_gpus=gpus, queue=queue,
        gpu_type=_gpu_type(spec) if spec else ANY_GPU,
        priority=j.priority if j.priority is not None else class_value,
        min_gpus=min_gpus, runtime_estimate=estimate,
        preemptible=(spec.preemptible if spec else True) and class_preemptible, checkpointable=checkpointable,
        roles=workload_roles(spec) if spec else None,
        spec=replayed_spec, user=j.user, tenant=j.tenant or (status.tenant if status else ""),
        on_dependency_failure="fail" if spec is not None and spec.on_dependency_failure == "fail" else "cancel",
        # it did not succeed: its dependants judge it so, and the core learns no runtime from it
        fails=outcome in ("failed", "cancelled"),
    )
    return record, wjob
