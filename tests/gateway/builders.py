"""Builders for the gateway tests: an in-memory publisher, tokens, a configured context and app."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from schemas.config import (
    CohortConfig,
    MusterConfig,
    PriorityClassConfig,
    QueueConfig,
    RecurringJobConfig,
    ResourceQuotaConfig,
    TenantConfig,
)
from schemas.envelope import Envelope, Message, make_envelope
from schemas.intents import ACTION_OF
from schemas.status import ActionOutcome, JobStatusChanged, OutcomeName
from schemas.topics import CONFIG_TOPIC, INTENTS_TOPIC, STATUS_TOPIC, USAGE_TOPIC
from services.gateway.app import create_app
from services.gateway.auth import TokenEntry, TokenTable, token_digest
from services.gateway.configs import defined_message, file_items
from services.gateway.context import GatewayContext
from services.gateway.metrics import GatewayMetrics
from services.gateway.views import ConfigView, StatusView, UsageView
from services.runtime.options import ServeOptions
from tests.builders.clock import T0
from tests.builders.jobspecs import job_spec

if TYPE_CHECKING:
    from services.gateway.main import GatewayMain

TOKENS = {
    "alice": "token-alice-team-a",  # member of team-a
    "bob": "token-bob-team-b",  # member of team-b
    "root": "token-root-admin",  # admin of the platform tenant
    "tara": "token-tara-team-a-admin",  # tenant administrator of team-a
}


def token_table() -> TokenTable:
    return TokenTable([
        TokenEntry(token_sha256=token_digest(TOKENS["alice"]), tenant="team-a", user="alice", role="member"),
        TokenEntry(token=TOKENS["bob"], tenant="team-b", user="bob", role="member"),
        TokenEntry(token_sha256=token_digest(TOKENS["root"]), tenant="platform", user="root", role="admin"),
        TokenEntry(token=TOKENS["tara"], tenant="team-a", user="tara", role="tenant-admin"),
    ])


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


def muster_config() -> MusterConfig:
    quotas = {"gpu:a100": ResourceQuotaConfig(nominal=16, borrowing_limit=8)}
    return MusterConfig(
        cohorts=[CohortConfig(name="research")],
        queues=[QueueConfig(name="team-a", cohort="research", tenant="team-a", quotas=quotas),
                QueueConfig(name="team-b", cohort="research", tenant="team-b", quotas=quotas),
                QueueConfig(name="team-a-ops", tenant="team-a", allow_privileged=True)],
        priority_classes=[PriorityClassConfig(name="normal", value=100), PriorityClassConfig(name="high", value=1000)],
        tenants=[TenantConfig(name="team-a", namespace="team-a"), TenantConfig(name="team-b", namespace="team-b")],
    )


def spec_json(name: str = "train", queue: str = "team-a", **changes: Any) -> dict[str, Any]:
    """The JSON body of ``job_spec(name, queue)`` with ``changes`` set on it as they are (a test may send
    what the gateway must refuse)."""
    body = job_spec(name, queue).model_dump(mode="json")
    body.update(changes)
    return body


def status_changed(job_id: str, *, tenant: str = "team-a", queue: str = "team-a", name: str = "train",
                   state: str = "pending", minutes: int = 0, **extra: Any) -> JobStatusChanged:
    values: dict[str, Any] = {
        "job_id": job_id, "tenant": tenant, "queue": queue, "name": name, "state": state, "attempt": 0,
        "priority_class": "normal", "replicas": 2, "gpus": 8, "submitted_at": T0,
        "updated_at": T0 + timedelta(minutes=minutes),
    }
    values.update(extra)
    return JobStatusChanged.model_validate(values)


@dataclass
class FakePublisher:
    """Records what would go to Kafka; config, status and usage messages are folded back into the views."""

    views: dict[str, StatusView | ConfigView | UsageView] = field(default_factory=dict)
    sent: list[tuple[str, Envelope]] = field(default_factory=list)
    fail: Exception | None = None
    #: told of every envelope published (``answering``: a queue manager's answers to requests)
    on_publish: Callable[[str, Envelope], None] | None = None

    async def publish(self, topic: str, envelope: Envelope) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append((topic, envelope))
        view = self.views.get(topic)
        if view is not None:
            view.apply(envelope.key(), envelope)
        if self.on_publish is not None:
            self.on_publish(topic, envelope)

    def on(self, topic: str) -> list[Message]:
        return [env.payload for t, env in self.sent if t == topic]


def feed(view: StatusView | ConfigView | UsageView, message: Message) -> None:
    """Apply one message to a view as the compacted table would."""
    view.apply(message.key(), make_envelope(message, "test"))


@dataclass
class Harness:
    ctx: GatewayContext
    app: FastAPI
    publisher: FakePublisher
    registry: CollectorRegistry


def harness(config: MusterConfig | None = None, clock: Callable[[], datetime] | None = None) -> Harness:
    """A context with the test configuration loaded, an in-memory publisher and the app around it."""
    status, cfg_view, usage = StatusView(), ConfigView(), UsageView()
    for kind, item in file_items(config or muster_config()):
        feed(cfg_view, defined_message(kind, item))
    publisher = FakePublisher(views={STATUS_TOPIC: status, CONFIG_TOPIC: cfg_view, USAGE_TOPIC: usage})
    registry = CollectorRegistry()
    ids = count(1)
    metrics = GatewayMetrics(registry, lambda: len(status), lambda: len(cfg_view.recurring_jobs()))
    ctx = GatewayContext(tokens=token_table(), publisher=publisher, metrics=metrics, status=status, config=cfg_view,
                         usage=usage, now=clock or (lambda: T0), fresh_id=lambda name: f"{name}-{next(ids):08x}")
    return Harness(ctx, create_app(ctx, registry), publisher, registry)


def answering(gw: Harness, outcome: OutcomeName = "applied", reason: str = "", message: str = "") -> None:
    """Answer every request about a job at once, as the queue manager would in the job's next status."""

    def answer(topic: str, envelope: Envelope) -> None:
        action = ACTION_OF.get(envelope.type)
        status = gw.ctx.status.get(envelope.key())
        if topic != INTENTS_TOPIC or action is None or status is None:
            return
        told = ActionOutcome(event_id=envelope.event_id, action=action, outcome=outcome, reason=reason,
                             message=message, requested_by="alice", at=T0)
        answered = make_envelope(status.model_copy(update={"last_action": told}), "queue_manager")
        gw.ctx.status.apply(answered.key(), answered)
        gw.ctx.status_changed(answered.key(), answered)

    gw.publisher.on_publish = answer




