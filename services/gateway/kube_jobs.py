"""Kube-native submissions: ``batch/v1`` Jobs labelled ``muster.dev/queue`` and created with ``suspend: true``
become ``SubmitJob`` intents (the pattern Kueue uses). The dispatcher unsuspends the object once admitted;
the spec carries ``muster.dev/source-job: <namespace>/<name>`` so it knows the object already exists.

The first container's environment travels in the spec as the HTTP path's would: ``valueFrom.secretKeyRef``
as a reference (never resolved: the gateway does not read Secrets), ``envFrom.secretRef`` as ``env_from``,
plain values as values. A plain value that looks like a secret is refused, as at the HTTP door, unless the
Job's ``muster.dev/plain-env`` annotation names the entry. Other sources (``fieldRef``, ``configMapKeyRef``...)
are not carried: the Job runs as its owner wrote it."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from schemas.envelope import Envelope
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec, PodTemplate
from schemas.kube import JOB_ID, PLAIN_ENV, QUEUE, SOURCE_JOB
from schemas.status import JobStatusChanged
from services.gateway import kube_feedback
from services.gateway.auth import Principal
from services.gateway.context import GatewayContext
from services.gateway.errors import ApiError
from services.gateway.submission_rules import check_spec, queue_for_submission
from services.gateway.views import ConfigView, StatusView
from services.runtime.clock import Clock
from services.runtime.kube import ADDED, DELETED, EVENTS, JOBS, MODIFIED, KubeRest, build_api_client, job_cache, update
from services.runtime.kube.errors import is_already_exists, is_not_found
from services.runtime.service import unless_stopped
from services.spec.ids import kube_job_id
from services.spec.kube_annotations import parse_runtime_estimate, submission_annotations
from services.spec.kube_pods import container_resources, env_from_secrets, env_vars, security
from services.spec.secret_env import spec_plain_secrets

log = logging.getLogger(__name__)

FEEDBACK_COMPONENT = "muster-gateway"
NOT_SUBMITTED = "NotSubmitted"  # the reason of the Warning Event on a labelled Job that was refused
ENDS_KEPT = 10_000  # ended jobs whose end the feedback remembers having told


class NotSubmittable(ValueError):
    """The object cannot become a submission; the message says why (logged, never raised to the watch)."""


def parse_duration_s(text: str) -> float:
    """``"3600"``, ``"90m"``, ``"6h"``, ``"2d"`` in seconds (``kube_annotations.parse_runtime_estimate``)."""
    try:
        return parse_runtime_estimate(text)
    except ValueError as exc:
        raise NotSubmittable(str(exc)) from None


def spec_from_job(obj: dict[str, Any]) -> JobSpec:
    """The job spec a labelled ``batch/v1`` Job describes (first container of its pod template)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    containers = pod.get("containers") or []
    if not containers:
        raise NotSubmittable("the pod template has no containers")
    container = containers[0]
    node_selector: dict[str, str] = pod.get("nodeSelector") or {}
    try:
        fields = submission_annotations(meta.get("annotations") or {})
    except ValueError as exc:
        raise NotSubmittable(str(exc)) from None
    try:
        return JobSpec(
            name=meta["name"],
            queue=(meta.get("labels") or {})[QUEUE],
            priority_class=fields.priority_class,
            replicas=int(spec.get("parallelism") or 1),
            template=PodTemplate(
                image=container.get("image", ""),
                command=list(container.get("command") or []),
                args=list(container.get("args") or []),
                env=env_vars(container, fields.plain_env),
                env_from=env_from_secrets(container),
                resources=container_resources(container, node_selector),
                working_dir=container.get("workingDir"),
                security=security(pod),
            ),
            node_selector=node_selector,
            runtime_estimate_s=fields.runtime_estimate_s,
            preemptible=fields.preemptible,
            annotations={SOURCE_JOB: f"{meta.get('namespace', 'default')}/{meta['name']}"},
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise NotSubmittable(f"{where}: {first['msg']}") from None
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, NotSubmittable):
            raise
        raise NotSubmittable(f"unreadable Job: {exc!r}") from None


