"""Conversions between wire models (``schemas``) and the core's value types (``services.core.model``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction
from types import MappingProxyType

from schemas.capacity import NodeState
from schemas.config import CohortConfig, QueueConfig
from schemas.decisions import NodePods, PlacementPlan
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec, TopologySpec
from schemas.kube import GPU_RESOURCE, POOL
from services.core.model import (
    ANY_GPU,
    CohortSpec,
    Job,
    Node,
    NodeAssignment,
    Placement,
    QueueSpec,
    ResourceQuota,
    Role,
    TopologyMode,
    TopologyRequest,
)
from services.spec.kinds.registry import find_kind


def queue_spec(q: QueueConfig) -> QueueSpec:
    return QueueSpec(
        name=q.name,
        cohort=q.cohort,
        weight=q.weight,
        quotas=MappingProxyType(
            {res: ResourceQuota(qt.nominal, qt.borrowing_limit, qt.lending_limit) for res, qt in q.quotas.items()}
        ),
        user_limit_gpus=q.user_limit_gpus,
        tenant=q.tenant,
    )


def cohort_spec(c: CohortConfig) -> CohortSpec:
    return CohortSpec(name=c.name, parent=c.parent, weight=c.weight)


def job_from_submit(msg: SubmitJob, *, priority: int, submit_time: float, attempt: int = 0) -> Job:
    """A submission as the core sees it. ``priority`` is the resolved value of the spec's priority class."""
    return job_from_spec(msg.spec, job_id=msg.job_id, priority=priority, submit_time=submit_time, user=msg.user,
                         tenant=msg.tenant, attempt=attempt)


def job_from_spec(spec: JobSpec, *, job_id: str, priority: int, submit_time: float, user: str = "",
                  tenant: str = "", attempt: int = 0) -> Job:
    """A wire job spec as the core sees it: the one translation, which the queue manager (``job_from_submit``)
    and the simulator's replay of the log both use. ``priority`` is the resolved value of the spec's priority
    class; ``configured_job`` adds what the configuration says about the job.

    The job's name is the spec's (runtimes are learnt per name stem); it tolerates the GPU taint
    (``nvidia.com/gpu``) when any of its pods asks for a GPU, and no other taint; a preemption waits its
    checkpoint's grace period when it checkpoints, and nothing otherwise. A job of several roles: its main
    role (``JobSpec.main_role``) is the core job's own pods, the others its companions; a role's topology, or
    else the job's, keeps it in the main role's domain."""
    companions: tuple[Role, ...] = ()
    if spec.template is not None:  # a job of one role (the common case: no role objects built)
        res = spec.template.resources
        replicas, min_replicas, topology = spec.replicas, spec.min_replicas, _topology(spec.topology)
        any_gpus = bool(res.gpus or res.shares_gpus)
        gpu_type = res.gpu_type
    else:
        main = spec.main_role()
        res = main.template.resources
        replicas, min_replicas, topology = main.replicas, main.min_replicas, _topology(main.topology or spec.topology)
        companions = tuple(
            Role(name=r.name, replicas=r.replicas, gpus_per_pod=r.template.resources.gpus,
                 cpu_m=r.template.resources.cpu_m, memory_mb=r.template.resources.memory_mb,
                 topology=_topology(r.topology or spec.topology))
            for r in spec.roles if r.name != main.name
        )
        any_gpus = any(r.template.resources.gpus or r.template.resources.shares_gpus for r in spec.roles)
        gpu_type = next((r.template.resources.gpu_type for r in spec.roles if r.template.resources.gpu_type), None)
    gpu_share = Fraction(res.gpu_fraction) if res.gpu_fraction else 0  # eighths: exact in binary
    return Job(
        job_id=job_id,
        queue=spec.queue,
        submit_time=submit_time,
        replicas=replicas,
        gpus_per_pod=res.gpus,
        gpu_type=gpu_type or ANY_GPU,
        cpu_m=res.cpu_m,
        memory_mb=res.memory_mb,
        min_replicas=min_replicas,
        priority=priority,
        priority_class=spec.priority_class,
        user=user,
        tenant=tenant,
        runtime_estimate=spec.runtime_estimate_s,
        preemptible=spec.preemptible,
        checkpointable=spec.checkpoint.enabled,
        # how long a preemption waits for a checkpoint: nothing to wait for when the job cannot checkpoint
        grace_period_s=float(spec.checkpoint.grace_period_s) if spec.checkpoint.enabled else 0.0,
        topology=topology,
        cluster=spec.cluster,
        node_selector=MappingProxyType(dict(spec.node_selector)),
        tolerations=frozenset({GPU_RESOURCE}) if any_gpus else frozenset(),
        max_wait_s=spec.max_wait_s,
        max_runtime_s=spec.max_runtime_s,
        attempt=attempt,
        name=spec.name,
        gpu_share=gpu_share,
        mig_profile=res.mig_profile or "",
        mig_per_pod=res.mig_slices if res.mig_profile else 0,
        role=main_role_name(spec),
        companions=companions,
        serving=is_serving(spec),
    )


