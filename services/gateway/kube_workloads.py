"""Kube-native submissions of workload kinds: a JobSet, TrainJob, RayJob, RayCluster, LeaderWorkerSet,
Deployment or StatefulSet labelled ``muster.dev/queue`` and created held back (``spec.suspend: true``, or the
scheduling gate ``muster.dev/admission`` in every pod template for a kind that cannot be suspended), or a group
of plain Pods (label ``muster.dev/pod-group``, annotation ``muster.dev/pod-group-size``, each pod gated and
labelled with the queue), becomes a ``SubmitJob`` intent, as a labelled suspended ``batch/v1`` Job does
(``kube_jobs``, which keeps the Job path). The spec's roles are the object's pod sets and its ``workload``
names the object (apiVersion, kind, name, namespace, uid): the dispatcher releases it onto the admitted
placement, and the real controller does the rest.

What the watch does, per kind in ``services.spec.kinds.KINDS`` but ``batch/v1`` Job:

- Discovery: a kind whose collection answers 404 is not served (its CRD is not installed): that is logged
  once, and asked again every ``recheck_s`` (a minute); once served, its objects labelled ``muster.dev/queue``
  are listed and watched in every namespace.
- An object held back (``kind.why_not_held`` is None) in a namespace that belongs to a tenant is submitted
  once, with the HTTP door's checks (the tenant's queue, ``check_spec``, no plain value that looks like a
  secret in any role), as ``kube:<namespace>``, under the id ``kube_workload_id(kind, namespace, name, uid,
  tenant=...)``, minted for the namespace's tenant (stable for the object's lifetime, another for another kind
  of the same name; an object submitted before ids carried a tenant tag keeps the id it got then). A
  TrainJob's training runtime (``kind.references``) is fetched first.
- An object that is labelled but not held back, or that Muster cannot queue, gets one Warning Event
  ``NotSubmitted`` with the reason per generation of the object (as a refused Job does).
- Deleting the object (its deletion begins, or it is gone) cancels its job unless the job ended.
- The job's progress is told as Events on the object (``kube_feedback``: ``Queued``, ``Pending`` with why
  and when, ``Admitted``, ``Preempted``...). Never as status conditions: a custom resource's ``.status``
  (and a Deployment's, a StatefulSet's) belongs to its controller, which rewrites it whole.

Objects that carry a ``muster.dev/job-id`` other than their own kube-native id are Muster's own (created
from a job's manifest, through Muster): they are not submissions. An object whose id Muster wrote on it was
released by Muster: it is followed, never submitted again.

A group of plain Pods is read by listing its pods (the pods of its namespace with its group label, from the
watch's cache of pods labelled ``muster.dev/queue`` and ``muster.dev/pod-group``): it is submitted once all
its pods exist (``GroupIncomplete``: wait), under the group's name (a group has no uid: new pods of a group
whose job ended are not a new submission, and a ``NotSubmitted`` Event says to name the group anew; the same
identity lets the pods of a preempted group be re-created for its requeued job); its Events go to its first
pod by name. Deleting the group's last pod while it is still gated, not by Muster,
cancels the job; a released pod's deletion is the run's business (the node-state watcher reports it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from schemas.intents import CancelJob, SubmitJob
from schemas.kube import ADMISSION_GATE, DELETED_BY, JOB_ID, MUSTER, POD_GROUP, QUEUE
from schemas.status import TERMINAL_STATES
from services.gateway.context import GatewayContext
from services.gateway.kube_jobs import (
    FeedbackTarget,
    KubeJobFeedback,
    NotSubmittable,
    check_kube_submission,
    created_at,
)
from services.gateway.views import ConfigView
from services.runtime.kube import (
    ADDED,
    DELETED,
    MODIFIED,
    PODS,
    Informer,
    KubeObject,
    KubeRest,
    Resource,
    build_api_client,
    label_value,
)
from services.runtime.kube.errors import is_not_found, status_of
from services.runtime.kube.source import ApiEventSource
from services.spec.ids import kube_workload_id
from services.spec.kinds import (
    KINDS,
    GroupIncomplete,
    KindIdentity,
    NotQueueable,
    ObjectRef,
    WorkloadKind,
    kind_of,
    pod_group,
)
from services.spec.kinds.batch import JOB
from services.spec.kinds.pods import POD_GROUP_KIND, group_pods
from services.spec.kube_pods import pod_spec_of, scheduling_gates
from services.spec.workload_spec import object_meta, spec_from_workload

log = logging.getLogger(__name__)

#: how often kinds the API server does not serve are asked for again
RECHECK_S = 60.0
#: ... and how soon when the API server did not answer (unreachable, 5xx, 403)
INCONCLUSIVE_RECHECK_S = 5.0
#: every kind the watch submits: all but ``batch/v1`` Job, which ``kube_jobs`` submits
WATCHED_KINDS: tuple[WorkloadKind, ...] = tuple(k for k in KINDS if k is not JOB)
#: the pods of a group: labelled with a queue and a group
POD_GROUP_SELECTOR = f"{QUEUE},{POD_GROUP}"
_KEEP = 10_000  # refused and cancelled objects remembered at most

Fetch = Callable[[ObjectRef], Awaitable[KubeObject | None]]


def resource_of(identity: KindIdentity) -> Resource:
    """The REST resource of a kind."""
    return Resource(identity.api_version, identity.kind, identity.plural, identity.namespaced)


def workload_job_id(obj: Mapping[str, Any], tenant: str | None) -> str:
    """The job id of a kube-native workload object minted for ``tenant``, its namespace's (see
    ``kube_workload_id``); ``NotQueueable`` for an object of no known kind or without a name."""
    kind = kind_of(obj)
    meta = object_meta(obj)
    return kube_workload_id(kind.identity.kind, meta.namespace or "default", meta.name, meta.uid or "", tenant=tenant)


def _created(obj: Mapping[str, Any], now: datetime) -> datetime:
    """When the object was created; a pod group when its last pod was (it was complete then)."""
    if obj.get("kind") != "List":
        return created_at(obj.get("metadata") or {}, now)
    stamps = [created_at(p.get("metadata") or {}, now) for p in group_pods(obj)]
    return max(stamps) if stamps else now


def submission_from_workload(obj: Mapping[str, Any], related: Sequence[Mapping[str, Any]], config: ConfigView,
                             now: datetime) -> SubmitJob:
    """The ``SubmitJob`` for a held-back, labelled workload object (a ``List`` of a group's pods for a pod
    group); ``NotSubmittable`` says why not, ``GroupIncomplete`` that a pod group waits for more pods."""
    try:
        kind = kind_of(obj)
        why = kind.why_not_held(obj, related)
        if why is not None:
            raise NotSubmittable(why)
        meta = object_meta(obj)
        namespace = meta.namespace or "default"
        tenant = config.tenant_of_namespace(namespace)
        if tenant is None:
            raise NotSubmittable(f"namespace {namespace!r} belongs to no tenant")
        spec = spec_from_workload(obj, related, kube_native=True)
    except GroupIncomplete:
        raise
    except NotQueueable as exc:
        raise NotSubmittable(exc.reason) from None
    who = check_kube_submission(spec, tenant.name, namespace, config)
    return SubmitJob(job_id=kube_workload_id(kind.identity.kind, namespace, meta.name, meta.uid or "",
                                             tenant=tenant.name),
                     tenant=tenant.name, user=who.user, spec=spec, submitted_at=_created(obj, now))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def marked_job(obj: Mapping[str, Any]) -> str | None:
    """The job id Muster wrote on the object (annotation, else label), if any."""
    meta = _meta(obj)
    return (meta.get("annotations") or {}).get(JOB_ID) or (meta.get("labels") or {}).get(JOB_ID)


def _digest(parts: Iterable[str]) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:10]


class KubeWorkloadSubmitter:
    """Informer handlers: publish each held-back object's job once (the status view and the recent record
    dedupe), refuse the others with an Event, cancel the job of a deleted object, and tell ``feedback`` (when
    given) which object is which job. ``fetch`` reads an object a kind refers to (None when it is missing)."""

    def __init__(self, ctx: GatewayContext, feedback: KubeJobFeedback | None = None,
                 fetch: Fetch | None = None) -> None:
        self._ctx = ctx
        self._feedback = feedback
        self._fetch = fetch
        self._refused: dict[str, str] = {}  # object key -> version already refused (told once)
        self._cancelled: set[str] = set()  # job ids whose cancel was published

    # -- entry points ------------------------------------------------------------------------------------
    def handler(self, kind: WorkloadKind) -> Callable[[str, KubeObject], Awaitable[None]]:
        """The informer handler of one (object) kind."""

        async def handle(event: str, obj: KubeObject) -> None:
            await self.on_object(kind, event, obj)

        return handle

    async def on_object(self, kind: WorkloadKind, event: str, obj: KubeObject) -> None:
        meta = _meta(obj)
        if not meta.get("name"):
            return
        namespace, name, uid = str(meta.get("namespace") or "default"), str(meta["name"]), str(meta.get("uid") or "")
        identity = kind.identity
        job_id = self._job_id(identity.kind, namespace, name, uid)
        marked = marked_job(obj)
        if marked is not None and marked not in (job_id, label_value(job_id)):
            return  # an object Muster created for another job (through Muster)
        key = f"{identity.kind} {namespace}/{name}"
        if event == DELETED or meta.get("deletionTimestamp"):
            await self._withdrawn(job_id, namespace, key)
            return
        if event not in (ADDED, MODIFIED):
            return
        target = FeedbackTarget(identity.api_version, identity.kind, namespace, name, uid)
        await self._consider(kind, obj, job_id, marked is not None, target, key,
                             version=str(meta.get("resourceVersion", "")), generation=str(meta.get("generation", "")))

    async def on_pod(self, event: str, pod: KubeObject, members: Callable[[str, str], list[KubeObject]]) -> None:
        """A pod of a group changed; ``members(namespace, group)`` lists the group's pods now."""
        meta = _meta(pod)
        group = str((meta.get("labels") or {}).get(POD_GROUP) or "")
        if not group:
            return
        namespace = str(meta.get("namespace") or "default")
        job_id = self._job_id(POD_GROUP_KIND.identity.kind, namespace, group, "")
        marked = marked_job(pod)
        if marked is not None and marked not in (job_id, label_value(job_id)):
            return
        key = f"pod group {namespace}/{group}"
        live = group_pods(pod_group(members(namespace, group)))
        if event == DELETED or meta.get("deletionTimestamp"):
            gated = ADMISSION_GATE in scheduling_gates(pod_spec_of(pod))
            by_muster = (meta.get("annotations") or {}).get(DELETED_BY) == MUSTER
            if not live and gated and not by_muster:
                await self._withdrawn(job_id, namespace, key)
            elif not live and self._feedback is not None:
                self._feedback.forget(job_id)
            return
        if event not in (ADDED, MODIFIED) or not live:
            return
        first = _meta(live[0])
        target = FeedbackTarget("v1", "Pod", namespace, str(first.get("name")), str(first.get("uid") or ""))
        pods_marked = any(marked_job(p) == job_id for p in live)
        version = _digest(f"{_meta(p).get('name')}={_meta(p).get('resourceVersion')}" for p in live)
        generation = _digest(sorted(str(_meta(p).get("uid") or _meta(p).get("name")) for p in live))
        ended = self._ctx.status.get(job_id)
        if ended is not None and ended.state in TERMINAL_STATES and not pods_marked:
            # new pods under the name of a group whose job ended: a group is known by its name only
            await self._refuse(key, version, target, generation, NotSubmittable(
                f"{key}: the job of this group, {job_id}, already ended ({ended.state}); a pod group is known by "
                f"its name: give the new pods another {POD_GROUP} label"))
            return
        await self._consider(POD_GROUP_KIND, pod_group(live), job_id, pods_marked, target, key, version=version,
                             generation=generation)

    # -- the steps -----------------------------------------------------------------------------------------
    def _known(self, job_id: str) -> bool:
        return job_id in self._ctx.status or self._ctx.recent.get(job_id) is not None

    def _job_id(self, kind: str, namespace: str, name: str, uid: str) -> str:
        """The object's job id: minted for its namespace's tenant, or the id without a tenant tag when the object
        was submitted under it (before ids carried tags) or its namespace belongs to no tenant."""
        untagged = kube_workload_id(kind, namespace, name, uid, tenant=None)
        tenant = self._ctx.config.tenant_of_namespace(namespace)
        if tenant is None or self._known(untagged):
            return untagged
        return kube_workload_id(kind, namespace, name, uid, tenant=tenant.name)

    def _track(self, job_id: str, target: FeedbackTarget) -> None:
        if self._feedback is not None:
            self._feedback.track_object(job_id, target)

    async def _consider(self, kind: WorkloadKind, obj: KubeObject, job_id: str, released: bool,
                        target: FeedbackTarget, key: str, *, version: str, generation: str) -> None:
        ctx = self._ctx
        if self._known(job_id) or released:
            self._track(job_id, target)  # submitted before (or released by Muster): followed, not submitted again
            return
        if self._refused.get(key) == version:
            return
        related = await self._related(kind, obj)
        try:
            submission = submission_from_workload(obj, related, ctx.config, ctx.now())
        except GroupIncomplete as exc:
            log.debug("%s waits: %s", key, exc.reason)
            return
        except NotSubmittable as exc:
            await self._refuse(key, version, target, generation, exc)
            return
        await ctx.publish_intent(submission)
        ctx.recent.record(submission)
        self._refused.pop(key, None)
        self._cancelled.discard(job_id)
        ctx.metrics.submissions.labels("kube", "accepted").inc()
        log.info("submitted %s as %s to queue %s (%d roles)", key, submission.job_id, submission.spec.queue,
                 len(submission.spec.roles))
        self._track(job_id, target)

    async def _refuse(self, key: str, version: str, target: FeedbackTarget, generation: str,
                      exc: NotSubmittable) -> None:
        """Log and count the refusal, and tell it on the object once per generation (once per version here)."""
        if self._refused.get(key) == version:
            return
        self._remember_refusal(key, version)
        log.warning("%s not submitted: %s", key, exc)
        self._ctx.metrics.submissions.labels("kube", "refused").inc()
        if self._feedback is not None:
            await self._feedback.refused_object(target, generation, str(exc))

    async def _related(self, kind: WorkloadKind, obj: KubeObject) -> list[KubeObject]:
        """The objects the kind's roles need (a TrainJob's runtime), those that exist."""
        found: list[KubeObject] = []
        if self._fetch is None:
            return found
        for ref in kind.references(obj):
            got = await self._fetch(ref)
            if got is not None:
                found.append(got)
        return found

    def _remember_refusal(self, key: str, version: str) -> None:
        if len(self._refused) >= _KEEP:
            self._refused.clear()
        self._refused[key] = version

    async def _withdrawn(self, job_id: str, namespace: str, key: str) -> None:
        """The object is deleted (or being deleted): its job is cancelled unless it ended or is unknown."""
        if self._feedback is not None:
            self._feedback.forget(job_id)
        self._refused.pop(key, None)
        if job_id in self._cancelled:
            return
        status = self._ctx.status.get(job_id)
        if status is None and self._ctx.recent.get(job_id) is None:
            return
        if status is not None and status.state in TERMINAL_STATES:
            return
        await self._ctx.publish_intent(CancelJob(job_id=job_id, requested_by=f"kube:{namespace}",
                                                 reason=f"{key} was deleted"))
        if len(self._cancelled) >= _KEEP:
            self._cancelled.clear()
        self._cancelled.add(job_id)
        log.info("cancelled %s: %s was deleted", job_id, key)