def submission_from_job(obj: dict[str, Any], config: ConfigView, now: datetime) -> SubmitJob:
    """The ``SubmitJob`` for a suspended, labelled Job; ``NotSubmittable`` says why not."""
    meta = obj.get("metadata") or {}
    if not (obj.get("spec") or {}).get("suspend"):
        raise NotSubmittable("not created with spec.suspend: true")
    namespace = str(meta.get("namespace") or "default")
    tenant = config.tenant_of_namespace(namespace)
    if tenant is None:
        raise NotSubmittable(f"namespace {namespace!r} belongs to no tenant")
    spec = spec_from_job(obj)
    who = check_kube_submission(spec, tenant.name, namespace, config)
    return SubmitJob(job_id=kube_job_id(namespace, meta["name"], str(meta.get("uid", "")), tenant=tenant.name),
                     tenant=tenant.name, user=who.user, spec=spec, submitted_at=created_at(meta, now))


def check_kube_submission(spec: JobSpec, tenant: str, namespace: str, config: ConfigView) -> Principal:
    """The HTTP door's checks for a spec read from an object of ``namespace`` (its tenant's): the queue is the
    tenant's, the spec passes ``check_spec`` (priority class, security, non-preemptible work, roles), and no
    role carries a plain value that looks like a secret. The principal it is submitted as (``kube:<namespace>``,
    a member); ``NotSubmittable`` says which check failed."""
    who = Principal(tenant, f"kube:{namespace}", "member")
    try:
        queue = queue_for_submission(spec, who, config)
        check_spec(spec, queue, config)
    except ApiError as exc:
        raise NotSubmittable(f"{exc.field}: {exc.detail}") from None
    plain = spec_plain_secrets(spec)
    if plain:
        names = ", ".join(p.name for p in plain)
        raise NotSubmittable(f"env {names}: looks like a secret ({plain[0].why}) but is a plain value, which Muster "
                             "would carry in clear text: read it from a Secret (valueFrom.secretKeyRef or "
                             f"envFrom.secretRef), or name it in the {PLAIN_ENV} annotation if it is not a secret")
    return who


def created_at(meta: dict[str, Any], now: datetime) -> datetime:
    """When the object was created (``metadata.creationTimestamp``), else ``now``."""
    created = meta.get("creationTimestamp")
    return datetime.fromisoformat(created.replace("Z", "+00:00")) if isinstance(created, str) else now


