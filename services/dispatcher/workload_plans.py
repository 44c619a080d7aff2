"""What the dispatcher writes for a job that is a workload object (JobSet, RayJob, LeaderWorkerSet...), and
where each of its gated pods goes. Pure: decisions, objects and pods in; labels, annotations and choices out.

A workload object carries Muster's identity (job id, attempt, queue: labels and annotations) and, in the
annotation ``muster.dev/plan``, the admitted placement (the wire ``PlacementPlan``, every entry naming its
role), so that a restarted dispatcher can go on releasing its pods. Each gated pod of the object is released
onto a node its role was planned on that still has room for one more of the role's pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from schemas import kube as ann
from schemas.decisions import JobAdmitted, PlacementPlan
from schemas.jobspec import JobSpec, RoleSpec
from services.dispatcher.book import CANCELLED
from services.runtime.kube import KubeObject, label_value
from services.spec.kinds.base import true_condition
from services.spec.pod_resources import holds_node

#: annotation on a workload object: the admitted ``PlacementPlan`` (JSON)
PLAN = ann.MUSTER_PREFIX + "plan"
#: annotation on a workload object Muster created from the job's manifest (through Muster): Muster deletes it
#: when the attempt ends; an object its owner created (kube-native) is only suspended, never deleted
OWNED = ann.MUSTER_PREFIX + "owned"
WORKLOAD = ann.WORKLOAD
#: what a stopped attempt leaves on its object (the preemption handshake, the deletion's marks, a cancel's): cleared
#: when the object is released again as a later attempt (a user's ``batch/v1`` Job too)
STOP_ANNOTATIONS = frozenset({
    ann.PREEMPT_REQUESTED, ann.PREEMPT_REASON, ann.PREEMPT_REQUEUE, ann.PREEMPT_GRACE, ann.PREEMPT_EVENT,
    ann.CHECKPOINTED, ann.DELETED_BY, ann.DELETE_REASON, CANCELLED,
})


def identity_labels(decision: JobAdmitted) -> dict[str, str]:
    """The labels every pod and the object itself get: job, attempt, queue."""
    return {ann.JOB_ID: label_value(decision.job_id), ann.ATTEMPT: str(decision.attempt),
            ann.QUEUE: label_value(decision.queue)}


def identity_annotations(decision: JobAdmitted, event_id: str, correlation_id: str, *, owned: bool,
                         kind: str, name: str) -> dict[str, str]:
    """The annotations the object gets: identity (unshortened), which object it is, the plan, the gang's
    size, the chain, and the job's idle timeout if it has one."""
    out = {
        WORKLOAD: f"{kind}/{name}",
        ann.JOB_ID: decision.job_id, ann.ATTEMPT: str(decision.attempt), ann.QUEUE: decision.queue,
        ann.CLUSTER: decision.placement.cluster, ann.GANG_SIZE: str(decision.placement.pods),
        PLAN: decision.placement.model_dump_json(), ann.DECISION_EVENT: event_id, ann.CORRELATION: correlation_id,
    }
    if owned:
        out[OWNED] = "true"
    if decision.spec.idle_timeout_s is not None:  # where the node watcher reads it
        out[ann.IDLE_TIMEOUT] = f"{decision.spec.idle_timeout_s:g}"
    return out


def plan_of(obj: KubeObject) -> PlacementPlan | None:
    """The admitted plan an object carries (None: not one of Muster's, or unreadable)."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(PLAN)
    if not raw:
        return None
    try:
        # a plan written by a newer dispatcher may carry fields this one does not know (a rolled-back
        # dispatcher recovering the objects): ignored, as on Muster's internal topics (schemas.codec)
        return PlacementPlan.model_validate_json(raw, extra="ignore")
    except ValidationError:
        return None


def role_shapes(roles: Iterable[RoleSpec]) -> dict[str, tuple[int, int, int, int, str]]:
    """Role name -> (pods, GPUs, CPU millicores, MiB per pod, GPU type): what admission counted of each role."""
    out = {}
    for r in roles:
        res = r.template.resources
        out[r.name] = (r.replicas, res.gpus, res.cpu_m, res.memory_mb, res.gpu_type or "")
    return out


def roles_changed(spec: JobSpec, now: Iterable[RoleSpec]) -> str | None:
    """Why the object's roles as read now differ from the roles the job was admitted with (its owner edited
    it, or a manifest's declared roles were not its own); None when they are the same."""
    admitted, current = role_shapes(spec.pod_roles()), role_shapes(now)
    if admitted == current:
        return None
    diffs = []
    for name in sorted(admitted.keys() | current.keys()):
        was, is_ = admitted.get(name), current.get(name)
        if was != is_:
            diffs.append(f"{name}: admitted {_shape(was)}, now {_shape(is_)}")
    return "the object's roles differ from the admitted ones (" + "; ".join(diffs) + ")"


def _shape(s: tuple[int, int, int, int, str] | None) -> str:
    if s is None:
        return "none"
    pods, gpus, cpu, mem, gpu_type = s
    return f"{pods} pods x {gpus} GPUs{' ' + gpu_type if gpu_type else ''}, {cpu}m CPU, {mem} MiB"


def planned(plan: PlacementPlan, role: str, main_role: str) -> Counter[str]:
    """Node -> pods of ``role`` in the plan (entries without a role are the main role's)."""
    out: Counter[str] = Counter()
    for entry in plan.nodes:
        if (entry.role or main_role) == role:
            out[entry.node] += entry.pods
    return out


def node_of(pod: Mapping[str, Any]) -> str | None:
    """The node a pod runs on or was released onto (its hostname node selector)."""
    spec = pod.get("spec") or {}
    return spec.get("nodeName") or (spec.get("nodeSelector") or {}).get(ann.HOSTNAME_LABEL)


def choose_node(plan: PlacementPlan, role: str, main_role: str, placed: Iterable[str]) -> str | None:
    """The planned node of ``role`` with room for one more of its pods, given the nodes of the role's pods
    placed already (``placed``: one entry per live pod); the plan's order decides among several. None when
    every planned slot of the role is taken (a surplus pod, e.g. a rollout's surge: it stays gated)."""
    taken = Counter(placed)
    for node, pods in planned(plan, role, main_role).items():
        if taken[node] < pods:
            return node
    return None


def beyond_plan(plan: PlacementPlan, role: str, main_role: str, pods: Iterable[Mapping[str, Any]]) -> list[
        Mapping[str, Any]]:
    """The pods of ``role`` (each holding a node) beyond what the plan gives their node: what a shrink of the
    plan takes back. The ones not ready go first, then in name order."""
    room = planned(plan, role, main_role)
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        node = node_of(pod)
        if node is not None and holds_node(pod):
            by_node.setdefault(node, []).append(pod)
    out: list[Mapping[str, Any]] = []
    for node, here in sorted(by_node.items()):
        excess = len(here) - room[node]
        if excess > 0:
            here.sort(key=lambda p: (true_condition(p, "Ready") is not None,
                                     str((p.get("metadata") or {}).get("name"))))
            out += here[:excess]
    return out


def resized_annotations(plan: PlacementPlan) -> dict[str, str]:
    """What a workload object's annotations say after a resize: the new plan and gang size."""
    return {PLAN: plan.model_dump_json(), ann.GANG_SIZE: str(plan.pods)}
