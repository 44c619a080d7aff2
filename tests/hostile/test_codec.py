"""Every hostile record of every input topic is refused by the codec with the reason the DLQ will carry."""

from __future__ import annotations

import pytest

from schemas.codec import DecodeError, decode
from schemas.topics import is_intents_topic
from tests.hostile.records import VALID_PAYLOADS, HostileRecord, envelope, hostile_records, raw_json

CASES = [(topic, record) for topic in VALID_PAYLOADS for record in hostile_records(topic)]


@pytest.mark.parametrize(("topic", "record"), CASES, ids=[f"{t}:{r.case}" for t, r in CASES])
def test_codec_refuses_with_reason(topic: str, record: HostileRecord) -> None:
    with pytest.raises(DecodeError) as refused:
        decode(record.value, topic=topic)
    assert refused.value.reason == record.reason
    assert len(str(refused.value)) < 4096  # the reason travels in a header: it stays short


@pytest.mark.parametrize("topic", list(VALID_PAYLOADS))
def test_the_valid_baseline_of_each_topic_decodes(topic: str) -> None:
    message_type, payload = VALID_PAYLOADS[topic]
    assert decode(raw_json(envelope(message_type, payload)), topic=topic).type == message_type


@pytest.mark.parametrize("topic", list(VALID_PAYLOADS))
def test_fields_a_reader_does_not_know_are_refused_on_intents_only(topic: str) -> None:
    """A newer service's new field must not dead-letter on an older reader during a rolling upgrade; a
    tenant's unknown field (a typo) is refused with the reason."""
    message_type, payload = VALID_PAYLOADS[topic]
    newer = raw_json(envelope(message_type, {**payload, "added_later": {"x": 1}}, trace_flags="01"))
    if is_intents_topic(topic):
        with pytest.raises(DecodeError):
            decode(newer, topic=topic)
        return
    decoded = decode(newer, topic=topic)
    assert decoded.type == message_type
    assert "added_later" not in decoded.payload.model_dump()
    assert decoded.payload == decode(raw_json(envelope(message_type, payload)), topic=topic).payload


def test_every_reason_the_codec_knows_is_exercised() -> None:
    reasons = {record.reason for _, record in CASES}
    assert reasons == {"too_large", "malformed", "invalid_envelope", "unknown_type", "unsupported_version",
                       "invalid_payload", "wrong_topic"}
