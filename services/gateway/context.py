"""Everything the API handlers use, in one object, and the operations that publish."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.api import JobEvents, JobView
from schemas.codec import MAX_MESSAGE_BYTES, encode
from schemas.config import ConfigItemDeleted
from schemas.envelope import Envelope, Message, make_envelope
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec
from schemas.status import TERMINAL_STATES
from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC
from services.gateway.action_answers import ActionAnswers
from services.gateway.auth import Principal, TokenTable
from services.gateway.configs import defined_message
from services.gateway.dashboard_state import DashboardFeeds, DashboardState
from services.gateway.errors import ApiError
from services.gateway.metrics import GatewayMetrics
from services.gateway.presenters import job_from_status, job_from_submission
from services.gateway.publisher import Publisher
from services.gateway.submission_rules import SubmissionPlan, plan_submission, with_growth
from services.gateway.submissions import RecentSubmissions
from services.gateway.tenant_queues import PendingQueues
from services.gateway.views import ConfigItem, ConfigKind, ConfigView, StatusView, UsageView
from services.runtime.clock import Clock, utc_now
from services.spec.ids import random_job_id

log = logging.getLogger(__name__)

SERVICE = "gateway"
#: the largest envelope the gateway publishes: consumers refuse more than MAX_MESSAGE_BYTES, and the
#: producer's request limit (1 MiB) also carries the key, headers and record overhead
MAX_ENVELOPE_BYTES = MAX_MESSAGE_BYTES - 4096




@dataclass
class GatewayContext:
    tokens: TokenTable
    publisher: Publisher
    metrics: GatewayMetrics
    status: StatusView = field(default_factory=StatusView)
    config: ConfigView = field(default_factory=ConfigView)
    usage: UsageView = field(default_factory=UsageView)
    recent: RecentSubmissions = field(default_factory=RecentSubmissions)
    dashboard: DashboardState = field(default_factory=DashboardState)
    now: Clock = utc_now
    fresh_id: Callable[[str], str] = random_job_id
    #: tenant administrators' queue changes published and not yet read back (``services.gateway.tenant_queues``)
    pending_queues: PendingQueues = field(default_factory=PendingQueues)
    #: told of every change of the status view after it is folded in (the kube-native Jobs' feedback)
    status_listeners: list[Callable[[str, Envelope | None], None]] = field(default_factory=list)
    #: the queue manager's answers to requests about jobs, by request (``services.gateway.action_answers``)
    answers: ActionAnswers = field(default_factory=ActionAnswers)

    def status_changed(self, key: str, envelope: Envelope | None) -> None:
        self.answers.apply(key, envelope)
        for listener in list(self.status_listeners):
            listener(key, envelope)

    def dashboard_feeds(self) -> DashboardFeeds:
        """The change callbacks of the compacted tables: each folds into the views and the dashboard's
        state and tells the live streams."""

        def tenant_of_queue(name: str) -> str | None:
            queue = self.config.queue(name)
            return queue.tenant if queue is not None else None

        return DashboardFeeds(self.dashboard, self.status.apply, self.usage.apply, self.status.get, tenant_of_queue)

    # ---------------------------------------------------------------- jobs

    def visible_job(self, job_id: str, principal: Principal) -> JobView:
        """The job as the caller may see it; 404 when unknown or another tenant's (existence is not revealed)."""
        status = self.status.get(job_id)
        if status is not None:
            if principal.owns(status.tenant):
                return job_from_status(status)
        else:
            entry = self.recent.get(job_id)
            if entry is not None and principal.owns(entry.submission.tenant):
                return job_from_submission(entry)
        raise ApiError(404, "not_found", f"no job {job_id!r}", field="job_id")

    def job_events(self, job_id: str, spec: JobSpec | None = None) -> JobEvents:
        """The job's Kubernetes objects and events (the caller has checked that the job is visible)."""
        if spec is None:
            record = self.dashboard.records.get(job_id)
            entry = self.recent.get(job_id)
            spec = record.submission.spec if record is not None else (entry.submission.spec if entry else None)
        gpus = spec.resources.gpus if spec is not None else 0
        return self.dashboard.runs.events(job_id, self.status.history(job_id), gpus)

    def visible_jobs(self, principal: Principal) -> list[JobView]:
        """Every job the caller may see: the status view, plus recent submissions it does not show yet."""
        views = [job_from_status(s) for s in self.status.jobs() if principal.owns(s.tenant)]
        views += [job_from_submission(e) for e in self.recent.all()
                  if e.submission.job_id not in self.status and principal.owns(e.submission.tenant)]
        return views

    async def submit(self, spec: JobSpec, principal: Principal, idempotency_key: str | None,
                     *, source: str = "api") -> tuple[SubmissionPlan, JobView]:
        try:
            sizes = with_growth(self.dashboard.nodes.sizes, self.config.clusters())
            plan = plan_submission(spec, principal, idempotency_key, self.config, self.status, self.recent,
                                   self.fresh_id, sizes)
        except ApiError as exc:
            self.metrics.submissions.labels(source, exc.error).inc()
            raise
        if plan.new:
            submission = SubmitJob(job_id=plan.job_id, tenant=plan.tenant, user=principal.user, spec=plan.spec,
                                   submitted_at=self.now(), idempotency_key=idempotency_key)
            await self.publish_intent(submission)
            self.recent.record(submission)
            log.info("submitted job %s to queue %s for tenant %s (%s)", plan.job_id, spec.queue, plan.tenant,
                     source)
        self.metrics.submissions.labels(source, "accepted" if plan.new else "duplicate").inc()
        return plan, self.visible_job(plan.job_id, principal)

    async def _publish(self, topic: str, envelope: Envelope) -> None:
        size = len(encode(envelope))
        if size > MAX_ENVELOPE_BYTES:
            raise ApiError(413, "too_large", f"the request encodes to {size} bytes; the limit is "
                           f"{MAX_ENVELOPE_BYTES} (large values belong in a config map or volume, not the spec)")
        try:
            await self.publisher.publish(topic, envelope)
        except Exception as exc:
            log.error("publishing %s onto %s failed: %r", envelope.type, topic, exc)
            raise ApiError(503, "unavailable", "the message broker did not accept the request; retry "
                           "(with the same Idempotency-Key for submissions)", headers={"Retry-After": "2"}) from exc

    async def publish_intent(self, message: Message) -> Envelope:
        envelope = make_envelope(message, SERVICE)
        await self._publish(INTENTS_TOPIC, envelope)
        self.metrics.intents.labels(message.TYPE).inc()
        return envelope

    async def act(self, job_id: str, principal: Principal, build: Callable[[JobView], Message]) -> Envelope:
        """Publish an intent about a visible, unfinished job (its answer: ``answers``)."""
        job = self.visible_job(job_id, principal)
        if job.state in TERMINAL_STATES:
            raise ApiError(409, "job_finished", f"job {job_id} is already {job.state}", field="job_id")
        return await self.publish_intent(build(job))

    # ---------------------------------------------------------------- configuration

    async def publish_config(self, message: Message, kind: str, origin: str) -> Envelope:
        """Publish a message onto the config topic (503 when the broker does not take it)."""
        envelope = make_envelope(message, SERVICE)
        await self._publish(CONFIG_TOPIC, envelope)
        self.metrics.config_changes.labels(kind, origin).inc()
        return envelope

    async def define(self, kind: ConfigKind, item: ConfigItem, *, origin: str = "api") -> Envelope | None:
        """Publish ``item`` unless the config view already holds an equal one; the envelope, or None."""
        if self.config.item(kind, item.name) == item:
            return None
        return await self.publish_config(defined_message(kind, item), kind, origin)

    async def undefine(self, kind: ConfigKind, name: str) -> Envelope:
        return await self.publish_config(ConfigItemDeleted(kind=kind, name=name), kind, "delete")
