"""The one envelope every message on every topic travels in, and the base class of payloads."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, SerializeAsAny

#: Job ids are DNS-1123 labels so they can name Kubernetes objects directly.
JobId = Annotated[str, Field(min_length=1, max_length=48, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
#: Names of queues, cohorts, tenants, clusters, priority classes.
Name = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]
#: the longest free text a message carries (reasons' messages, descriptions)
MAX_TEXT = 2048
Text = Annotated[str, Field(max_length=MAX_TEXT)]
#: the longest machine-readable reason a message carries (``RunFailed.reason``, a status's reason)
MAX_REASON = 64
#: a reason that must be given; ``ReasonText`` may be empty
Reason = Annotated[str, Field(min_length=1, max_length=MAX_REASON)]
ReasonText = Annotated[str, Field(max_length=MAX_REASON)]
#: the longest event id (an envelope's, or one a status names)
MAX_EVENT_ID = 64


def clip_text(text: str) -> str:
    """``text`` cut to what a ``Text`` field holds."""
    return text[:MAX_TEXT]


def clip_reason(reason: str) -> str:
    """``reason`` cut to what a ``Reason`` field holds."""
    return reason[:MAX_REASON]

ENVELOPE_VERSION = 1


class Message(BaseModel):
    """Base of every payload. Facts are past tense (``JobAdmitted``), requests imperative (``SubmitJob``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    TYPE: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1

    def key(self) -> str:
        """The partition key: keeps one entity's messages in order."""
        raise NotImplementedError(f"{type(self).__name__} must define its partition key")


class EnvelopeHeader(BaseModel):
    """Envelope fields without the payload; validated before the payload type is looked up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    envelope_version: int = Field(default=ENVELOPE_VERSION, ge=1)
    event_id: Annotated[str, Field(min_length=1, max_length=MAX_EVENT_ID)]
    type: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Z][A-Za-z0-9]*$")]
    schema_version: int = Field(ge=1)
    occurred_at: AwareDatetime
    producer: Annotated[str, Field(min_length=1, max_length=128)]
    correlation_id: Annotated[str, Field(max_length=128)] | None = None
    causation_id: Annotated[str, Field(max_length=128)] | None = None


class Envelope(EnvelopeHeader):
    payload: SerializeAsAny[Message]

    def key(self) -> str:
        return self.payload.key()


class RawEnvelope(EnvelopeHeader):
    """The envelope as JSON Schema describes it to external producers: payload is an object."""

    payload: dict[str, Any]


def new_event_id() -> str:
    """A fresh event id: 128 random bits as 32 hex digits (the length of a UUID's hex form, at a
    quarter of ``uuid4().hex``'s cost; every produced message takes one)."""
    return os.urandom(16).hex()


def make_envelope(
    message: Message,
    producer: str,
    *,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    occurred_at: datetime | None = None,
    event_id: str | None = None,
) -> Envelope:
    """Wrap a message. ``occurred_at`` defaults to now (UTC): call this only in the shell, never the core."""
    return Envelope(
        event_id=event_id or new_event_id(),
        type=message.TYPE,
        schema_version=message.VERSION,
        occurred_at=occurred_at or datetime.now(UTC),
        producer=producer,
        correlation_id=correlation_id,
        causation_id=causation_id,
        payload=message,
    )


def caused_by(cause: Envelope) -> dict[str, str]:
    """Keyword arguments for ``make_envelope`` that chain a new message to the one that caused it."""
    return {"correlation_id": cause.correlation_id or cause.event_id, "causation_id": cause.event_id}