async def served(rest: KubeRest, resource: Resource) -> bool | str:
    """Whether the API server serves the resource: False on 404 (its CRD is not installed); what went wrong
    when the answer says neither (unreachable, 5xx, 403 for want of RBAC: ask again later)."""
    try:
        await rest.request("GET", resource.collection_path(), query=[("limit", "1")], retry=False)
    except Exception as exc:
        if is_not_found(exc):
            return False
        return f"{exc!r}" if status_of(exc) is None else f"HTTP {status_of(exc)}"
    return True


def fetcher(rest: KubeRest) -> Fetch:
    """Reads a referred object through ``rest``; None when it does not exist."""

    async def fetch(ref: ObjectRef) -> KubeObject | None:
        try:
            return await rest.get(resource_of(ref.identity), ref.name, ref.namespace)
        except Exception as exc:
            if is_not_found(exc) or status_of(exc) == 404:
                return None
            raise

    return fetch


class WorkloadWatch:
    """Discovery and the informers: one per served kind (the pods of groups for ``v1`` Pod), started as the
    kinds appear (asked again every ``recheck_s``, sooner after an answer that said nothing), all stopped at
    ``stop``. A kind whose CRD is removed later keeps its informer, which retries with backoff."""

    def __init__(self, rest: KubeRest, submitter: KubeWorkloadSubmitter,
                 kinds: Sequence[WorkloadKind] = WATCHED_KINDS, *, recheck_s: float = RECHECK_S) -> None:
        self._rest = rest
        self._submitter = submitter
        self._waiting = list(kinds)
        self._recheck_s = recheck_s
        self._told_missing: set[str] = set()
        self._told_unsure: set[str] = set()
        self.informers: dict[str, Informer] = {}  # kind -> its informer

    def _informer(self, kind: WorkloadKind) -> Informer:
        if kind is POD_GROUP_KIND:
            informer = Informer(ApiEventSource(self._rest, PODS, label_selector=POD_GROUP_SELECTOR))

            def members(namespace: str, group: str) -> list[KubeObject]:
                return [p for p in informer.items() if _meta(p).get("namespace") == namespace
                        and (_meta(p).get("labels") or {}).get(POD_GROUP) == group]

            async def on_pod(event: str, pod: KubeObject) -> None:
                await self._submitter.on_pod(event, pod, members)

            informer.add_handler(on_pod)
            return informer
        informer = Informer(ApiEventSource(self._rest, resource_of(kind.identity), label_selector=QUEUE))
        informer.add_handler(self._submitter.handler(kind))
        return informer

    async def _discover(self) -> bool:
        """Start the informers of the kinds served now; whether every answer was conclusive."""
        conclusive = True
        for kind in list(self._waiting):
            identity = kind.identity
            answer = True if kind is POD_GROUP_KIND else await served(self._rest, resource_of(identity))
            if isinstance(answer, str):
                conclusive = False
                if identity.kind not in self._told_unsure:  # once: a missing RBAC rule would say it every time
                    self._told_unsure.add(identity.kind)
                    log.warning("cannot tell whether %s (%s) is served (%s); asking again", identity.kind,
                                identity.api_version, answer)
                continue
            if not answer:
                if identity.kind not in self._told_missing:
                    self._told_missing.add(identity.kind)
                    log.info("%s (%s) is not served by the API server (its CRD is not installed): not watched; "
                             "asked again every %.0f s", identity.kind, identity.api_version, self._recheck_s)
                continue
            self._waiting.remove(kind)
            informer = self._informer(kind)
            self.informers[identity.kind] = informer
            informer.start()
            log.info("watching %s (%s) labelled %s in every namespace", identity.plural, identity.api_version,
                     POD_GROUP_SELECTOR if kind is POD_GROUP_KIND else QUEUE)
        return conclusive

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                conclusive = await self._discover()
                if not self._waiting:
                    await stop.wait()
                    return
                pause = self._recheck_s if conclusive else min(self._recheck_s, INCONCLUSIVE_RECHECK_S)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
        finally:
            for informer in self.informers.values():
                await informer.stop()


async def watch_kube_workloads(ctx: GatewayContext, server: str | None, stop: asyncio.Event, *,
                               kubeconfig: str | None = None, kinds: Sequence[WorkloadKind] = WATCHED_KINDS,
                               recheck_s: float = RECHECK_S) -> None:
    """Watch labelled workload objects of every served kind in every namespace until ``stop``; ``server``
    None means ``kubeconfig``, then KUBECONFIG / in-cluster."""
    api = await build_api_client(server, kubeconfig=kubeconfig)
    async with api:
        rest = KubeRest(api)
        feedback = KubeJobFeedback(rest, ctx.status, ctx.now)
        ctx.status_listeners.append(feedback.on_status)
        watch = WorkloadWatch(rest, KubeWorkloadSubmitter(ctx, feedback, fetcher(rest)), kinds, recheck_s=recheck_s)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(feedback.run(stop))
                group.create_task(watch.run(stop))
        finally:
            ctx.status_listeners.remove(feedback.on_status)

