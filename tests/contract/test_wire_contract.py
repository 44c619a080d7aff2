"""The wire contract: registry, codec, DLQ reasons, generated JSON Schema."""

from __future__ import annotations

import copy

import jsonschema
import orjson
import pytest

from schemas.codec import MAX_MESSAGE_BYTES, DecodeError, decode, encode
from schemas.envelope import Envelope, caused_by, make_envelope
from schemas.generate import drift, generate
from schemas.intents import CancelJob
from schemas.topics import DLQ_SUFFIX, MESSAGE_TYPES, TOPIC_OF, TOPICS
from tests.builders.messages import example_envelopes


def test_json_schema_files_match_models() -> None:
    assert drift() == [], "run `python -m schemas.generate` and commit schemas/json"


def test_every_message_type_has_an_example_and_one_topic() -> None:
    examples = {env.type for _, env in example_envelopes()}
    assert examples == set(MESSAGE_TYPES)
    seen: dict[str, str] = {}
    for topic in TOPICS.values():
        for t in topic.message_types:
            assert t not in seen, f"{t} on both {seen[t]} and {topic.name}"
            seen[t] = topic.name


def test_registry_is_sane() -> None:
    for name, spec in TOPICS.items():
        assert name.startswith("muster.") and name.rsplit(".", 1)[1].startswith("v")
        assert not name.endswith(DLQ_SUFFIX)
        assert spec.partitions >= 1
        assert spec.cleanup_policy in ("delete", "compact")
        assert spec.config.get("cleanup.policy", spec.cleanup_policy) == spec.cleanup_policy
        assert spec.external_producers == (name == "muster.intents.v1")
    producers = {spec.producer for spec in TOPICS.values()}
    assert producers <= {"gateway", "queue_manager", "quota_accountant", "dispatcher", "node_watcher"}


@pytest.mark.parametrize(("topic", "envelope"), example_envelopes(), ids=lambda v: getattr(v, "type", v))
def test_round_trip_and_schema(topic: str, envelope: Envelope) -> None:
    raw = encode(envelope)
    back = decode(raw, topic=topic)
    assert back == envelope
    assert type(back.payload) is type(envelope.payload)
    assert back.key() == envelope.key() and back.key()
    schema = orjson.loads(generate()[f"{topic}/{envelope.type}.v{envelope.schema_version}.json"])
    jsonschema.validate(orjson.loads(raw), schema)


def _valid() -> dict:
    _topic, env = example_envelopes()[0]
    return orjson.loads(encode(env))


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: b"\x00\xffnot json", "malformed"),
        (lambda d: b"[1, 2]", "malformed"),
        (lambda d: {**d, "event_id": ""}, "invalid_envelope"),
        (lambda d: {k: v for k, v in d.items() if k != "occurred_at"}, "invalid_envelope"),
        (lambda d: {**d, "occurred_at": "2026-11-01T12:00:00"}, "invalid_envelope"),  # no timezone
        (lambda d: {**d, "type": "LaunchMissiles"}, "unknown_type"),
        (lambda d: {**d, "schema_version": 99}, "unsupported_version"),
        (lambda d: {**d, "type": "RunSucceeded"}, "wrong_topic"),
        (lambda d: {**d, "payload": "x"}, "invalid_payload"),
        (lambda d: {**d, "payload": {**d["payload"], "job_id": "NOT A DNS LABEL"}}, "invalid_payload"),
        (lambda d: {**d, "payload": {**d["payload"], "spec": {**d["payload"]["spec"], "replicas": 0}}},
         "invalid_payload"),
        (lambda d: {**d, "payload": {**d["payload"], "surprise": 1}}, "invalid_payload"),
        (lambda d: b"{" + b" " * MAX_MESSAGE_BYTES + b"}", "too_large"),
    ],
)
def test_decode_errors_name_their_reason(mutate, reason: str) -> None:
    value = mutate(copy.deepcopy(_valid()))
    raw = value if isinstance(value, bytes) else orjson.dumps(value)
    with pytest.raises(DecodeError) as info:
        decode(raw, topic="muster.intents.v1")
    assert info.value.reason == reason
    assert info.value.detail


def test_invalid_payload_detail_names_the_field() -> None:
    d = _valid()
    d["payload"]["spec"]["template"]["resources"]["gpus"] = -1
    with pytest.raises(DecodeError) as info:
        decode(orjson.dumps(d))
    assert "spec.template.resources.gpus" in info.value.detail


def test_causation_chain() -> None:
    first = example_envelopes()[0][1]
    second = make_envelope(CancelJob(job_id="j-0001", requested_by="alice"), "gateway", **caused_by(first))
    assert second.causation_id == first.event_id
    assert second.correlation_id == first.event_id
    assert TOPIC_OF[second.type] == "muster.intents.v1"
