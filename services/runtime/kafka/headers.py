"""Record header names and helpers: envelope headers and dead-letter headers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from schemas.envelope import Envelope

Headers = list[tuple[str, bytes]]

TYPE_HEADER = "muster-type"
VERSION_HEADER = "muster-schema-version"
EVENT_ID_HEADER = "muster-event-id"
CONTENT_TYPE_HEADER = "content-type"
CONTENT_TYPE = b"application/json"

DLQ_REASON = "muster-dlq-reason"
DLQ_DETAIL = "muster-dlq-detail"
DLQ_TOPIC = "muster-dlq-topic"
DLQ_PARTITION = "muster-dlq-partition"
DLQ_OFFSET = "muster-dlq-offset"
DLQ_GROUP = "muster-dlq-group"
DLQ_ATTEMPTS = "muster-dlq-attempts"
DLQ_ORIGINAL_BYTES = "muster-dlq-original-bytes"  # set when the dead letter keeps only a prefix of the value
DLQ_HEADERS = frozenset({DLQ_REASON, DLQ_DETAIL, DLQ_TOPIC, DLQ_PARTITION, DLQ_OFFSET, DLQ_GROUP, DLQ_ATTEMPTS,
                         DLQ_ORIGINAL_BYTES})

MAX_DETAIL_BYTES = 2048
#: original headers kept on a dead letter, in bytes; later ones are dropped so the dead letter stays writable
MAX_KEPT_HEADER_BYTES = 16 * 1024
#: value bytes kept on a dead letter: a compressed record may decompress far beyond what a producer may send
MAX_DEAD_VALUE_BYTES = 512 * 1024


def envelope_headers(envelope: Envelope) -> Headers:
    """Headers that let a reader route or filter a record without parsing its value."""
    return [
        (TYPE_HEADER, envelope.type.encode()),
        (VERSION_HEADER, str(envelope.schema_version).encode()),
        (EVENT_ID_HEADER, envelope.event_id.encode()),
        (CONTENT_TYPE_HEADER, CONTENT_TYPE),
    ]


def dead_letter_headers(
    original: Iterable[tuple[str, bytes]],
    *,
    reason: str,
    detail: str,
    topic: str,
    partition: int,
    offset: int,
    group: str | None,
    attempts: int,
) -> Headers:
    """The original headers (minus earlier DLQ headers) plus why and where the record failed."""
    kept: Headers = []
    size = 0
    for name, value in original:
        if name in DLQ_HEADERS:
            continue
        size += len(name) + len(value)
        if size > MAX_KEPT_HEADER_BYTES:
            break
        kept.append((name, value))
    return [
        *kept,
        (DLQ_REASON, reason.encode()),
        (DLQ_DETAIL, detail.encode(errors="replace")[:MAX_DETAIL_BYTES]),
        (DLQ_TOPIC, topic.encode()),
        (DLQ_PARTITION, str(partition).encode()),
        (DLQ_OFFSET, str(offset).encode()),
        (DLQ_GROUP, (group or "").encode()),
        (DLQ_ATTEMPTS, str(attempts).encode()),
    ]


def dead_letter_value(value: bytes | None) -> tuple[bytes | None, Headers]:
    """The value a dead letter carries (at most ``MAX_DEAD_VALUE_BYTES``) and the header noting a cut."""
    if value is None or len(value) <= MAX_DEAD_VALUE_BYTES:
        return value, []
    return value[:MAX_DEAD_VALUE_BYTES], [(DLQ_ORIGINAL_BYTES, str(len(value)).encode())]


def dead_letter_key(key: bytes | None) -> bytes | None:
    """The key a dead letter carries: at most ``MAX_KEPT_HEADER_BYTES`` of the original."""
    return key if key is None else key[:MAX_KEPT_HEADER_BYTES]


def header_value(headers: Sequence[tuple[str, bytes]] | None, name: str) -> str | None:
    """The last value of header ``name`` decoded as UTF-8, or None."""
    found: str | None = None
    for key, value in headers or ():
        if key == name:
            found = value.decode(errors="replace")
    return found
