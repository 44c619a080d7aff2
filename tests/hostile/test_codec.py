"""Every hostile record of every input topic is refused by the codec with the reason the DLQ will carry."""

from __future__ import annotations

import pytest

from schemas.codec import DecodeError, decode
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


def test_every_reason_the_codec_knows_is_exercised() -> None:
    reasons = {record.reason for _, record in CASES}
    assert reasons == {"too_large", "malformed", "invalid_envelope", "unknown_type", "unsupported_version",
                       "invalid_payload", "wrong_topic"}
