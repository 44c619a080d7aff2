"""orjson codec for envelopes, with decode errors that say why (the reason goes to the DLQ).

Fields a reader does not know (written by a newer producer during a rolling upgrade) are ignored on every
topic but the intents topics: services of one release upgrade one at a time, and an older reader must go on
reading a newer writer's messages. Intents are written by tenants' own producers, whose mistakes (``gpu_tpye``)
must be refused with the reason, not silently dropped: there an unknown field is ``invalid_payload``. An
unknown message type or schema version is refused everywhere (dead-lettered, so it can be replayed once its
reader is upgraded). ``docs/architecture.md`` ("Changing a message") has the whole policy.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import ValidationError

from schemas.envelope import Envelope, EnvelopeHeader
from schemas.topics import INTENTS_TOPIC, MESSAGE_TYPES, TOPICS, intents_topic_tenant, is_intents_topic

#: the message types each registered topic carries (looked up for every decoded record)
_TYPES_BY_TOPIC: dict[str, frozenset[str]] = {name: frozenset(spec.message_types) for name, spec in TOPICS.items()}

MAX_MESSAGE_BYTES = 1 << 20  # 1 MiB; the broker default max.message.bytes is about the same

DecodeReason = Literal[
    "too_large", "malformed", "invalid_envelope", "unknown_type", "unsupported_version", "invalid_payload",
    "wrong_topic",
]


class DecodeError(Exception):
    """A message that cannot be decoded or validated. ``reason`` is machine-readable, ``detail`` human."""

    def __init__(self, reason: DecodeReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: DecodeReason = reason
        self.detail = detail


def encode(envelope: Envelope) -> bytes:
    """The envelope as compact JSON (pydantic's own serialiser: the same bytes as ``model_dump`` + orjson,
    in about two thirds of the time)."""
    return envelope.model_dump_json().encode()


def _summary(exc: ValidationError, limit: int = 5) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def unknown_fields(topic: str | None) -> Literal["forbid", "ignore"]:
    """How a reader of ``topic`` treats fields it does not know: refused on the intents topics (tenants'
    input), ignored elsewhere (a newer service's additions; ``topic`` None: a log file of any topics)."""
    return "forbid" if topic is not None and is_intents_topic(topic) else "ignore"


def decode(raw: bytes | None, *, topic: str | None = None, max_bytes: int = MAX_MESSAGE_BYTES) -> Envelope:
    """Bytes -> validated envelope with a typed payload, or ``DecodeError``. Never raises anything else.
    Unknown fields: see ``unknown_fields``."""
    if raw is None:
        raise DecodeError("malformed", "empty value (tombstone)")
    if len(raw) > max_bytes:
        raise DecodeError("too_large", f"{len(raw)} bytes > limit {max_bytes}")
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise DecodeError("malformed", f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise DecodeError("malformed", f"expected a JSON object, got {type(data).__name__}")
    payload = data.pop("payload", None)
    try:
        extra = unknown_fields(topic)
        header = EnvelopeHeader.model_validate(data, extra=extra)
    except ValidationError as exc:
        raise DecodeError("invalid_envelope", _summary(exc)) from None
    cls = MESSAGE_TYPES.get(header.type)
    if cls is None:
        raise DecodeError("unknown_type", f"unknown message type {header.type!r}")
    if header.schema_version != cls.VERSION:
        raise DecodeError(
            "unsupported_version", f"{header.type} v{header.schema_version} (this build reads v{cls.VERSION})"
        )
    if topic is not None:
        allowed = _TYPES_BY_TOPIC.get(INTENTS_TOPIC if intents_topic_tenant(topic) else topic)
        if allowed is not None and header.type not in allowed:
            raise DecodeError("wrong_topic", f"{header.type} does not belong on {topic}")
    if not isinstance(payload, dict):
        raise DecodeError("invalid_payload", "payload must be a JSON object")
    try:
        message = cls.model_validate(payload, extra=extra)
    except ValidationError as exc:
        raise DecodeError("invalid_payload", _summary(exc)) from None
    return Envelope(**header.model_dump(), payload=message)