def recurring_job(name: str = "nightly", schedule: str = "* * * * *", *, tenant: str = "team-a",
                  queue: str = "team-a", created_at: datetime = T0, suspended: bool = False) -> RecurringJobConfig:
    return RecurringJobConfig(name=f"{tenant}.{name}", tenant=tenant, user="alice", suspended=suspended,
                              spec=job_spec(name, queue, schedule=schedule), created_at=created_at)


class KubeJobsHandled:
    """Which versions of which labelled Jobs each gateway replica's watch (its ``KubeJobSubmitter``) has
    finished handling: what a test waits on to know the replicas have acted on a Job as it now is, after
    which nothing more happens to it until it changes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from services.gateway.kube_jobs import KubeJobSubmitter

        #: (namespace/name, resourceVersion) -> the replicas (submitters) that handled that version
        self.handled: dict[tuple[str, str], set[int]] = defaultdict(set)
        handle = KubeJobSubmitter.handle

        async def recording(submitter: KubeJobSubmitter, event: str, obj: dict[str, Any]) -> None:
            await handle(submitter, event, obj)
            meta = obj.get("metadata") or {}
            version = (f"{meta.get('namespace')}/{meta.get('name')}", str(meta.get("resourceVersion", "")))
            self.handled[version].add(id(submitter))

        monkeypatch.setattr(KubeJobSubmitter, "handle", recording)

    async def settled(self, rest: Any, namespace: str, name: str, replicas: int = 1) -> bool:
        """Whether the suspended Job ``namespace/name`` has its last change, the Job controller's
        ``Suspended`` condition, and ``replicas`` replicas have handled it at that version."""
        from services.runtime.kube import JOBS

        job = await rest.get(JOBS, name, namespace)
        conditions = (job.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Suspended" and c.get("status") == "True" for c in conditions):
            return False
        return len(self.handled[(f"{namespace}/{name}", job["metadata"]["resourceVersion"])]) >= replicas


@asynccontextmanager
async def running_gateway(options: ServeOptions, clock: Callable[[], datetime] | None = None
                          ) -> AsyncIterator[GatewayMain]:
    """A whole gateway (``GatewayMain``) run with ``options`` (on ``clock``) until the block ends, from the
    moment it is ready (its errors while starting are raised)."""
    from services.gateway.main import GatewayMain

    server = GatewayMain(options) if clock is None else GatewayMain(options, clock=clock)
    task = asyncio.create_task(server.run(handle_signals=False))
    try:
        async with asyncio.timeout(60):
            ready = asyncio.create_task(server.ready.wait())
            await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            if task.done():
                task.result()
        yield server
    finally:
        server.stop()
        async with asyncio.timeout(30):
            await task


def client_of(server: GatewayMain) -> httpx.AsyncClient:
    """An HTTP client of a running gateway (to use in ``async with``)."""
    assert server.url is not None
    return httpx.AsyncClient(base_url=server.url, timeout=10)


SMALL_CLUSTER = Path(__file__).resolve().parents[2] / "examples" / "cluster-small.yaml"


@asynccontextmanager
async def simulated_cluster(namespace: str = "team-a") -> AsyncIterator[tuple[str, Any]]:
    """A simulated cluster (``examples/cluster-small.yaml``) served on a free port, with ``namespace``
    created: its URL and a ``KubeRest`` client of it."""
    from services.kubesim import KubeSim
    from services.runtime.kube import KubeRest, build_api_client, ensure_namespace

    sim = KubeSim.from_cluster_file(str(SMALL_CLUSTER), profile="zero")
    async with sim.serve(host="127.0.0.1", port=0) as url:
        api = await build_api_client(url)
        async with api:
            rest = KubeRest(api)
            await ensure_namespace(rest, namespace)
            yield url, rest
