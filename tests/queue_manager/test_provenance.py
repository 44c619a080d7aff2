"""The queue manager accepts an intent's tenant only when the topic it came from proves it."""

from __future__ import annotations

from typing import cast

import pytest

from schemas.envelope import make_envelope
from schemas.intents import CancelJob, SubmitJob, SuspendJob
from schemas.topics import INTENTS_TOPIC, JOBS_TOPIC, intents_topic_tenant, is_intents_topic, tenant_intents_topic
from services.queue_manager.provenance import PLAIN_SECRET_ENV, TENANT_NOT_PROVEN, plain_secret_refusal, unproven
from services.queue_manager.routing import passes_over
from services.queue_manager.service import INPUT_PATTERN, QueueManager
from services.runtime.kafka import Delivery, EnvelopeProducer, Refused
from tests.queue_manager.builders import NOW, folded_state, queue_manager, submit
from tests.queue_manager.fakes import MemoryProducer

A, B = tenant_intents_topic("team-a"), tenant_intents_topic("team-b")


def test_topic_names() -> None:
    assert A == "muster.intents.team-a.v1"
    assert intents_topic_tenant(A) == "team-a"
    assert intents_topic_tenant("muster.intents.a.b.v1") == "a.b"
    for other in (INTENTS_TOPIC, "muster.intents.team-a.v1.dlq", "muster.runs.v1", "muster.intents..v1"):
        assert intents_topic_tenant(other) is None
    assert is_intents_topic(INTENTS_TOPIC) and is_intents_topic(A) and not is_intents_topic(JOBS_TOPIC)


def test_the_input_pattern() -> None:
    import re

    pattern = re.compile(INPUT_PATTERN)
    for topic in (INTENTS_TOPIC, A, "muster.runs.v1", "muster.dispatches.v1"):
        assert pattern.match(topic), topic
    for topic in ("muster.intents.v1.dlq", A + ".dlq", "muster.decisions.v1", "muster.jobs.v1", "muster.runsXv1"):
        assert not pattern.match(topic), topic


def test_a_submission_must_name_the_topics_tenant() -> None:
    qs = folded_state()
    forged = submit("j1").model_copy(update={"tenant": "team-b"})
    assert unproven(qs, A, submit("j1")) is None
    reason = unproven(qs, A, forged)
    assert reason is not None and "'team-b'" in reason and A in reason
    assert unproven(qs, B, submit("j1")) is not None  # team-a's job written where only team-b writes
    assert unproven(qs, INTENTS_TOPIC, forged) is None  # the gateway's topic: its word is taken


def test_a_request_must_be_about_the_topics_tenants_job() -> None:
    qs = folded_state()
    from services.queue_manager.inputs import on_input

    on_input(qs, submit("j1"), "e1", NOW)  # team-a's job
    cancel = CancelJob(job_id="j1", requested_by="mallory")
    assert unproven(qs, A, cancel) is None
    reason = unproven(qs, B, cancel)
    assert reason is not None and "CancelJob of job j1 (tenant 'team-a')" in reason
    assert unproven(qs, B, SuspendJob(job_id="j1", requested_by="mallory")) is not None
    assert unproven(qs, B, CancelJob(job_id="unknown", requested_by="x")) is None  # ignored anyway
    assert unproven(qs, INTENTS_TOPIC, cancel) is None


def test_a_tenant_topic_is_decoded_as_an_intents_topic_by_a_shard() -> None:
    qs = folded_state()
    raw = make_envelope(CancelJob(job_id="j-of-another-shard", requested_by="x"), "p").model_dump_json().encode()
    # an unsharded instance never passes over; what matters is that a tenant topic is not taken for a run topic
    assert passes_over(qs, A, b"j-of-another-shard", raw) is False


def _manager() -> QueueManager:
    manager: QueueManager = queue_manager()
    return manager


async def test_the_handler_refuses_a_forgery_before_it_touches_the_state() -> None:
    qm, producer = _manager(), MemoryProducer()
    forged = make_envelope(submit("j1").model_copy(update={"tenant": "team-b"}), "pipeline")
    delivery = Delivery(topic=A, partition=0, offset=1, key=b"j1", timestamp_ms=0, attempt=1,
                        _producer=cast(EnvelopeProducer, producer))
    with pytest.raises(Refused) as refused:
        await qm.handle(forged, delivery)
    assert refused.value.reason == TENANT_NOT_PROVEN
    assert "j1" not in qm.state.jobs and producer.sent == []
    honest = make_envelope(submit("j2"), "pipeline")
    ok = Delivery(topic=A, partition=0, offset=2, key=b"j2", timestamp_ms=0, attempt=1,
                  _producer=cast(EnvelopeProducer, producer))
    await qm.handle(honest, ok)
    await ok.settle()
    assert "j2" in qm.state.jobs


def _with_env(job_id: str, env: dict[str, object]) -> SubmitJob:
    msg = submit(job_id)
    template = msg.spec.template.model_copy(update={"env": env})
    return msg.model_copy(update={"spec": msg.spec.model_copy(update={"template": template})})


def test_a_tenant_topics_submission_with_a_plain_secret_is_refused() -> None:
    leaky = _with_env("j1", {"HF_TOKEN": "hf_abc", "EPOCHS": "3"})
    reason = plain_secret_refusal(A, leaky)
    assert reason is not None and "HF_TOKEN" in reason and "hf_abc" not in reason and "EPOCHS" not in reason
    assert plain_secret_refusal(A, _with_env("j2", {"EPOCHS": "3"})) is None
    assert plain_secret_refusal(INTENTS_TOPIC, leaky) is None  # the gateway's topic: it refused them already
    assert plain_secret_refusal(A, CancelJob(job_id="j1", requested_by="x")) is None


async def test_the_handler_dead_letters_a_plain_secret_from_a_tenant_topic() -> None:
    qm, producer = _manager(), MemoryProducer()
    leaky = make_envelope(_with_env("j1", {"DB_PASSWORD": "hunter2"}), "pipeline")
    delivery = Delivery(topic=A, partition=0, offset=1, key=b"j1", timestamp_ms=0, attempt=1,
                        _producer=cast(EnvelopeProducer, producer))
    with pytest.raises(Refused) as refused:
        await qm.handle(leaky, delivery)
    assert refused.value.reason == PLAIN_SECRET_ENV and "DB_PASSWORD" in refused.value.detail
    assert "j1" not in qm.state.jobs and producer.sent == []
