"""Hostile records for the input topics: raw bytes that must be dead-lettered (with the reason the codec
gives) and wire-valid submissions whose specs ask for dangerous things."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from schemas.codec import MAX_MESSAGE_BYTES, unknown_fields
from schemas.envelope import ENVELOPE_VERSION
from schemas.topics import (
    CAPACITY_TOPIC,
    CONFIG_TOPIC,
    DECISIONS_TOPIC,
    DISPATCHES_TOPIC,
    INTENTS_TOPIC,
    RUNS_TOPIC,
    USAGE_TOPIC,
)

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)

#: one message type that belongs on each input topic, with a payload that is valid for it
VALID_PAYLOADS: dict[str, tuple[str, dict[str, Any]]] = {
    INTENTS_TOPIC: ("CancelJob", {"job_id": "no-such-job", "requested_by": "pipeline"}),
    CAPACITY_TOPIC: ("NodeRemoved", {"cluster": "nowhere", "node": "ghost-0", "observed_at": NOW.isoformat()}),
    DECISIONS_TOPIC: ("JobRejected", {"job_id": "no-such-job", "attempt": 0, "reason": "test", "message": ""}),
    RUNS_TOPIC: ("RunDeleted", {"job_id": "no-such-job", "attempt": 0, "cluster": "nowhere",
                                "observed_at": NOW.isoformat()}),
    DISPATCHES_TOPIC: ("JobStopped", {"job_id": "no-such-job", "attempt": 0, "cluster": "nowhere",
                                      "observed_at": NOW.isoformat(), "reason": "test", "requeue": False}),
    USAGE_TOPIC: ("QueueUsageReported", {"queue": "no-such-queue", "as_of": NOW.isoformat(),
                                         "decayed_gpu_seconds": 0.0, "half_life_s": 60.0}),
    CONFIG_TOPIC: ("ConfigItemDeleted", {"kind": "cohort", "name": "no-such-cohort"}),
}

#: a message type of another topic, for the ``wrong_topic`` case
FOREIGN_TYPE: dict[str, tuple[str, dict[str, Any]]] = {
    topic: VALID_PAYLOADS[INTENTS_TOPIC if topic != INTENTS_TOPIC else DECISIONS_TOPIC] for topic in VALID_PAYLOADS
}


@dataclass(frozen=True, slots=True)
class HostileRecord:
    """One record to produce raw and the dead-letter reason it must get (None: the record is valid)."""

    case: str
    value: bytes | None
    reason: str | None
    key: bytes = b"hostile"


def envelope(message_type: str, payload: Any, **header: Any) -> dict[str, Any]:
    """An envelope as external producers write it; ``header`` overrides any envelope field."""
    body: dict[str, Any] = {
        "envelope_version": ENVELOPE_VERSION,
        "event_id": uuid.uuid4().hex,
        "type": message_type,
        "schema_version": 1,
        "occurred_at": NOW.isoformat(),
        "producer": "hostile-test",
        "payload": payload,
    }
    body.update(header)
    return body


def raw_json(body: Any) -> bytes:
    return orjson.dumps(body)


def hostile_records(topic: str) -> list[HostileRecord]:
    """Every kind of broken record for ``topic``; each must reach ``<topic>.dlq`` with ``reason``."""
    message_type, payload = VALID_PAYLOADS[topic]
    foreign_type, foreign_payload = FOREIGN_TYPE[topic]
    depth = 5000
    padding = "x" * (MAX_MESSAGE_BYTES + 1024)
    return [
        HostileRecord("not_json", b"\xff\xfe\x00garbage{", "malformed"),
        HostileRecord("empty", b"", "malformed"),
        HostileRecord("json_array", b"[1, 2, 3]", "malformed"),
        HostileRecord("json_string", b'"SubmitJob"', "malformed"),
        HostileRecord("deeply_nested", b"[" * depth + b"]" * depth, "malformed"),
        HostileRecord("deeply_nested_payload", raw_json(envelope(message_type, "<payload>")).replace(
            b'"<payload>"', b'{"a":' * depth + b"1" + b"}" * depth), "malformed"),
        HostileRecord("null_value", None, "malformed"),
        HostileRecord("nan_literal", raw_json(envelope(message_type, payload)).replace(b'"schema_version":1',
                                                                                    b'"schema_version":NaN'),
                      "malformed"),
        HostileRecord("version_as_string", raw_json(envelope(message_type, payload, schema_version="one")),
                      "invalid_envelope"),
        HostileRecord("missing_event_id", raw_json({k: v for k, v in envelope(message_type, payload).items()
                                                 if k != "event_id"}), "invalid_envelope"),
        HostileRecord("long_producer", raw_json(envelope(message_type, payload, producer="p" * 10_000)),
                      "invalid_envelope"),
        HostileRecord("unicode_type", raw_json(envelope("Submit\u202eJob\u00e9", payload)), "invalid_envelope"),
        HostileRecord("unknown_envelope_version", raw_json(envelope(message_type, payload, envelope_version=0)),
                      "invalid_envelope"),
        HostileRecord("unknown_type", raw_json(envelope("DropAllQueues", payload)), "unknown_type"),
        HostileRecord("future_schema_version", raw_json(envelope(message_type, payload, schema_version=99)),
                      "unsupported_version"),
        HostileRecord("wrong_topic", raw_json(envelope(foreign_type, foreign_payload)), "wrong_topic"),
        HostileRecord("payload_not_object", raw_json(envelope(message_type, [payload])), "invalid_payload"),
        HostileRecord("payload_wrong_types", raw_json(envelope(message_type, _retyped(payload))), "invalid_payload"),
        HostileRecord("oversized", raw_json(envelope(message_type, {**payload, "padding": padding})), "too_large"),
        *unknown_field_records(topic),
    ]


def unknown_field_records(topic: str) -> list[HostileRecord]:
    """Fields the reader does not know: refused on the intents topics (tenants' input); on the other topics a
    newer service's additions, which an older reader ignores (``schemas.codec.unknown_fields``)."""
    if unknown_fields(topic) != "forbid":
        return []
    message_type, payload = VALID_PAYLOADS[topic]
    return [HostileRecord("extra_envelope_field", raw_json(envelope(message_type, payload, admin=True)),
                          "invalid_envelope"),
            HostileRecord("payload_extra_field", raw_json(envelope(message_type, {**payload, "rm": "-rf /"})),
                          "invalid_payload")]


def _retyped(payload: dict[str, Any]) -> dict[str, Any]:
    """Every field of ``payload`` given a value of the wrong JSON type."""
    return {key: ({"x": 1} if isinstance(value, str) else "seven") for key, value in payload.items()}