@dataclass(frozen=True, slots=True)
class FeedbackTarget:
    """The object a kube-native job's Events are about (their ``involvedObject``), and whether Muster also
    writes its two conditions into the object's status: only a ``batch/v1`` Job's, whose status the Job
    controller shares. A custom resource's (or a Deployment's, a pod's) status belongs to its own controller,
    which replaces it whole: Muster tells those objects' owners through Events only."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    conditions: bool = False

    @classmethod
    def job(cls, namespace: str, name: str, uid: str) -> FeedbackTarget:
        return cls("batch/v1", "Job", namespace, name, uid, conditions=True)


class KubeJobFeedback:
    """Writes ``kube_feedback``'s Events onto the kube-native jobs' own objects, and its conditions onto the
    status of those that are ``batch/v1`` Jobs (``FeedbackTarget``).

    The submitters ``track`` each object; the status view's changes wake the job; one task
    (``run``) writes, a job at a time, from its latest status (quick successions fold into one write).
    A job first seen with a status older than this gateway gets its conditions only: its Events were
    told by the gateway before. The end of a job is told once: its object, seen again afterwards (an
    object a cancel left in place, changed by its controller or its owner), is not told it again (the
    most recent ``ENDS_KEPT`` ends are remembered). Writing is best effort: a refusal is logged, never
    retried for ever.
    """

    def __init__(self, rest: KubeRest, status: StatusView, now: Clock) -> None:
        self._rest = rest
        self._status = status
        self._now = now
        self._started = now()
        self._objects: dict[str, FeedbackTarget] = {}  # job id -> the object told
        self._told: dict[str, JobStatusChanged] = {}  # job id -> the status last written
        self._ended: OrderedDict[str, JobStatusChanged] = OrderedDict()  # job id -> the end told
        self._wanted: asyncio.Queue[str] = asyncio.Queue()
        self._waiting: set[str] = set()
        self.written = 0  # Events and status updates sent (for tests and logs)

    def track(self, job_id: str, namespace: str, name: str, uid: str) -> None:
        """Tell the job's feedback to its ``batch/v1`` Job."""
        self.track_object(job_id, FeedbackTarget.job(namespace, name, uid))

    def track_object(self, job_id: str, target: FeedbackTarget) -> None:
        """Tell the job's feedback to ``target``."""
        if self._objects.get(job_id) != target:
            self._objects[job_id] = target
            self._wake(job_id)

    def tracking(self, job_id: str) -> FeedbackTarget | None:
        return self._objects.get(job_id)

    def forget(self, job_id: str) -> None:
        self._objects.pop(job_id, None)
        self._told.pop(job_id, None)

    def on_status(self, key: str, envelope: Envelope | None) -> None:
        if key in self._objects:
            self._wake(key)

    def _wake(self, job_id: str) -> None:
        if job_id not in self._waiting:
            self._waiting.add(job_id)
            self._wanted.put_nowait(job_id)

    async def refused(self, namespace: str, name: str, uid: str, generation: str, why: str) -> None:
        """A Warning Event ``NotSubmitted`` on the Job saying why it was not submitted (``kubectl describe job``)."""
        await self.refused_object(FeedbackTarget.job(namespace, name, uid), generation, why)

    async def refused_object(self, target: FeedbackTarget, generation: str, why: str) -> None:
        """A Warning Event ``NotSubmitted`` on the object saying why it was not submitted (``kubectl describe``).
        One per generation of the object (a change of its spec may fix it; a change of its status does not):
        every gateway replica, and a restarted one, writes the same Event name, and AlreadyExists is success.
        Best effort, as the other feedback."""
        event = kube_feedback.KubeEvent("Warning", NOT_SUBMITTED, why[:kube_feedback.MAX_MESSAGE])
        body = target_event(target, event, self._now())
        uid_part = "".join(c for c in target.uid.lower() if c.isascii() and c.isalnum())[:8] or "job"
        body["metadata"] = {"name": f"{target.name}.{uid_part}.not-submitted.{generation or '0'}",
                            "namespace": target.namespace}
        try:
            await self._rest.create(EVENTS, body)
            self.written += 1
        except Exception as exc:
            if not is_already_exists(exc):
                log.warning("refusal of %s %s/%s not written: %s", target.kind, target.namespace, target.name, exc)

    async def run(self, stop: asyncio.Event) -> None:
        while True:
            getting = asyncio.ensure_future(self._wanted.get())
            if not await unless_stopped(stop, getting):
                return
            job_id = getting.result()
            self._waiting.discard(job_id)
            try:
                await self._write(job_id)
            except Exception as exc:
                log.warning("feedback on the object of %s not written: %s", job_id, exc)

    async def _write(self, job_id: str) -> None:
        status = self._status.get(job_id)
        target = self._objects.get(job_id)
        if status is None or target is None:
            return
        previous = self._told.get(job_id) or self._ended.get(job_id)
        if previous is not None and (previous.state, previous.reason, previous.attempt, previous.position,
                                     previous.estimated_start, previous.last_action) == (
                status.state, status.reason, status.attempt, status.position, status.estimated_start,
                status.last_action):
            if job_id in self._ended:
                self.forget(job_id)  # its end was told: seen again, nothing more to tell
            return
        now = self._now()
        told_before = previous is None and status.updated_at < self._started
        for event in ([] if told_before else kube_feedback.events(status, previous, now)):
            await self._rest.create(EVENTS, target_event(target, event, now))
            self.written += 1
        if target.conditions:
            wanted = kube_feedback.conditions(status, now)

            def set_conditions(job: dict[str, Any]) -> None:
                job_status = job.setdefault("status", {})
                job_status["conditions"] = kube_feedback.merged_conditions(job_status.get("conditions") or [],
                                                                           wanted, now)

            try:
                await update(self._rest, JOBS, target.name, set_conditions, target.namespace, subresource="status")
                self.written += 1
            except Exception as exc:
                if is_not_found(exc):
                    self.forget(job_id)
                    return
                raise
        self._told[job_id] = status
        if kube_feedback.ended(status):
            self.forget(job_id)
            self._ended[job_id] = status
            while len(self._ended) > ENDS_KEPT:
                self._ended.popitem(last=False)


def kube_event(namespace: str, name: str, uid: str, event: kube_feedback.KubeEvent,
               now: datetime) -> dict[str, Any]:
    """A core/v1 Event about the Job ``namespace/name`` (shown by ``kubectl describe job``)."""
    return target_event(FeedbackTarget.job(namespace, name, uid), event, now)