def configured_job(job: Job, *, class_preemptible: bool, pool: str | None) -> Job:
    """A submission's core job under the configuration, as the queue manager and the simulator both schedule
    it: not preemptible when its priority class is not (``class_preemptible``), and confined to its queue's
    ``pool`` (the pool's label added to its node selector) when the queue names one."""
    if job.preemptible and not class_preemptible:
        job = replace(job, preemptible=False)
    if pool is not None:
        job = replace(job, node_selector=MappingProxyType({**job.node_selector, POOL: pool}))
    return job


def is_serving(spec: JobSpec) -> bool:
    """Whether the job is an object of a serving or interactive kind (a Deployment, a StatefulSet...)."""
    if spec.workload is None:
        return False
    found = find_kind(spec.workload.api_version, spec.workload.kind)
    return found is not None and found.serving


def main_role_name(spec: JobSpec) -> str:
    """The name the core gives a job's main role: the role's name for a job of several roles, "" for one."""
    return spec.main_role().name if spec.roles else ""


def _topology(t: TopologySpec | None) -> TopologyRequest | None:
    return None if t is None else TopologyRequest(t.level, TopologyMode(t.mode))


def node_from_state(s: NodeState, extra_labels: Mapping[str, str] | None = None) -> Node:
    """The node as the core sees it; ``extra_labels`` are added to (and override) the node's own labels."""
    unhealthy_since = None if s.healthy or s.unhealthy_since is None else s.unhealthy_since.timestamp()
    topo = {k: v for k, v in (("zone", s.topology.zone), ("block", s.topology.block), ("rack", s.topology.rack)) if v}
    return Node(
        name=s.node,
        cluster=s.cluster,
        gpu_type=s.gpu_type,
        gpus=s.gpus_allocatable,
        cpu_m=s.cpu_m,
        memory_mb=s.memory_mb,
        topology=MappingProxyType(topo),
        labels=MappingProxyType({**s.labels, **(extra_labels or {})}),
        nvlink_groups=tuple(s.topology.nvlink_groups),
        taints=frozenset(t.key for t in s.taints if t.effect != "PreferNoSchedule"),
        healthy=s.healthy,
        schedulable=s.schedulable,
        unhealthy_since=unhealthy_since,
        shared_gpus=min(s.gpus_shared, s.gpus_allocatable),
        mig=MappingProxyType({p: n for p, n in s.mig.items() if n > 0}),
    )


def placement_plan(p: Placement, main_role: str = "") -> PlacementPlan:
    """The core's placement on the wire. A job of several roles names the role of every entry (its main
    role's ``main_role``); a job of one role names none, as before roles existed."""
    return PlacementPlan(
        cluster=p.cluster,
        nodes=[
            NodePods(
                node=a.node,
                pods=a.pods,
                nvlink_groups=list(a.groups),
                gpu_fraction=float(a.fraction) if a.fraction else None,
                gpu_slots=list(a.slots),
                mig_profile=a.mig_profile or None,
                mig_slices=a.mig_per_pod,
                role=(a.role or main_role) or None,
            )
            for a in p.nodes
        ],
    )


def placement_from_plan(plan: PlacementPlan, main_role: str = "") -> Placement:
    """The wire's placement for the core: entries of the main role (``main_role``, or none named) get no role."""
    return Placement(
        cluster=plan.cluster,
        nodes=tuple(
            NodeAssignment(
                node=n.node,
                pods=n.pods,
                groups=tuple(n.nvlink_groups),
                fraction=Fraction(n.gpu_fraction) if n.gpu_fraction else 0,
                slots=tuple(n.gpu_slots),
                mig_profile=n.mig_profile or "",
                mig_per_pod=n.mig_slices if n.mig_profile else 0,
                role="" if n.role in (None, main_role) else n.role,
            )
            for n in plan.nodes
        ),
    )
