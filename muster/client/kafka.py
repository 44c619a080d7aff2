"""``KafkaSubmitter``: validated ``SubmitJob`` intents straight onto an intents topic (the tenant's own
``muster.intents.<tenant>.v1`` on an authenticated cluster, ``muster.intents.v1`` on an open one), for
pipelines that live on Kafka.

The intents topic admits external producers; the queue manager checks again what it must (the queue
belongs to the tenant, elevated security, non-preemptible work) and rejects a job that fails, which the
job's status then says. What only the gateway checks (a token, capacity that can ever host the job,
``after`` given by name) is the pipeline's own business on this path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

from pydantic import ValidationError

from muster.client.errors import InvalidSpec, TransportError
from schemas.codec import MAX_MESSAGE_BYTES, encode
from schemas.envelope import Envelope, make_envelope
from schemas.intents import SubmitJob
from schemas.jobspec import JobSpec
from schemas.topics import INTENTS_TOPIC, tenant_intents_topic
from services.runtime.kafka import EnvelopeProducer, KafkaSettings
from services.spec.ids import job_id_of_tenant, keyed_job_id, random_job_id, tenant_tag
from services.spec.secret_env import plain_secret_errors

#: the largest envelope sent: the producer's request limit (1 MiB) also carries the key, headers and overhead
MAX_ENVELOPE_BYTES = MAX_MESSAGE_BYTES - 4096


@dataclass(frozen=True)
class Produced:
    """A submission the broker acknowledged (``acks=all``): where it landed."""

    job_id: str
    event_id: str
    topic: str
    partition: int
    offset: int


class KafkaSubmitter:
    """Produces ``SubmitJob`` intents for one tenant and user, idempotently (``enable_idempotence``,
    ``acks=all``), and returns once the broker acknowledged each.

    Job ids are minted by ``services.spec.ids`` and carry the tenant's tag, as the gateway's do: the queue
    manager accepts on a tenant's own topic only submissions under that tenant's ids, so a ``job_id`` given to
    ``intent`` must carry it too. A submission with an ``idempotency_key`` gets the job id the gateway would
    give it (the same key through either path is the same job); the queue manager queues a job id once, so a
    retried produce queues nothing twice. Connection settings default to ``MUSTER_KAFKA_*`` (TLS and SASL
    included).
    ``topic`` defaults to the tenant's own intents topic (``muster.intents.<tenant>.v1``) when the settings
    authenticate, and to the shared ``muster.intents.v1`` on an open (PLAINTEXT) broker.
    """

    def __init__(self, *, tenant: str, user: str, settings: KafkaSettings | None = None,
                 bootstrap: str | None = None, producer: str = "pipeline", topic: str | None = None) -> None:
        base = settings or KafkaSettings()
        if bootstrap is not None:
            base = base.model_copy(update={"bootstrap": bootstrap})
        self.tenant = tenant
        self.user = user
        self.producer_name = producer
        # on an authenticated cluster a tenant may write its own intents topic only (and the queue manager
        # accepts there only that tenant's intents); an open broker has the shared one
        authenticated = base.security_protocol != "PLAINTEXT"
        self.topic = topic or (tenant_intents_topic(tenant) if authenticated else INTENTS_TOPIC)
        self._settings = base.with_identity(client_id=f"muster-submitter-{producer}")
        self._producer = EnvelopeProducer(self._settings, linger_ms=0)

    async def start(self) -> None:
        try:
            await self._producer.start()
        except Exception as exc:  # the broker's client raises its own error types
            raise TransportError(f"cannot reach Kafka at {self._settings.bootstrap}: {exc!r}") from exc

    async def stop(self) -> None:
        await self._producer.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    def intent(self, spec: JobSpec | Mapping[str, Any], *, idempotency_key: str | None = None,
               job_id: str | None = None, submitted_at: datetime | None = None) -> SubmitJob:
        """The ``SubmitJob`` for ``spec``, validated as the topic's consumers will; ``InvalidSpec`` (with every
        invalid field, as a 422 lists them) otherwise, a ``job_id`` without the tenant's tag included."""
        try:
            job_spec = spec if isinstance(spec, JobSpec) else JobSpec.model_validate(dict(spec))
        except ValidationError as exc:
            raise InvalidSpec.from_validation(exc) from None
        plain = plain_secret_errors(job_spec)
        if plain:
            raise InvalidSpec(plain)
        if job_spec.schedule is not None:
            raise InvalidSpec([{"field": "spec.schedule", "detail": "recurring jobs are defined through the "
                                "gateway's API (POST /v1/jobs), not the intents topic"}])
        if job_id is None:
            job_id = (keyed_job_id(job_spec.name, self.tenant, idempotency_key) if idempotency_key
                      else random_job_id(job_spec.name, self.tenant))
        elif not job_id_of_tenant(job_id, self.tenant):
            raise InvalidSpec([{"field": "intent.job_id", "detail": f"{job_id!r} is not an id of tenant "
                                f"{self.tenant!r}: its ids carry its tag (<name>-{tenant_tag(self.tenant)}-<8 hex>, "
                                "from services.spec.ids)"}])
        try:
            return SubmitJob(job_id=job_id, tenant=self.tenant, user=self.user, spec=job_spec,
                             submitted_at=submitted_at or datetime.now(UTC), idempotency_key=idempotency_key)
        except ValidationError as exc:
            raise InvalidSpec.from_validation(exc, prefix="intent") from None

    def envelope(self, intent: SubmitJob, *, correlation_id: str | None = None) -> Envelope:
        envelope = make_envelope(intent, self.producer_name, correlation_id=correlation_id)
        size = len(encode(envelope))
        if size > MAX_ENVELOPE_BYTES:
            raise InvalidSpec([{"field": "spec", "detail": f"encodes to {size} bytes; the limit is "
                                f"{MAX_ENVELOPE_BYTES} (large values belong in a config map or volume)"}])
        return envelope

    async def submit(self, spec: JobSpec | Mapping[str, Any], *, idempotency_key: str | None = None,
                     correlation_id: str | None = None) -> Produced:
        """Validate ``spec``, produce its ``SubmitJob`` keyed by job id, and wait for the broker's
        acknowledgement. Nothing is sent when the spec is invalid (``InvalidSpec``)."""
        envelope = self.envelope(self.intent(spec, idempotency_key=idempotency_key), correlation_id=correlation_id)
        return await self.send(envelope)

    async def send(self, envelope: Envelope) -> Produced:
        """Produce an envelope made by ``envelope()`` and wait for its acknowledgement."""
        if not self._producer.started:
            raise TransportError("the submitter is not started: `async with KafkaSubmitter(...)` or `start()`")
        try:
            meta = await self._producer.send_and_wait(self.topic, envelope)
        except Exception as exc:  # the broker's client raises its own error types
            raise TransportError(f"Kafka did not acknowledge {envelope.type} {envelope.key()}: {exc!r}") from exc
        return Produced(envelope.key(), envelope.event_id, meta.topic, meta.partition, meta.offset)
