"""Jobs that are workload objects (JobSet, TrainJob, RayJob, RayCluster, LeaderWorkerSet, Deployment,
StatefulSet, groups of Pods): release on admission, stop on preemption, give up on failure.

The object's own controller runs it; Muster only holds it back, lets it go onto the admitted placement and
takes it back:

- **Admission** (``JobAdmitted`` whose spec names a ``workload``). Kube-native (``workload.name``): the
  object its owner created held back is read again, and its roles must still be the ones admitted (an owner
  who edited the object while it waited is refused, ``workload_changed``, rather than run on quota it was not
  charged); then the kind's release patches put the admission gate, Muster's labels and the role label into
  every pod template and unsuspend it, and the object itself gets Muster's identity and the plan. Through
  Muster (``workload.manifest``): the object is created in the job's namespace, held back the same way,
  named ``<job-id>-a<attempt>``, its roles checked against the manifest's own.
- **Release of the pods** (``releaser``): every gated pod of an admitted object goes onto a planned node of
  its role with room left, and its gate is removed; the pods of a restart or a scale-up of the controller
  are released the same way as they come.
- **Preemption** (``JobPreemptionRequested``): the object is annotated as a Job is
  (``muster.dev/preempt-requested``...); once it says ``muster.dev/checkpointed=true`` or its grace has
  passed, a kind that can be suspended is suspended (its controller removes the pods; the gate stays in
  its templates, so the next run's pods come gated again) and the pods of any other kind are deleted (its
  controller re-creates them gated). When no pod of the attempt is left, ``JobStopped`` is reported; an
  object Muster created is then deleted, an owner's object is left held back. A cancel stops the job the same
  way, and an owner's object is then marked ``muster.dev/cancelled`` and its owner told so by an Event (see
  ``cancelled``).
- **Resize** (``JobScaled``, of a serving object its owner scaled, or of one the core shrinks for other work):
  the object's plan and gang size follow; pods beyond the plan on a node are deleted (re-created gated).
- **Failure**: the kind's controller has its own retries (a JobSet's failure policy, a RayJob's
  backoff); a ``RunFailed`` of a workload is final here, reported as ``DispatchFailed(workload_failed)``.

A restarted dispatcher finds its workload objects by the ``muster.dev/job-id`` label on every kind it
knows and reads their plan back (``workload_plans``).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schemas import kube as ann
from schemas.decisions import JobAdmitted, JobPreemptionRequested, JobScaled
from schemas.envelope import Envelope
from schemas.kube import POD_GROUP
from schemas.runs import JobDispatched, JobStopped, RunFailed
from services.dispatcher import cancelled
from services.dispatcher.binder import DEFAULT_SCHEDULER, SCHEDULER_NAME
from services.dispatcher.book import CANCELLED, Preemption
from services.dispatcher.context import Context, api_failure, emit, report_failure
from services.dispatcher.plans import object_name
from services.dispatcher.preemption_handshake import handshake_annotations
from services.dispatcher.releaser import GPU_TOLERATIONS, release_labels
from services.dispatcher.workload_book import WorkloadRun, resource_of
from services.dispatcher.workload_plans import (
    OWNED,
    STOP_ANNOTATIONS,
    WORKLOAD,
    beyond_plan,
    choose_node,
    identity_annotations,
    identity_labels,
    plan_of,
    resized_annotations,
    roles_changed,
)
from services.runtime.kafka import Delivery
from services.runtime.kube import PODS, KubeObject, KubeRest, PatchType, Resource, create_or_get, delete
from services.runtime.kube.errors import is_not_found, status_of
from services.spec.core_types import main_role_name
from services.spec.kinds import (
    KINDS,
    NotQueueable,
    ObjectRef,
    UnknownKind,
    WorkloadKind,
    kind_for,
    pod_group,
    released_pod,
)
from services.spec.pod_resources import holds_node

log = logging.getLogger(__name__)


class WorkloadOps:
    """The Kubernetes calls the workload path makes."""

    def __init__(self, rest: KubeRest) -> None:
        self.rest = rest

    async def get(self, resource: Resource, name: str, namespace: str | None) -> KubeObject | None:
        try:
            return await self.rest.get(resource, name, namespace if resource.namespaced else None)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    async def related(self, refs: Sequence[ObjectRef]) -> list[KubeObject]:
        """The objects a kind needs to read its roles (a TrainJob's runtime); missing ones are left out."""
        out = []
        for ref in refs:
            ident = ref.identity
            found = await self.get(Resource(ident.api_version, ident.kind, ident.plural, ident.namespaced),
                                   ref.name, ref.namespace)
            if found is not None:
                out.append(found)
        return out

    async def apply(self, run: WorkloadRun, patches: Sequence[Any]) -> KubeObject | None:
        """Apply the kind's patches in order; the object after the last (None: it is gone)."""
        obj: KubeObject | None = run.obj
        for p in patches:
            kind = PatchType.JSON if p.type == "json" else PatchType.MERGE
            try:
                obj = await self.rest.patch(run.resource, run.name, p.body, run.namespace, kind)
            except Exception as exc:
                if is_not_found(exc):
                    return None
                raise
        return obj

    async def pods(self, run: WorkloadRun) -> list[KubeObject]:
        """The object's pods (every selector of its kind, in its namespace), each once."""
        found: dict[str, KubeObject] = {}
        for selector in run.kind.pod_selectors(run.obj):
            query = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
            items, _ = await self.rest.list(PODS, run.namespace, label_selector=query or None)
            for pod in items:
                if run.kind.pod_role(run.obj, pod) is not None:
                    found[str((pod.get("metadata") or {}).get("uid") or id(pod))] = pod
        return list(found.values())

    async def delete_pods(self, pods: Sequence[Mapping[str, Any]], grace_s: int) -> None:
        for pod in pods:
            meta = pod.get("metadata") or {}
            await delete(self.rest, PODS, str(meta["name"]), meta.get("namespace"), grace_period_seconds=grace_s)

    async def delete_object(self, run: WorkloadRun) -> None:
        await delete(self.rest, run.resource, run.name, run.namespace if run.resource.namespaced else None)


# ---------------------------------------------------------------------- admission


async def admit(ctx: Context, ops: WorkloadOps, envelope: Envelope, delivery: Delivery) -> None:
    decision = envelope.payload
    assert isinstance(decision, JobAdmitted) and decision.spec.workload is not None
    if decision.placement.cluster != ctx.cluster:
        return
    current = ctx.workloads.get(decision.job_id)
    if ctx.is_finished(decision.job_id, decision.attempt) or (current and current.attempt > decision.attempt):
        ctx.outcome(decision.TYPE, "stale")
        return
    if current is not None and current.attempt == decision.attempt:
        if not current.reported or delivery.attempt > 1:
            await emit(delivery, envelope, _dispatched(ctx, current))
            current.reported = True
        ctx.outcome(decision.TYPE, "repeat")
        return
    correlation = envelope.correlation_id or envelope.event_id
    try:
        run = await _release(ctx, ops, decision, envelope.event_id, correlation)
    except _Refused as refused:
        await report_failure(ctx, delivery, envelope, refused.reason, refused.message, retryable=False)
        return
    except Exception as exc:
        failure = api_failure(exc)
        if failure is None:
            raise
        log.warning("job %s attempt %d: workload release failed (%s): %s", decision.job_id, decision.attempt,
                    failure[0], exc)
        await report_failure(ctx, delivery, envelope, failure[0], str(exc), retryable=failure[1])
        return
    run.uses_gpus = uses_gpus(decision)
    ctx.workloads[run.job_id] = run
    await emit(delivery, envelope, _dispatched(ctx, run))
    run.reported = True
    ctx.metrics.jobs_created.labels(ctx.cluster).inc()
    ctx.outcome(decision.TYPE, "dispatched")
    log.info("job %s attempt %d released as %s %s/%s", run.job_id, run.attempt, run.kind.identity.kind,
             run.namespace, run.name)


class _Refused(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _dispatched(ctx: Context, run: WorkloadRun) -> JobDispatched:
    return JobDispatched(**ctx.base(run.job_id, run.attempt), namespace=run.namespace, object_name=run.name[:63])


async def _release(ctx: Context, ops: WorkloadOps, decision: JobAdmitted, event_id: str,
                   correlation: str) -> WorkloadRun:
    workload = decision.spec.workload
    assert workload is not None
    try:
        kind = kind_for(workload.api_version, workload.kind)
    except UnknownKind as exc:
        raise _Refused("unknown_kind", exc.reason) from None
    resource = resource_of(kind)
    owned = workload.manifest is not None
    labels = identity_labels(decision)
    namespace = decision.namespace
    name = object_name(decision.job_id, decision.attempt) if owned else str(workload.name)
    annotations = identity_annotations(decision, event_id, correlation, owned=owned, kind=kind.identity.kind,
                                       name=name)
    if kind.identity.kind == "Pod":
        return await _release_group(ctx, ops, decision, kind, labels, annotations, correlation, event_id)
    if workload.manifest is not None:
        related = await ops.related(kind.references(workload.manifest))
        try:
            _check_roles(decision, kind, workload.manifest, related)
            manifest = kind.hold_manifest(workload.manifest, name=name, namespace=namespace, labels=labels,
                                          annotations=annotations, related=related)
        except NotQueueable as exc:
            raise _Refused("workload_unreadable", exc.reason) from None
        await ctx.ops.ensure_namespace(namespace)
        obj, _ = await create_or_get(ops.rest, resource, manifest, namespace)
    else:
        found = await ops.get(resource, name, namespace)
        if found is None:
            raise _Refused("workload_missing", f"{kind.identity.kind} {namespace}/{name} to release does not exist")
        uid = (found.get("metadata") or {}).get("uid")
        if workload.uid and uid and uid != workload.uid:
            raise _Refused("workload_replaced", f"{kind.identity.kind} {namespace}/{name} is another object "
                                                "than the one submitted (it was deleted and created again)")
        related = await ops.related(kind.references(found))
        try:
            _check_roles(decision, kind, found, related)
            patches = kind.release_patch(found, labels, annotations, related) or ()
        except NotQueueable as exc:
            raise _Refused("workload_unreadable", exc.reason) from None
        run = WorkloadRun(decision.job_id, decision.attempt, namespace, name, kind, decision.placement,
                          main_role_name(decision.spec), owned, found, related, correlation, event_id)
        # an object released again after a preemption loses the marks of the attempt that was stopped
        stale: dict[str, str | None] = {k: None for k in STOP_ANNOTATIONS
                                        if k in ((found.get("metadata") or {}).get("annotations") or {})}
        identity = {"metadata": {"labels": labels, "annotations": {**stale, **annotations}}}
        released = await ops.apply(run, [_Merge(identity), *patches])
        if released is None:
            raise _Refused("workload_missing", f"{kind.identity.kind} {namespace}/{name} went away")
        run.obj = released
        return run
    return WorkloadRun(decision.job_id, decision.attempt, namespace, name, kind, decision.placement,
                       main_role_name(decision.spec), owned, obj, related, correlation, event_id)


async def _release_group(ctx: Context, ops: WorkloadOps, decision: JobAdmitted, kind: WorkloadKind,
                         labels: dict[str, str], annotations: dict[str, str], correlation: str,
                         event_id: str) -> WorkloadRun:
    """A group of plain pods is no one object: through Muster its pods are created (gated); kube-native
    they are the gated pods labelled with the group's name. Either way the pods themselves are the run."""
    workload = decision.spec.workload
    assert workload is not None
    namespace = decision.namespace
    if workload.manifest is not None:
        name = object_name(decision.job_id, decision.attempt)
        try:
            _check_roles(decision, kind, workload.manifest, ())
            group = kind.hold_manifest(workload.manifest, name=name, namespace=namespace, labels=labels,
                                       annotations=annotations)
        except NotQueueable as exc:
            raise _Refused("workload_unreadable", exc.reason) from None
        await ctx.ops.ensure_namespace(namespace)
        pods = released_group(decision, group, scheduler_name=SCHEDULER_NAME if ctx.settings.bind_pods else None)
        obj = pod_group(await _create_pods(ctx, ops, pods, namespace))
    else:
        name = str(workload.name)
        items, _ = await ops.rest.list(PODS, namespace, label_selector=f"{POD_GROUP}={name}")
        if not items:
            raise _Refused("workload_missing", f"no pod of group {namespace}/{name} is left to release")
        obj = pod_group(items)
        try:
            _check_roles(decision, kind, obj, ())
        except NotQueueable as exc:
            raise _Refused("workload_unreadable", exc.reason) from None
    return WorkloadRun(decision.job_id, decision.attempt, namespace, name, kind, decision.placement,
                       main_role_name(decision.spec), workload.manifest is not None, obj, [], correlation, event_id)


async def _create_pods(ctx: Context, ops: WorkloadOps, pods: list[KubeObject], namespace: str) -> list[KubeObject]:
    """Create a group's pods at once, each already on its node where the binder finds room there now
    (``Binder.place``: no binding request, no wait for its watch); a pod that exists already is read back."""
    binder = ctx.binder
    placed = [binder.place(pod, namespace) for pod in pods] if binder is not None else pods
    made = await asyncio.gather(*(create_or_get(ops.rest, PODS, pod, namespace) for pod in placed),
                                return_exceptions=True)
    failure: BaseException | None = None
    for pod, outcome in zip(placed, made, strict=True):
        if isinstance(outcome, BaseException):
            failure = failure or outcome
            if binder is not None:
                binder.unplace(pod)
    if failure is not None:
        raise failure
    return [outcome[0] for outcome in made if not isinstance(outcome, BaseException)]


def uses_gpus(decision: JobAdmitted) -> bool:
    """Whether some pod of the job asks for GPUs (its pods then tolerate the GPU taint)."""
    return any(t.resources.gpus or t.resources.shares_gpus for t in decision.spec.templates())


def released_group(decision: JobAdmitted, group: Mapping[str, Any], *,
                   scheduler_name: str | None = None) -> list[KubeObject]:
    """The gated pods of a group Muster creates (``hold_manifest``'s, each labelled with its role), each
    already released onto a planned node of its role, as the releaser would release it once created: created
    so, a pod needs no patch and does not wait for the releaser to learn of its job (which is booked only once
    every pod exists). A pod with no planned slot left stays gated, as the releaser would leave it.

    With ``scheduler_name`` (the binder's, when Muster binds pods), a pod whose manifest names no scheduler of
    its own names that one, so Muster's binder binds it to its planned node once the node has room, instead of
    the default scheduler's queue, binding and Event: the node is Muster's decision already."""
    main = main_role_name(decision.spec)
    tolerations = GPU_TOLERATIONS if uses_gpus(decision) else ()
    placed: dict[str, list[str]] = {}
    out: list[KubeObject] = []
    for pod in group.get("items") or []:
        if scheduler_name is not None and (pod.get("spec") or {}).get("schedulerName") in (None, DEFAULT_SCHEDULER):
            pod = {**pod, "spec": {**pod["spec"], "schedulerName": scheduler_name}}
        # the role hold_manifest wrote: asking the kind would read every pod's shape again for each pod
        role = str(((pod.get("metadata") or {}).get("labels") or {})[ann.ROLE])
        node = choose_node(decision.placement, role, main, placed.setdefault(role, []))
        if node is None:
            out.append(pod)
            continue
        placed[role].append(node)
        out.append(released_pod(pod, node, release_labels(decision.job_id, decision.attempt, role),
                                tolerations=tolerations))
    return out


@dataclass(frozen=True, slots=True)
class _Merge:
    body: dict[str, Any]
    type: str = "merge"


def _check_roles(decision: JobAdmitted, kind: WorkloadKind, obj: Mapping[str, Any],
                 related: Sequence[Mapping[str, Any]]) -> None:
    why = roles_changed(decision.spec, kind.roles(obj, related).roles)
    if why is not None:
        raise _Refused("workload_changed", why)


# ---------------------------------------------------------------------- preemption


async def request_stop(ctx: Context, ops: WorkloadOps, envelope: Envelope, delivery: Delivery) -> bool:
    """Handle a preemption of a workload job; False when the job is not one (the Job path handles it)."""
    decision = envelope.payload
    assert isinstance(decision, JobPreemptionRequested)
    run = ctx.workloads.get(decision.job_id)
    if run is None:
        return False
    if run.attempt > decision.attempt:
        ctx.outcome(decision.TYPE, "stale")
        return True
    if run.attempt < decision.attempt:
        return False
    if run.preemption is not None:
        if run.job_id not in ctx.tasks:
            _start(ctx, ops, run)
        ctx.outcome(decision.TYPE, "repeat")
        return True
    pre = Preemption(requested_at=ctx.clock(), reason=decision.reason, requeue=decision.requeue,
                     grace_s=decision.grace_period_s, event_id=envelope.event_id)
    run.correlation_id = run.correlation_id or envelope.correlation_id or envelope.event_id
    if _is_group(run):  # no object to annotate: the pods go at once (they cannot be suspended)
        obj: KubeObject | None = run.obj
    else:
        obj = await ops.apply(run, [_Merge({"metadata": {"annotations": handshake_annotations(pre)}})])
    if obj is None:
        _forget(ctx, run)
        await emit(delivery, envelope, JobStopped(**ctx.base(run.job_id, run.attempt), reason=decision.reason,
                                                  requeue=decision.requeue))
        ctx.outcome(decision.TYPE, "absent")
        return True
    run.obj, run.preemption = obj, pre
    _start(ctx, ops, run)
    ctx.outcome(decision.TYPE, "handshake")
    return True


async def scale(ctx: Context, ops: WorkloadOps, envelope: Envelope, delivery: Delivery) -> bool:
    """``JobScaled`` of a workload job; False when the job is not one here (the Job path handles it).

    The object's plan and gang size follow the decision, so the releaser lets as many gated pods go onto the
    new nodes as they now have room for. A shrink the core decided (to make room for other work) deletes the
    pods beyond the plan on each node; their controller re-creates them gated, and they wait. A shrink its
    owner made finds its pods gone already."""
    decision = envelope.payload
    assert isinstance(decision, JobScaled)
    run = ctx.workloads.get(decision.job_id)
    if run is None:
        return False
    if decision.placement.cluster != ctx.cluster or run.attempt != decision.attempt:
        ctx.outcome(decision.TYPE, "stale")
        return True
    if run.preemption is not None:
        ctx.outcome(decision.TYPE, "stopping")
        return True
    try:
        if run.plan != decision.placement and not _is_group(run):
            obj = await ops.apply(run, [_Merge({"metadata": {"annotations": resized_annotations(decision.placement)}})])
            if obj is None:
                ctx.outcome(decision.TYPE, "absent")  # the node watcher reports the object's going
                return True
            run.obj = obj
        run.plan = decision.placement
        pods = await ops.pods(run)
        excess = [p for role in {n.role or run.main_role for n in decision.placement.nodes}
                  for p in beyond_plan(run.plan, role, run.main_role,
                                       [q for q in pods if run.kind.pod_role(run.obj, q) == role])]
        if excess:
            log.info("job %s attempt %d shrunk to %d pods: %d pods beyond its plan deleted", run.job_id,
                     run.attempt, decision.replicas, len(excess))
            await ops.delete_pods(excess, math.ceil(ctx.settings.stop_floor_s))
    except Exception as exc:
        failure = api_failure(exc)
        if failure is None or failure[1]:
            raise  # delivered again: the steps above are idempotent
        log.error("job %s attempt %d: its %s %s/%s could not follow its resize to %d pods (%s): %s", run.job_id,
                  run.attempt, run.kind.identity.kind, run.namespace, run.name, decision.replicas, failure[0], exc)
        ctx.outcome(decision.TYPE, "failed")
        return True
    ctx.outcome(decision.TYPE, "rescaled")
    return True


def _is_group(run: WorkloadRun) -> bool:
    return run.kind.identity.kind == "Pod"


def _start(ctx: Context, ops: WorkloadOps, run: WorkloadRun) -> None:
    ctx.tasks.spawn(run.job_id, _handshake(ctx, ops, run), name=f"stop {run.namespace}/{run.name}")


async def _handshake(ctx: Context, ops: WorkloadOps, run: WorkloadRun) -> None:
    pre = run.preemption
    assert pre is not None
    checkpointed = await _acknowledged(ctx, ops, run, pre)
    await _take_back(ctx, ops, run, pre)
    await ctx.reporter.report(
        JobStopped(**ctx.base(run.job_id, run.attempt), reason=pre.reason, requeue=pre.requeue,
                   checkpointed=checkpointed),
        correlation_id=run.correlation_id or None, causation_id=pre.event_id or None)
    _forget(ctx, run)
    log.info("job %s attempt %d stopped (%s, checkpointed=%s)", run.job_id, run.attempt, pre.reason, checkpointed)
    if not run.owned and not _is_group(run) and cancelled.is_cancel(pre):
        await _leave(ctx, ops, run, pre)


async def _leave(ctx: Context, ops: WorkloadOps, run: WorkloadRun, pre: Preemption) -> None:
    """Mark the cancelled job's object, left held back, and tell its owner with an Event (best effort)."""
    try:
        obj = await ops.apply(run, [_Merge({"metadata": {"annotations": cancelled.cancel_mark(pre)}})])
        if obj is not None:
            ident = run.kind.identity
            left = cancelled.LeftObject.of(obj, ident.api_version, ident.kind, suspended=run.kind.suspendable)
            await cancelled.tell(ops.rest, left, ctx.clock())
    except Exception as exc:  # the job is over: a restarted dispatcher marks it when it resumes the stop
        log.warning("job %s: its %s %s/%s was left held back but not marked: %s", run.job_id,
                    run.kind.identity.kind, run.namespace, run.name, exc)


async def _acknowledged(ctx: Context, ops: WorkloadOps, run: WorkloadRun, pre: Preemption) -> bool:
    """Until the object says it checkpointed (True), ends, goes away or its grace runs out."""
    if _is_group(run):
        return False  # a group of pods has no object to say it checkpointed
    while True:
        obj = await ops.get(run.resource, run.name, run.namespace)
        if obj is None or run.kind.state(obj).phase in ("succeeded", "failed"):
            return False
        run.obj = obj
        if ((obj.get("metadata") or {}).get("annotations") or {}).get(ann.CHECKPOINTED) == "true":
            return True
        remaining = pre.deadline - ctx.clock().timestamp()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(ctx.settings.handshake_poll_s, remaining))


async def _take_back(ctx: Context, ops: WorkloadOps, run: WorkloadRun, pre: Preemption) -> None:
    """Suspend the object (or delete its pods), wait until its pods are gone, delete an object Muster made."""
    grace = math.ceil(max(ctx.settings.stop_floor_s, pre.deadline - ctx.clock().timestamp()))
    suspend = run.kind.suspend_patch(run.obj)
    if suspend is not None and await ops.apply(run, [suspend]) is None:
        return
    limit = asyncio.get_running_loop().time() + grace + ctx.settings.stop_wait_margin_s
    while True:
        pods = [p for p in await ops.pods(run) if holds_node(p)]
        if not pods:
            break
        if suspend is None or asyncio.get_running_loop().time() > limit - ctx.settings.stop_wait_margin_s:
            await ops.delete_pods(pods, grace)  # a kind that cannot be suspended, or a controller too slow
        if asyncio.get_running_loop().time() > limit:
            log.warning("job %s attempt %d: %d pods still there %.0fs after their grace; reported stopped anyway",
                        run.job_id, run.attempt, len(pods), ctx.settings.stop_wait_margin_s)
            break
        await asyncio.sleep(ctx.settings.release_poll_s)
    if run.owned and not _is_group(run):  # marked first: the node watcher reports its going as Muster's doing
        await ops.apply(run, [_Merge({"metadata": {"annotations": {ann.DELETED_BY: ann.MUSTER,
                                                                   ann.DELETE_REASON: pre.reason}}})])
        try:
            await ops.delete_object(run)
        except Exception as exc:
            if not is_not_found(exc):
                raise


def _forget(ctx: Context, run: WorkloadRun) -> None:
    if ctx.workloads.get(run.job_id) is run:
        del ctx.workloads[run.job_id]
    ctx.finished[run.job_id] = max(run.attempt, ctx.finished.get(run.job_id, -1))


# ---------------------------------------------------------------------- failure


async def on_failed(ctx: Context, envelope: Envelope, delivery: Delivery) -> bool:
    """A workload's run failed: its controller already spent its own retries; False when not a workload."""
    failed = envelope.payload
    assert isinstance(failed, RunFailed)
    run = ctx.workloads.get(failed.job_id)
    if run is None or run.attempt != failed.attempt:
        return run is not None
    if failed.classification == "infrastructure" or run.preemption is not None:
        return True  # the queue manager requeues it itself; a run being stopped fails on purpose
    await emit(delivery, envelope, ctx.failure(run.job_id, run.attempt, "workload_failed",
                                               failed.message or failed.reason, retryable=False))
    _forget(ctx, run)
    return True


# ---------------------------------------------------------------------- recovery


async def recover(ctx: Context, ops: WorkloadOps) -> int:
    """The workload runs on the cluster, from the objects carrying a Muster job id, for every kind it serves."""
    found = 0
    for kind in KINDS:
        if not kind.identity.namespaced or kind.identity.kind in ("Job", "Pod"):
            continue  # batch Jobs are the Job path's; a group of Pods is no one object
        try:
            items, _ = await ops.rest.list(resource_of(kind), label_selector=ann.JOB_ID)
        except Exception as exc:
            if is_not_found(exc):
                continue  # the kind's CRD is not installed here
            if status_of(exc) == 403:
                log.warning("cluster %s: not allowed to list %s (RBAC): such jobs are not recovered", ctx.cluster,
                            kind.identity.plural)
                continue
            raise
        for obj in items:
            run = run_of(kind, obj)
            if run is None:
                continue
            run.preemption = _preemption_of(obj)  # before the run is seen: the releaser skips a run being stopped
            ctx.workloads[run.job_id] = run
            found += 1
            run.related = await ops.related(kind.references(obj))
            if run.preemption is not None:
                _start(ctx, ops, run)
    return found


def run_of(kind: WorkloadKind, obj: KubeObject) -> WorkloadRun | None:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    plan = plan_of(obj)
    job_id, attempt = annotations.get(ann.JOB_ID), annotations.get(ann.ATTEMPT)
    if plan is None or not job_id or not str(attempt or "").isdigit() or CANCELLED in annotations:
        return None  # not a run (a cancelled job's object is its owner's now)
    if annotations.get(WORKLOAD) != f"{kind.identity.kind}/{meta.get('name')}":
        return None  # an object its controller made from the job's object, carrying its annotations
    main = next((n.role for n in plan.nodes if n.role), "") or ""
    return WorkloadRun(str(job_id), int(str(attempt)), str(meta.get("namespace") or ""), str(meta.get("name")),
                       kind, plan, main, annotations.get(OWNED) == "true", obj, [],
                       annotations.get(ann.CORRELATION, ""), annotations.get(ann.DECISION_EVENT, ""), reported=True)


def _preemption_of(obj: KubeObject) -> Preemption | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    at = annotations.get(ann.PREEMPT_REQUESTED)
    if not at:
        return None
    try:
        return Preemption(requested_at=datetime.fromisoformat(at), reason=annotations.get(ann.PREEMPT_REASON, ""),
                          requeue=annotations.get(ann.PREEMPT_REQUEUE) == "true",
                          grace_s=float(annotations.get(ann.PREEMPT_GRACE, "0")),
                          event_id=annotations.get(ann.PREEMPT_EVENT, ""))
    except ValueError:
        return None