def target_event(target: FeedbackTarget, event: kube_feedback.KubeEvent, now: datetime) -> dict[str, Any]:
    """A core/v1 Event about ``target`` (shown by ``kubectl describe`` of that object)."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{target.name}.", "namespace": target.namespace},
        "involvedObject": {"apiVersion": target.api_version, "kind": target.kind, "name": target.name,
                           "namespace": target.namespace, "uid": target.uid},
        "type": event.type, "reason": event.reason, "message": event.message,
        "source": {"component": FEEDBACK_COMPONENT}, "reportingComponent": FEEDBACK_COMPONENT,
        "reportingInstance": FEEDBACK_COMPONENT, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }


class KubeJobSubmitter:
    """Informer handler: publishes each new suspended Job once (the status view and recent record dedupe),
    and tells ``feedback`` (when given) which Job is which job."""

    def __init__(self, ctx: GatewayContext, feedback: KubeJobFeedback | None = None) -> None:
        self._ctx = ctx
        self._feedback = feedback
        self._refused: dict[str, str] = {}  # object key -> resourceVersion already refused (logged once)

    def _known(self, job_id: str) -> bool:
        return job_id in self._ctx.status or self._ctx.recent.get(job_id) is not None

    def _job_id(self, namespace: str, name: str, uid: str) -> str:
        """The Job's job id: minted for its namespace's tenant, or the id without a tenant tag when the Job was
        submitted under it (before ids carried tags) or its namespace belongs to no tenant."""
        untagged = kube_job_id(namespace, name, uid, tenant=None)
        tenant = self._ctx.config.tenant_of_namespace(namespace)
        if tenant is None or self._known(untagged):
            return untagged
        return kube_job_id(namespace, name, uid, tenant=tenant.name)

    async def handle(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if JOB_ID in (meta.get("annotations") or {}) or JOB_ID in (meta.get("labels") or {}):
            return  # a Job Muster itself runs (a new revision waits suspended for the old one's pods)
        if self._feedback is not None and meta.get("name"):
            namespace, name, uid = str(meta.get("namespace") or "default"), str(meta["name"]), str(meta.get("uid", ""))
            job_id = self._job_id(namespace, name, uid)
            if event == DELETED:
                self._feedback.forget(job_id)
            else:
                self._feedback.track(job_id, namespace, name, uid)
        if event not in (ADDED, MODIFIED):
            return
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        version = str(meta.get("resourceVersion", ""))
        if self._refused.get(key) == version:
            return
        ctx = self._ctx
        try:
            submission = submission_from_job(obj, ctx.config, ctx.now())
        except NotSubmittable as exc:
            self._refused[key] = version
            if (obj.get("spec") or {}).get("suspend"):
                log.warning("Job %s not submitted: %s", key, exc)
                ctx.metrics.submissions.labels("kube", "refused").inc()
                if self._feedback is not None and meta.get("name"):
                    await self._feedback.refused(str(meta.get("namespace") or "default"), str(meta["name"]),
                                                 str(meta.get("uid", "")), str(meta.get("generation", "")), str(exc))
            return
        namespace, name, uid = str(meta.get("namespace") or "default"), str(meta["name"]), str(meta.get("uid", ""))
        if self._known(submission.job_id) or self._known(kube_job_id(namespace, name, uid, tenant=None)):
            return  # submitted before (under the id without a tenant tag, when that was before ids carried one)
        await ctx.publish_intent(submission)
        ctx.recent.record(submission)
        self._refused.pop(key, None)
        ctx.metrics.submissions.labels("kube", "accepted").inc()
        log.info("submitted Job %s as %s to queue %s", key, submission.job_id, submission.spec.queue)


async def watch_kube_jobs(ctx: GatewayContext, server: str | None, stop: asyncio.Event, *,
                          kubeconfig: str | None = None) -> None:
    """Watch labelled Jobs in every namespace until ``stop``; ``server`` None means ``kubeconfig``, then
    KUBECONFIG / in-cluster."""
    api = await build_api_client(server, kubeconfig=kubeconfig)
    async with api:
        rest = KubeRest(api)
        feedback = KubeJobFeedback(rest, ctx.status, ctx.now)
        ctx.status_listeners.append(feedback.on_status)
        informer = job_cache(rest, label_selector=QUEUE)
        informer.add_handler(KubeJobSubmitter(ctx, feedback).handle)
        try:
            async with informer:
                await feedback.run(stop)
        finally:
            ctx.status_listeners.remove(feedback.on_status)
